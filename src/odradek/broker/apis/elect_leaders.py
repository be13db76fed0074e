"""ElectLeaders (key 43, KIP-460): preferred or unclean leader elections by the controller
(Kafka 2.8's KafkaApis.handleElectReplicaLeader and ReplicaManager.electLeaders).

Any broker takes the request and hands it to its own controller, which answers NOT_CONTROLLER
for every partition unless it is the active one (clients send it to the controller).  It needs
Alter on the cluster: without it, every partition named is refused and the whole answer
carries CLUSTER_AUTHORIZATION_FAILED.  No partitions named means every partition this broker
knows, and then the partitions that needed no election are left out of the answer.  A
partition the controller gave a new leader is answered once this broker's metadata shows that
leader (Kafka's DelayedElectLeader), or REQUEST_TIMED_OUT after the request's timeout.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from odradek.broker.apis.admin_topics import await_metadata
from odradek.broker.apis.authorization import cluster_authorized
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.common import TopicPartition
from odradek.controller.events import ElectionTrigger, ReplicaLeaderElection
from odradek.controller.leader_selectors import ElectionType
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ApiError, ErrorCode
from odradek.security.acls import Operation

if TYPE_CHECKING:
    from odradek.broker.context import PartitionAdminContext
    from odradek.broker.metadata_cache import MetadataCache
    from odradek.net.server import Request, Response

# The request's election_type (Kafka's ElectionType).
ELECTION_TYPES = {0: ElectionType.PREFERRED, 1: ElectionType.UNCLEAN}


@api(ApiKey.ELECT_LEADERS, "ElectLeaders", 0, 2)
async def handle_elect_leaders(broker: PartitionAdminContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.ELECT_LEADERS, request.api_version)
    named = None if body.topic_partitions is None else {
        TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions}
    if not cluster_authorized(broker, request, Operation.ALTER):
        refused = ApiError(ErrorCode.cluster_authorization_failed)
        return _respond(request, m, refused.error, dict.fromkeys(named or (), refused))
    # v0 has no election type: it elects preferred leaders.
    election = ELECTION_TYPES.get(getattr(body, "election_type", 0))
    if election is None:
        return _respond(request, m, ErrorCode.invalid_request, dict.fromkeys(
            named or (), ApiError(ErrorCode.invalid_request, f"Unknown election type {body.election_type}")))
    cache = broker.metadata_cache
    partitions = named if named is not None else {
        TopicPartition(t, p) for t in cache.topics() for p in cache.partitions_of(t)}
    reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    broker.controller.event_manager.put(ReplicaLeaderElection(
        frozenset(partitions), election, ElectionTrigger.ADMIN_CLIENT, reply))
    top, elected = await reply
    if top != ErrorCode.none:  # not (or no longer) the active controller
        elected = dict.fromkeys(partitions, ApiError(top))
    results = await _when_leaders_known(cache, elected, int(body.timeout.total_seconds() * 1000))
    if named is None:
        results = {tp: r for tp, r in results.items() if r.error != ErrorCode.election_not_needed}
    return _respond(request, m, ErrorCode.none, results)


async def _when_leaders_known(cache: MetadataCache, elected: dict[TopicPartition, int | ApiError],
                              timeout_ms: int) -> dict[TopicPartition, ApiError]:
    """Each partition's answer once this broker's metadata shows the leaders the controller
    elected; those it does not show by the deadline time out."""
    expected = {tp: leader for tp, leader in elected.items() if isinstance(leader, int)}

    def known(tp: TopicPartition) -> bool:
        p = cache.partition(tp.topic, tp.partition)
        return p is not None and p.leader == expected[tp]

    await await_metadata(cache, lambda: all(known(tp) for tp in expected), timeout_ms)
    return {tp: (result if isinstance(result, ApiError)
                 else ApiError(ErrorCode.none) if known(tp) else ApiError(ErrorCode.request_timed_out))
            for tp, result in elected.items()}


def _respond(request: Request, m: Any, top: ErrorCode, results: dict[TopicPartition, ApiError]) -> Response:
    by_topic: dict[str, list[object]] = defaultdict(list)
    for tp, result in sorted(results.items()):
        by_topic[tp.topic].append(build(m.PartitionResult, partition_id=tp.partition, error_code=result.error,
                                        error_message=result.message))
    return respond(request, build(m.ElectLeadersResponse, throttle_time=0, error_code=top,
                                  replica_election_results=tuple(
                                      build(m.ReplicaElectionResult, topic=t, partition_result=tuple(ps))
                                      for t, ps in by_topic.items())))
