"""Committed offsets: OffsetCommit (key 8), OffsetFetch (key 9) and OffsetDelete (key 47).

The group coordinator (:mod:`odradek.broker.group`) validates and stores; these handlers
check the partitions against the metadata cache and translate between wire versions.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from odradek.broker.apis.groups import ms
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.broker.group.coordinator import PartitionOffset
from odradek.broker.group.group import OffsetAndMetadata
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.context import BrokerContext
    from odradek.broker.metadata_cache import MetadataCache
    from odradek.net.server import Request, Response


_DEFAULT_RETENTION = -1  # OffsetCommit v2-4: the broker's offsets.retention.minutes

TP = tuple[str, int]


def by_topic(items: Iterable[tuple[TP, Any]]) -> dict[str, list[tuple[int, Any]]]:
    grouped: dict[str, list[tuple[int, Any]]] = {}
    for (topic, partition), value in items:
        grouped.setdefault(topic, []).append((partition, value))
    return grouped


def requested_offsets(cache: MetadataCache, topics: Iterable[Any], commit_timestamp: int, expire_timestamp: int = -1
                      ) -> tuple[list[TP], dict[TP, ErrorCode], dict[TP, OffsetAndMetadata]]:
    """An OffsetCommit's or TxnOffsetCommit's partitions in request order, the errors of those
    the metadata cache does not know, and the offsets of the others."""
    order: list[TP] = []
    errors: dict[TP, ErrorCode] = {}
    offsets: dict[TP, OffsetAndMetadata] = {}
    for t in topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            order.append(tp)
            if cache.partition(t.name, p.partition_index) is None:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                offsets[tp] = OffsetAndMetadata(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                                p.committed_metadata or "", commit_timestamp, expire_timestamp)
    return order, errors, offsets


@api(ApiKey.OFFSET_COMMIT, "OffsetCommit", 2, 8)
async def handle_offset_commit(broker: BrokerContext, request: Request) -> Response:
    body = decode_body(request)
    version = request.api_version
    now = time.time_ns() // 1_000_000
    retention = ms(body.retention_time) if version <= 4 else _DEFAULT_RETENTION
    expire = now + retention if retention != _DEFAULT_RETENTION else -1
    order, errors, offsets = requested_offsets(broker.metadata_cache, body.topics, now, expire)
    if offsets:
        errors.update(await broker.group_coordinator.commit_offsets(
            body.group_id, body.member_id, getattr(body, "group_instance_id", None),
            body.generation_id_or_member_epoch, offsets))
    m = response_module(ApiKey.OFFSET_COMMIT, version)
    topics = tuple(
        build(m.OffsetCommitResponseTopic, name=topic, partitions=tuple(
            build(m.OffsetCommitResponsePartition, partition_index=p, error_code=error) for p, error in parts))
        for topic, parts in by_topic((tp, errors[tp]) for tp in dict.fromkeys(order)).items())
    return respond(request, build(m.OffsetCommitResponse, throttle_time=0, topics=topics))


@api(ApiKey.OFFSET_FETCH, "OffsetFetch", 1, 8)
def handle_offset_fetch(broker: BrokerContext, request: Request) -> Response:
    body = decode_body(request)
    version = request.api_version
    m = response_module(ApiKey.OFFSET_FETCH, version)
    require_stable = getattr(body, "require_stable", False)
    if version >= 8:
        groups = []
        for g in body.groups:
            wanted = None if g.topics is None else [(t.name, p) for t in g.topics for p in t.partition_indexes]
            error, offsets = broker.group_coordinator.fetch_offsets(g.group_id, wanted, require_stable)
            groups.append(build(m.OffsetFetchResponseGroup, group_id=g.group_id, error_code=error,
                                topics=_topics(m, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions",
                                               offsets, wanted)))
        return respond(request, build(m.OffsetFetchResponse, throttle_time=0, groups=tuple(groups)))
    wanted = None if body.topics is None else [(t.name, p) for t in body.topics for p in t.partition_indexes]
    error, offsets = broker.group_coordinator.fetch_offsets(body.group_id, wanted, require_stable)
    if error != ErrorCode.none and version < 2:
        # v1 has no top-level error: each requested partition carries it.
        offsets = {tp: PartitionOffset(error=error) for tp in wanted or ()}
    elif error != ErrorCode.none:
        offsets = {}
    return respond(request, build(
        m.OffsetFetchResponse, throttle_time=0, error_code=error,
        topics=_topics(m, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition", offsets,
                       wanted if error == ErrorCode.none or version < 2 else [])))


def _topics(m: Any, topic_cls: str, partition_cls: str, offsets: Mapping[TP, PartitionOffset],
            wanted: list[TP] | None) -> tuple[Any, ...]:
    order = list(dict.fromkeys(wanted)) if wanted is not None else sorted(offsets)
    return tuple(
        build(getattr(m, topic_cls), name=topic, partitions=tuple(
            build(getattr(m, partition_cls), partition_index=p, committed_offset=o.offset,
                  committed_leader_epoch=o.leader_epoch, metadata=o.metadata, error_code=o.error)
            for p, o in parts))
        for topic, parts in by_topic((tp, offsets.get(tp, PartitionOffset())) for tp in order).items())


@api(ApiKey.OFFSET_DELETE, "OffsetDelete", 0, 0)
def handle_offset_delete(broker: BrokerContext, request: Request) -> Response:
    body = decode_body(request)
    cache = broker.metadata_cache
    order = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    errors = {tp: ErrorCode.unknown_topic_or_partition for tp in order if cache.partition(*tp) is None}
    known = [tp for tp in order if tp not in errors]
    m = response_module(ApiKey.OFFSET_DELETE, request.api_version)
    error, deleted = broker.group_coordinator.delete_offsets(body.group_id, known)
    if error != ErrorCode.none:
        return respond(request, build(m.OffsetDeleteResponse, throttle_time=0, error_code=error, topics=()))
    errors.update(deleted)
    return respond(request, build(m.OffsetDeleteResponse, throttle_time=0, error_code=ErrorCode.none, topics=tuple(
        build(m.OffsetDeleteResponseTopic, name=topic, partitions=tuple(
            build(m.OffsetDeleteResponsePartition, partition_index=p, error_code=e) for p, e in parts))
        for topic, parts in by_topic((tp, errors[tp]) for tp in dict.fromkeys(order)).items())))
