"""ListOffsets (key 2), OffsetForLeaderEpoch (key 23) and DeleteRecords (key 21)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from odradek.broker.apis.authorization import cluster_authorized, unauthorized_names
from odradek.broker.apis.registry import (
    answer_when_done,
    api,
    build,
    decode_body,
    respond,
    response_module,
)
from odradek.common import TopicPartition
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import Operation, ResourceType

_REFUSED = ErrorCode.topic_authorization_failed
# ListOffsets' special timestamps: latest (-1), earliest (-2) and from v7 the max timestamp (-3).
_SPECIAL_TIMESTAMPS = frozenset({-1, -2})
_SPECIAL_TIMESTAMPS_V7 = _SPECIAL_TIMESTAMPS | {-3}

if TYPE_CHECKING:
    import asyncio

    from odradek.broker.context import ProduceFetchContext
    from odradek.broker.delayed_delete_records import DeleteRecordsPartitionResult
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
def handle_delete_records(broker: ProduceFetchContext, request: Request) -> Response | asyncio.Future[Response]:
    """Answered once the records are gone from every live replica (or at the request's
    timeout): a future of the answer, completed by the DelayedDeleteRecords."""
    body = decode_body(request)
    # KafkaApis.handleDeleteRecordsRequest: Delete on each topic.
    denied = unauthorized_names(broker, request, Operation.DELETE, ResourceType.TOPIC, (t.name for t in body.topics))
    offsets = {TopicPartition(t.name, p.partition_index): p.offset
               for t in body.topics if t.name not in denied for p in t.partitions}
    results, delayed = broker.replica_manager.delete_records(body.timeout // timedelta(milliseconds=1), offsets)
    if delayed is None:
        return _delete_records_response(request, body, denied, results)
    return answer_when_done(delayed.future, lambda done: _delete_records_response(request, body, denied, done))


def _delete_records_response(request: Request, body: Any, denied: set[str],
                             results: dict[TopicPartition, DeleteRecordsPartitionResult]) -> Response:
    m = response_module(ApiKey.DELETE_RECORDS, request.api_version)
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            if t.name in denied:
                error, low = _REFUSED, -1
            else:
                result = results[TopicPartition(t.name, p.partition_index)]
                error, low = result.error, result.low_watermark
            parts.append(build(m.DeleteRecordsPartitionResult, partition_index=p.partition_index,
                               low_watermark=low, error_code=error))
        topics.append(build(m.DeleteRecordsTopicResult, name=t.name, partitions=tuple(parts)))
    return respond(request, build(m.DeleteRecordsResponse, topics=tuple(topics)))
