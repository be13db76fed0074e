"""WriteTxnMarkers (key 27): the transaction coordinator's COMMIT/ABORT markers, appended by
the partition leaders (Kafka's KafkaApis.handleWriteTxnMarkersRequest).

Each marker becomes one control batch per partition, appended with origin COORDINATOR and
acks=-1: a partition is answered once the marker is replicated, or with its error
(NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT,
...; the coordinator retries those).  Once a marker is written to ``__consumer_offsets``
partitions, the group coordinator makes the transaction's offsets visible (commit) or drops
them (abort).  kio has no v0 of this API, so v1 (flexible) is the one served.

Only brokers (ClusterAction on the cluster) may write markers: others get
CLUSTER_AUTHORIZATION_FAILED for every partition and nothing is appended.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from odradek.broker.apis.authorization import cluster_authorized
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.broker.group.offsets_topic import OFFSETS_TOPIC
from odradek.common import TopicPartition, now_ms
from odradek.log.log_info import AppendOrigin
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import Operation

if TYPE_CHECKING:
    from odradek.broker.context import TransactionsContext
    from odradek.broker.replica_manager import ReplicaManager
    from odradek.net.server import Request, Response

log = logging.getLogger(__name__)

__all__ = ["TxnMarker", "handle_write_txn_markers", "marker_entries", "write_txn_markers"]


class _MarkerTopic(Protocol):
    name: str
    partition_indexes: Sequence[int]


class TxnMarker(Protocol):
    """One marker as WriteTxnMarkersRequest carries it (kio's WritableTxnMarker has this shape)."""

    producer_id: int
    producer_epoch: int
    transaction_result: bool  # True: commit
    topics: Sequence[_MarkerTopic]
    coordinator_epoch: int


def marker_entries(marker: TxnMarker, timestamp: int) -> list[tuple[str, int, bytearray]]:
    """(topic, partition, control batch) for each partition of ``marker``."""
    batch = build_end_txn_marker_batch(
        ControlRecordType.COMMIT if marker.transaction_result else ControlRecordType.ABORT,
        producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
        coordinator_epoch=marker.coordinator_epoch, timestamp=timestamp)
    # A copy per partition: the leader rewrites offsets and epoch in place.
    return [(t.name, p, bytearray(batch)) for t in marker.topics for p in t.partition_indexes]


async def write_txn_markers(replica_manager: ReplicaManager, group_coordinator: Any,
                            markers: Iterable[TxnMarker], timeout_ms: int
                            ) -> list[tuple[int, dict[TopicPartition, ErrorCode]]]:
    """Append every marker on the leaders here and wait for replication; per marker, its
    producer id and each partition's error.  ``group_coordinator.complete_txn(producer_id,
    partitions, commit)`` is called for the ``__consumer_offsets`` partitions written."""
    now = now_ms()

    async def one(marker: TxnMarker) -> tuple[int, dict[TopicPartition, ErrorCode]]:
        entries = marker_entries(marker, now)
        results, delayed = replica_manager.append_records(-1, timeout_ms, entries, origin=AppendOrigin.COORDINATOR,
                                                          internal_topics_allowed=True)
        if delayed is not None:
            results = await delayed.future
        errors = {tp: ErrorCode(r.error) for tp, r in results.items()}
        written = [tp.partition for tp, e in errors.items() if tp.topic == OFFSETS_TOPIC and e == ErrorCode.none]
        if written and group_coordinator is not None:
            try:
                done = group_coordinator.complete_txn(marker.producer_id, written, bool(marker.transaction_result))
                if inspect.isawaitable(done):
                    await done
            except Exception:
                # As Kafka: the coordinator retries the marker for these partitions.
                log.exception("Could not complete the transactional offsets of producer %d", marker.producer_id)
                for partition in written:
                    errors[TopicPartition(OFFSETS_TOPIC, partition)] = ErrorCode.unknown_server_error
        return marker.producer_id, errors

    return list(await asyncio.gather(*(one(m) for m in markers)))


@api(ApiKey.WRITE_TXN_MARKERS, "WriteTxnMarkers", 1, 1)
async def handle_write_txn_markers(broker: TransactionsContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.WRITE_TXN_MARKERS, request.api_version)
    if not cluster_authorized(broker, request, Operation.CLUSTER_ACTION):
        answers = [(marker.producer_id, {TopicPartition(t.name, p): ErrorCode.cluster_authorization_failed
                                         for t in marker.topics for p in t.partition_indexes})
                   for marker in body.markers]
    else:
        answers = await write_txn_markers(broker.replica_manager, broker.group_coordinator, body.markers,
                                          broker.config["request.timeout.ms"])
    markers = []
    for producer_id, errors in answers:
        by_topic: dict[str, list[object]] = {}
        for tp, error in errors.items():
            by_topic.setdefault(tp.topic, []).append(
                build(m.WritableTxnMarkerPartitionResult, partition_index=tp.partition, error_code=error))
        markers.append(build(m.WritableTxnMarkerResult, producer_id=producer_id, topics=tuple(
            build(m.WritableTxnMarkerTopicResult, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())))
    return respond(request, build(m.WriteTxnMarkersResponse, markers=tuple(markers)))
