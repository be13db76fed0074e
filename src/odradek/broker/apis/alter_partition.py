"""AlterPartition (key 56): a leader asks the controller to change an ISR."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from odradek.broker.apis.authorization import cluster_authorized
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.controller.events import AlterPartitionReceived
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import Operation
from odradek.zk.zk_data import LeaderAndIsr

if TYPE_CHECKING:
    from odradek.broker.context import ControlContext
    from odradek.net.server import Request, Response



@api(ApiKey.ALTER_PARTITION, "AlterPartition", 2, 3)
async def handle_alter_partition(broker: ControlContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.ALTER_PARTITION, request.api_version)
    if not cluster_authorized(broker, request, Operation.CLUSTER_ACTION):
        # KafkaApis.handleAlterIsrRequest: only brokers (ClusterAction) change an ISR.
        return respond(request, build(m.AlterPartitionResponse, error_code=ErrorCode.cluster_authorization_failed,
                                      topics=()))
    controller = broker.controller
    # (Topic ids are resolved by the controller's event thread: a controller still loading
    # its context must not call a known topic unknown.)
    changes: dict[tuple[Any, int], tuple[int, tuple[int, ...], int]] = {}
    for t in body.topics:
        for p in t.partitions:
            isr = tuple(p.new_isr) if hasattr(p, "new_isr") else tuple(b.broker_id for b in p.new_isr_with_epochs)
            changes[(t.topic_id, p.partition_index)] = (p.leader_epoch, isr, p.partition_epoch)
    reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    if changes:
        controller.event_manager.put(AlterPartitionReceived(body.broker_id, body.broker_epoch, changes, reply))
        top, results = await reply
    else:
        top, results = (ErrorCode.none if controller.is_active else ErrorCode.not_controller), {}
    by_topic: dict[Any, list[object]] = {}
    for (topic_id, partition), outcome in results.items():
        if isinstance(outcome, LeaderAndIsr):
            entry = build(m.PartitionData, partition_index=partition, error_code=ErrorCode.none,
                          leader_id=outcome.leader, leader_epoch=outcome.leader_epoch, isr=outcome.isr,
                          leader_recovery_state=0, partition_epoch=outcome.zk_version)
        else:
            entry = build(m.PartitionData, partition_index=partition, error_code=outcome, leader_id=-1,
                          leader_epoch=-1, isr=(), leader_recovery_state=0, partition_epoch=-1)
        by_topic.setdefault(topic_id, []).append(entry)
    return respond(request, build(m.AlterPartitionResponse, error_code=top, topics=tuple(
        build(m.TopicData, topic_id=tid, partitions=tuple(ps)) for tid, ps in by_topic.items())))
