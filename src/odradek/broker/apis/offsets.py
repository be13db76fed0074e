"""ListOffsets (key 2), OffsetForLeaderEpoch (key 23) and DeleteRecords (key 21)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.context import BrokerContext
    from odradek.net.server import Request, Response



@api(ApiKey.LIST_OFFSETS, "ListOffsets", 1, 7)
def handle_list_offsets(broker: BrokerContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.LIST_OFFSETS, request.api_version)
    isolation_level = getattr(body, "isolation_level", 0)  # v2+
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            error, ts, offset, epoch = broker.replica_manager.offset_for_timestamp(
                t.name, p.partition_index, p.timestamp, getattr(p, "current_leader_epoch", -1), body.replica_id,
                isolation_level)
            parts.append(build(m.ListOffsetsPartitionResponse, partition_index=p.partition_index, error_code=error,
                               timestamp=ts, offset=offset, leader_epoch=epoch, old_style_offsets=()))
        topics.append(build(m.ListOffsetsTopicResponse, name=t.name, partitions=tuple(parts)))
    return respond(request, build(m.ListOffsetsResponse, topics=tuple(topics)))


@api(ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", 2, 4)
def handle_offset_for_leader_epoch(broker: BrokerContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.OFFSET_FOR_LEADER_EPOCH, request.api_version)
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            error, epoch, end = broker.replica_manager.end_offset_for_epoch(
                t.topic, p.partition, p.current_leader_epoch, p.leader_epoch)
            parts.append(build(m.EpochEndOffset, error_code=error, partition=p.partition,
                               leader_epoch=epoch, end_offset=end))
        topics.append(build(m.OffsetForLeaderTopicResult, topic=t.topic, partitions=tuple(parts)))
    return respond(request, build(m.OffsetForLeaderEpochResponse, topics=tuple(topics)))


@api(ApiKey.DELETE_RECORDS, "DeleteRecords", 0, 2)
def handle_delete_records(broker: BrokerContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.DELETE_RECORDS, request.api_version)
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            error, low = broker.replica_manager.delete_records(t.name, p.partition_index, p.offset)
            parts.append(build(m.DeleteRecordsPartitionResult, partition_index=p.partition_index,
                               low_watermark=low, error_code=error))
        topics.append(build(m.DeleteRecordsTopicResult, name=t.name, partitions=tuple(parts)))
    return respond(request, build(m.DeleteRecordsResponse, topics=tuple(topics)))


__all__ = ["ErrorCode"]
