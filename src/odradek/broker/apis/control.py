"""The controller's requests to brokers (LeaderAndIsr, StopReplica, UpdateMetadata) and the
brokers' ControlledShutdown request to the controller.

All four need ClusterAction on the cluster (KafkaApis' authorizeClusterOperation): refused, they
answer CLUSTER_AUTHORIZATION_FAILED (for every partition, as Kafka's getErrorResponse) and change
nothing."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from odradek.broker.apis.authorization import cluster_authorized
from odradek.broker.apis.registry import api, decode_body, respond
from odradek.controller.events import ControlledShutdown
from odradek.protocol import control
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import Operation

_REFUSED = ErrorCode.cluster_authorization_failed

if TYPE_CHECKING:
    from odradek.broker.context import ControlContext
    from odradek.net.server import Request, Response


@api(ApiKey.LEADER_AND_ISR, "LeaderAndIsr", control.LEADER_AND_ISR_VERSION, control.LEADER_AND_ISR_VERSION)
async def handle_leader_and_isr(broker: ControlContext, request: Request) -> Response:
    body = decode_body(request)
    if not cluster_authorized(broker, request, Operation.CLUSTER_ACTION):
        return respond(request, control.LeaderAndIsrResponse(error_code=_REFUSED, topics=tuple(
            control.LeaderAndIsrTopicError(topic_id=t.topic_id, partition_errors=tuple(
                control.LeaderAndIsrPartitionError(partition_index=p.partition_index, error_code=_REFUSED)
                for p in t.partition_states))
            for t in body.topic_states)))
    manager = broker.replica_manager
    async with manager.state_change_lock:
        # New logs take their topic's config from ZooKeeper (as Kafka's LogManager does).
        topics = manager.topics_without_logs(body)
        configs = await broker.zk.get_topic_configs(topics) if topics else {}
        response = await manager.become_leader_or_follower(request.header.correlation_id, body, configs)
    return respond(request, response)


@api(ApiKey.STOP_REPLICA, "StopReplica", control.STOP_REPLICA_VERSION, control.STOP_REPLICA_VERSION)
async def handle_stop_replica(broker: ControlContext, request: Request) -> Response:
    body = decode_body(request)
    if not cluster_authorized(broker, request, Operation.CLUSTER_ACTION):
        return respond(request, control.StopReplicaResponse(error_code=_REFUSED, partition_errors=tuple(
            control.StopReplicaPartitionError(topic_name=t.topic_name, partition_index=p.partition_index,
                                              error_code=_REFUSED)
            for t in body.topic_states for p in t.partition_states)))
    manager = broker.replica_manager
    async with manager.state_change_lock:
        response, checkpoints = manager.stop_replicas_then_checkpoint(request.header.correlation_id, body)
        # Written before the lock goes, so before a LeaderAndIsr can recreate a deleted topic.
        await asyncio.to_thread(manager.log_manager.write_checkpoints, checkpoints)
    return respond(request, response)


@api(ApiKey.UPDATE_METADATA, "UpdateMetadata", control.UPDATE_METADATA_VERSION, control.UPDATE_METADATA_VERSION)
async def handle_update_metadata(broker: ControlContext, request: Request) -> Response:
    if not cluster_authorized(broker, request, Operation.CLUSTER_ACTION):
        return respond(request, control.UpdateMetadataResponse(error_code=_REFUSED))
    body = decode_body(request)
    async with broker.replica_manager.state_change_lock:
        error = broker.replica_manager.maybe_update_metadata_cache(request.header.correlation_id, body)
    return respond(request, control.UpdateMetadataResponse(error_code=error))


@api(ApiKey.CONTROLLED_SHUTDOWN, "ControlledShutdown", control.CONTROLLED_SHUTDOWN_VERSION,
     control.CONTROLLED_SHUTDOWN_VERSION)
async def handle_controlled_shutdown(broker: ControlContext, request: Request) -> Response:
    if not cluster_authorized(broker, request, Operation.CLUSTER_ACTION):
        return respond(request, control.ControlledShutdownResponse(error_code=_REFUSED, remaining_partitions=()))
    body = decode_body(request)
    reply: asyncio.Future[tuple[ErrorCode, list]] = asyncio.get_running_loop().create_future()
    broker.controller.event_manager.put(ControlledShutdown(body.broker_id, body.broker_epoch, reply))
    error, remaining = await reply
    return respond(request, control.ControlledShutdownResponse(
        error_code=error,
        remaining_partitions=tuple(control.RemainingPartition(topic_name=tp.topic, partition_index=tp.partition)
                                   for tp in remaining)))
