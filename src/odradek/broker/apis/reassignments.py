"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46), KIP-455
(Kafka 2.8's KafkaApis handlers, answered by the controller).

Both go to this broker's controller, which answers NOT_CONTROLLER (the whole request) unless
it is the active one.  Alter needs Alter on the cluster, List needs Describe on it; without,
the answer carries CLUSTER_AUTHORIZATION_FAILED (Alter's for every partition named too, as
Kafka's error response does).  A null replica list cancels a partition's reassignment.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from odradek.broker.apis.authorization import cluster_authorized
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.common import TopicPartition
from odradek.controller.events import ApiPartitionReassignment, ListPartitionReassignments
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ApiError, ErrorCode
from odradek.security.acls import Operation

if TYPE_CHECKING:
    from odradek.broker.context import PartitionAdminContext
    from odradek.controller.context import ReplicaAssignment
    from odradek.net.server import Request, Response


@api(ApiKey.ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", 0, 1)
async def handle_alter_partition_reassignments(broker: PartitionAdminContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.ALTER_PARTITION_REASSIGNMENTS, request.api_version)
    targets: dict[TopicPartition, tuple[int, ...] | None] = {
        TopicPartition(t.name, p.partition_index): None if p.replicas is None else tuple(p.replicas)
        for t in body.topics for p in t.partitions}
    if not cluster_authorized(broker, request, Operation.ALTER):
        refused = ApiError(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
        return _alter_response(request, m, refused, dict.fromkeys(targets, refused))
    reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    broker.controller.event_manager.put(ApiPartitionReassignment(
        targets, getattr(body, "allow_replication_factor_change", True), reply))
    top, results = await reply
    if top != ErrorCode.none:
        return _alter_response(request, m, ApiError(top), {})
    return _alter_response(request, m, ApiError(ErrorCode.none), results)


def _alter_response(request: Request, m: Any, top: ApiError, results: dict[TopicPartition, ApiError]) -> Response:
    by_topic: dict[str, list[object]] = defaultdict(list)
    for tp, result in sorted(results.items()):
        by_topic[tp.topic].append(build(m.ReassignablePartitionResponse, partition_index=tp.partition,
                                        error_code=result.error, error_message=result.message))
    return respond(request, build(
        m.AlterPartitionReassignmentsResponse, throttle_time=0, error_code=top.error, error_message=top.message,
        responses=tuple(build(m.ReassignableTopicResponse, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())))


@api(ApiKey.LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments", 0, 0)
async def handle_list_partition_reassignments(broker: PartitionAdminContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.LIST_PARTITION_REASSIGNMENTS, request.api_version)
    if not cluster_authorized(broker, request, Operation.DESCRIBE):
        return _list_response(request, m, ApiError(ErrorCode.cluster_authorization_failed,
                                                   "Cluster authorization failed."), {})
    named = None if body.topics is None else frozenset(
        TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes)
    reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    broker.controller.event_manager.put(ListPartitionReassignments(named, reply))
    top, ongoing = await reply
    return _list_response(request, m, ApiError(top), ongoing if top == ErrorCode.none else {})


def _list_response(request: Request, m: Any, top: ApiError, ongoing: dict[TopicPartition, ReplicaAssignment]
                   ) -> Response:
    by_topic: dict[str, list[object]] = defaultdict(list)
    for tp, assignment in sorted(ongoing.items()):
        by_topic[tp.topic].append(build(
            m.OngoingPartitionReassignment, partition_index=tp.partition, replicas=assignment.replicas,
            adding_replicas=assignment.adding_replicas, removing_replicas=assignment.removing_replicas))
    return respond(request, build(
        m.ListPartitionReassignmentsResponse, throttle_time=0, error_code=top.error, error_message=top.message,
        topics=tuple(build(m.OngoingTopicReassignment, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())))
