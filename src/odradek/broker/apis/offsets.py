"""ListOffsets (key 2), OffsetForLeaderEpoch (key 23) and DeleteRecords (key 21)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.apis.authorization import cluster_authorized, unauthorized_names
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import Operation, ResourceType

_REFUSED = ErrorCode.topic_authorization_failed
# ListOffsets' special timestamps: latest (-1), earliest (-2) and from v7 the max timestamp (-3).
_SPECIAL_TIMESTAMPS = frozenset({-1, -2})
_SPECIAL_TIMESTAMPS_V7 = _SPECIAL_TIMESTAMPS | {-3}

if TYPE_CHECKING:
    from odradek.broker.context import ProduceFetchContext
    from odradek.net.server import Request, Response



@api(ApiKey.LIST_OFFSETS, "ListOffsets", 1, 7)
def handle_list_offsets(broker: ProduceFetchContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.LIST_OFFSETS, request.api_version)
    isolation_level = getattr(body, "isolation_level", 0)  # v2+
    # KafkaApis.handleListOffsetRequest: Describe on each topic.
    denied = unauthorized_names(broker, request, Operation.DESCRIBE, ResourceType.TOPIC, (t.name for t in body.topics))
    special = _SPECIAL_TIMESTAMPS_V7 if request.api_version >= 7 else _SPECIAL_TIMESTAMPS
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            if t.name in denied or (p.timestamp < 0 and p.timestamp not in special):
                # Kafka 3 refuses a negative timestamp its version does not define (KIP-734's
                # -3 from v7) with UNSUPPORTED_VERSION, before looking for the partition.
                error = _REFUSED if t.name in denied else ErrorCode.unsupported_version
                parts.append(build(m.ListOffsetsPartitionResponse, partition_index=p.partition_index,
                                   error_code=error, timestamp=-1, offset=-1, leader_epoch=-1, old_style_offsets=()))
                continue
            error, ts, offset, epoch = broker.replica_manager.offset_for_timestamp(
                t.name, p.partition_index, p.timestamp, getattr(p, "current_leader_epoch", -1), body.replica_id,
                isolation_level)
            parts.append(build(m.ListOffsetsPartitionResponse, partition_index=p.partition_index, error_code=error,
                               timestamp=ts, offset=offset, leader_epoch=epoch, old_style_offsets=()))
        topics.append(build(m.ListOffsetsTopicResponse, name=t.name, partitions=tuple(parts)))
    return respond(request, build(m.ListOffsetsResponse, topics=tuple(topics)))


@api(ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", 2, 4)
def handle_offset_for_leader_epoch(broker: ProduceFetchContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.OFFSET_FOR_LEADER_EPOCH, request.api_version)
    # KafkaApis.handleOffsetForLeaderEpochRequest: ClusterAction (followers) or, since KIP-320
    # (consumers checking for truncation), Describe on each topic.
    denied: set[str] = set()
    if not cluster_authorized(broker, request, Operation.CLUSTER_ACTION):
        denied = unauthorized_names(broker, request, Operation.DESCRIBE, ResourceType.TOPIC,
                                    (t.topic for t in body.topics))
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            if t.topic in denied:
                parts.append(build(m.EpochEndOffset, error_code=_REFUSED, partition=p.partition,
                                   leader_epoch=-1, end_offset=-1))
                continue
            error, epoch, end = broker.replica_manager.end_offset_for_epoch(
                t.topic, p.partition, p.current_leader_epoch, p.leader_epoch)
            parts.append(build(m.EpochEndOffset, error_code=error, partition=p.partition,
                               leader_epoch=epoch, end_offset=end))
        topics.append(build(m.OffsetForLeaderTopicResult, topic=t.topic, partitions=tuple(parts)))
    return respond(request, build(m.OffsetForLeaderEpochResponse, topics=tuple(topics)))


@api(ApiKey.DELETE_RECORDS, "DeleteRecords", 0, 2)
def handle_delete_records(broker: ProduceFetchContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.DELETE_RECORDS, request.api_version)
    # KafkaApis.handleDeleteRecordsRequest: Delete on each topic.
    denied = unauthorized_names(broker, request, Operation.DELETE, ResourceType.TOPIC, (t.name for t in body.topics))
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            if t.name in denied:
                parts.append(build(m.DeleteRecordsPartitionResult, partition_index=p.partition_index,
                                   low_watermark=-1, error_code=_REFUSED))
                continue
            error, low = broker.replica_manager.delete_records(t.name, p.partition_index, p.offset)
            parts.append(build(m.DeleteRecordsPartitionResult, partition_index=p.partition_index,
                               low_watermark=low, error_code=error))
        topics.append(build(m.DeleteRecordsTopicResult, name=t.name, partitions=tuple(parts)))
    return respond(request, build(m.DeleteRecordsResponse, topics=tuple(topics)))

