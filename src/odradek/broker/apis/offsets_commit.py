"""Committed offsets: OffsetCommit (key 8), OffsetFetch (key 9) and OffsetDelete (key 47).

The group coordinator (:mod:`odradek.broker.group`) validates and stores; these handlers
check the partitions against the metadata cache and translate between wire versions.

Authorization (KafkaApis, Kafka 2.8): OffsetCommit needs Read on the group, then Read on each
topic; OffsetFetch Describe on the group, then Describe on each topic (all-topics fetches leave
the others out); OffsetDelete Delete on the group, then Read on each topic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from odradek.broker.apis.authorization import unauthorized_names
from odradek.broker.apis.groups import group_allowed, ms
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.broker.group.coordinator import PartitionOffset
from odradek.broker.group.group import OffsetAndMetadata
from odradek.common import now_ms
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import Operation, ResourceType

if TYPE_CHECKING:
    from odradek.broker.context import GroupsContext
    from odradek.broker.metadata_cache import MetadataCache
    from odradek.net.server import Request, Response


_DEFAULT_RETENTION = -1  # OffsetCommit v2-4: the broker's offsets.retention.minutes

TP = tuple[str, int]


def by_topic(items: Iterable[tuple[TP, Any]]) -> dict[str, list[tuple[int, Any]]]:
    grouped: dict[str, list[tuple[int, Any]]] = {}
    for (topic, partition), value in items:
        grouped.setdefault(topic, []).append((partition, value))
    return grouped


def requested_offsets(cache: MetadataCache, topics: Iterable[Any], commit_timestamp: int, expire_timestamp: int = -1,
                      refused: Mapping[str, ErrorCode] | None = None
                      ) -> tuple[list[TP], dict[TP, ErrorCode], dict[TP, OffsetAndMetadata]]:
    """An OffsetCommit's or TxnOffsetCommit's partitions in request order, the errors of those
    refused (by topic: an authorization error) or the metadata cache does not know, and the
    offsets of the others."""
    order: list[TP] = []
    errors: dict[TP, ErrorCode] = {}
    offsets: dict[TP, OffsetAndMetadata] = {}
    for t in topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            order.append(tp)
            if refused and t.name in refused:
                errors[tp] = refused[t.name]
            elif cache.partition(t.name, p.partition_index) is None:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                offsets[tp] = OffsetAndMetadata(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                                p.committed_metadata or "", commit_timestamp, expire_timestamp)
    return order, errors, offsets


@api(ApiKey.OFFSET_COMMIT, "OffsetCommit", 2, 8)
async def handle_offset_commit(broker: GroupsContext, request: Request) -> Response:
    body = decode_body(request)
    version = request.api_version
    now = now_ms()
    retention = ms(body.retention_time) if version <= 4 else _DEFAULT_RETENTION
    expire = now + retention if retention != _DEFAULT_RETENTION else -1
    if not group_allowed(broker, request, Operation.READ, body.group_id):
        refused = dict.fromkeys((t.name for t in body.topics), ErrorCode.group_authorization_failed)
    else:
        refused = dict.fromkeys(unauthorized_names(broker, request, Operation.READ, ResourceType.TOPIC,
                                                   (t.name for t in body.topics)), ErrorCode.topic_authorization_failed)
    order, errors, offsets = requested_offsets(broker.metadata_cache, body.topics, now, expire, refused)
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
def handle_offset_fetch(broker: GroupsContext, request: Request) -> Response:
    body = decode_body(request)
    version = request.api_version
    m = response_module(ApiKey.OFFSET_FETCH, version)
    require_stable = getattr(body, "require_stable", False)
    if version >= 8:
        groups = []
        for g in body.groups:
            wanted = None if g.topics is None else [(t.name, p) for t in g.topics for p in t.partition_indexes]
            error, offsets = _fetch_offsets(broker, request, g.group_id, wanted, require_stable)
            # A group that fails (not coordinated here, refused, ...) has no topics, as in Kafka.
            groups.append(build(m.OffsetFetchResponseGroup, group_id=g.group_id, error_code=error,
                                topics=_topics(m, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions",
                                               offsets, wanted) if error == ErrorCode.none else ()))
        return respond(request, build(m.OffsetFetchResponse, throttle_time=0, groups=tuple(groups)))
    wanted = None if body.topics is None else [(t.name, p) for t in body.topics for p in t.partition_indexes]
    error, offsets = _fetch_offsets(broker, request, body.group_id, wanted, require_stable)
    if error != ErrorCode.none and version < 2:
        # v1 has no top-level error: each requested partition carries it.
        offsets = {tp: PartitionOffset(error=error) for tp in wanted or ()}
    elif error != ErrorCode.none:
        offsets = {}
    return respond(request, build(
        m.OffsetFetchResponse, throttle_time=0, error_code=error,
        topics=_topics(m, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition", offsets,
                       wanted if error == ErrorCode.none or version < 2 else [])))


def _fetch_offsets(broker: GroupsContext, request: Request, group_id: str, wanted: list[TP] | None,
                   require_stable: bool) -> tuple[ErrorCode, dict[TP, PartitionOffset]]:
    """The group's committed offsets the principal may see: GROUP_AUTHORIZATION_FAILED without
    Describe on the group, TOPIC_AUTHORIZATION_FAILED for named topics without Describe, and
    all-topics answers without those topics."""
    if not group_allowed(broker, request, Operation.DESCRIBE, group_id):
        return ErrorCode.group_authorization_failed, {}
    error, offsets = broker.group_coordinator.fetch_offsets(group_id, wanted, require_stable)
    if broker.authorizer is None or error != ErrorCode.none:
        return error, offsets
    topics = [tp[0] for tp in (wanted if wanted is not None else offsets)]
    denied = unauthorized_names(broker, request, Operation.DESCRIBE, ResourceType.TOPIC, topics)
    if not denied:
        return error, offsets
    if wanted is None:
        return error, {tp: o for tp, o in offsets.items() if tp[0] not in denied}
    refused = PartitionOffset(error=ErrorCode.topic_authorization_failed)
    return error, {tp: refused if tp[0] in denied else offsets.get(tp, PartitionOffset()) for tp in wanted}


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
def handle_offset_delete(broker: GroupsContext, request: Request) -> Response:
    body = decode_body(request)
    cache = broker.metadata_cache
    order = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    m = response_module(ApiKey.OFFSET_DELETE, request.api_version)
    if not group_allowed(broker, request, Operation.DELETE, body.group_id):
        return respond(request, build(m.OffsetDeleteResponse, throttle_time=0,
                                      error_code=ErrorCode.group_authorization_failed, topics=()))
    denied = unauthorized_names(broker, request, Operation.READ, ResourceType.TOPIC, (t.name for t in body.topics))
    errors = {tp: ErrorCode.topic_authorization_failed for tp in order if tp[0] in denied}
    errors.update({tp: ErrorCode.unknown_topic_or_partition for tp in order
                   if tp not in errors and cache.partition(*tp) is None})
    known = [tp for tp in order if tp not in errors]
    error, deleted = broker.group_coordinator.delete_offsets(body.group_id, known)
    if error != ErrorCode.none:
        return respond(request, build(m.OffsetDeleteResponse, throttle_time=0, error_code=error, topics=()))
    errors.update(deleted)
    return respond(request, build(m.OffsetDeleteResponse, throttle_time=0, error_code=ErrorCode.none, topics=tuple(
        build(m.OffsetDeleteResponseTopic, name=topic, partitions=tuple(
            build(m.OffsetDeleteResponsePartition, partition_index=p, error_code=e) for p, e in parts))
        for topic, parts in by_topic((tp, errors[tp]) for tp in dict.fromkeys(order)).items())))
