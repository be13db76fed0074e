"""Requests that only a partition's leader answers (ListOffsets, DeleteRecords), sent the way
Kafka's admin client sends them: one Metadata request to learn the leaders, then one request
per leader carrying all of its partitions.  A partition the metadata does not know, or one
without a leader, gets its error without a request."""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping
from typing import Any

from odradek.admin.client import ADMIN_TIMEOUT_MS, AdminConnection, ClusterView
from odradek.common import TopicPartition
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import build
from odradek.security.client import ClientSecurity

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_TIMESTAMP",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "LeaderRequests",
    "OffsetAnswer",
    "partitions_of",
]

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
_NO_REPLICA = -1  # ListOffsets from a client, not a follower

# (error, offset, timestamp) of one partition; offset -1 when there is none.
OffsetAnswer = tuple[ErrorCode, int, int]


class _Node(AdminConnection):
    """An AdminConnection that speaks ListOffsets and DeleteRecords too."""

    max_versions = {**AdminConnection.max_versions, ApiKey.LIST_OFFSETS: 7, ApiKey.DELETE_RECORDS: 2}
    api_names = {**AdminConnection.api_names, ApiKey.LIST_OFFSETS: "ListOffsets",
                 ApiKey.DELETE_RECORDS: "DeleteRecords"}


def partitions_of(view: ClusterView) -> dict[str, list[int]]:
    """The partitions of each topic a Metadata answer describes without error."""
    return {t.name: sorted(p.partition_index for p in t.partitions)
            for t in view.topics if t.error_code == ErrorCode.none}


class LeaderRequests:
    """ListOffsets and DeleteRecords for many partitions, each sent to its leader."""

    def __init__(self, bootstrap: str, *, security: ClientSecurity | None = None) -> None:
        self.bootstrap = bootstrap
        self.security = security

    async def metadata(self, topics: Iterable[str] | None) -> ClusterView:
        """Brokers and topics (None: every topic) as the bootstrap broker sees them."""
        async with _Node(self.bootstrap, security=self.security) as node:
            return await node.metadata(None if topics is None else sorted(set(topics)))

    async def _by_leader(self, partitions: Iterable[TopicPartition]
                         ) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, ErrorCode]]:
        wanted = list(dict.fromkeys(partitions))
        view = await self.metadata({tp.topic for tp in wanted})
        leaders = {TopicPartition(t.name, p.partition_index): p.leader_id
                   for t in view.topics if t.error_code == ErrorCode.none for p in t.partitions}
        by_leader: dict[str, list[TopicPartition]] = {}
        failed: dict[TopicPartition, ErrorCode] = {}
        for tp in wanted:
            leader = leaders.get(tp)
            if leader is None:
                failed[tp] = ErrorCode.unknown_topic_or_partition
            elif leader not in view.brokers:
                failed[tp] = ErrorCode.leader_not_available
            else:
                host, port, _ = view.brokers[leader]
                by_leader.setdefault(f"{host}:{port}", []).append(tp)
        return by_leader, failed

    async def list_offsets(self, partitions: Iterable[TopicPartition], timestamp: int,
                           isolation_level: int = READ_UNCOMMITTED) -> dict[TopicPartition, OffsetAnswer]:
        """Each partition's offset for ``timestamp`` (EARLIEST, LATEST, MAX_TIMESTAMP or a time
        in ms: the first offset whose record timestamp is at or after it)."""
        by_leader, failed = await self._by_leader(partitions)
        answers: dict[TopicPartition, OffsetAnswer] = {tp: (e, -1, -1) for tp, e in failed.items()}
        for address, tps in by_leader.items():
            def body(m: types.ModuleType, _version: int, tps: list[TopicPartition] = tps) -> Any:
                return build(m.ListOffsetsRequest, replica_id=_NO_REPLICA, isolation_level=isolation_level,
                             topics=tuple(build(m.ListOffsetsTopic, name=topic, partitions=tuple(
                                 build(m.ListOffsetsPartition, partition_index=p, current_leader_epoch=-1,
                                       timestamp=timestamp, max_num_offsets=1) for p in ps))
                                 for topic, ps in _grouped(tps).items()))

            async with _Node(address, security=self.security) as node:
                response = await node.request(ApiKey.LIST_OFFSETS, body)
            for t in response.topics:
                for p in t.partitions:
                    offset = getattr(p, "offset", -1)
                    if offset == -1 and getattr(p, "old_style_offsets", None):
                        offset = p.old_style_offsets[0]
                    answers[TopicPartition(t.name, p.partition_index)] = (
                        ErrorCode(p.error_code), offset, getattr(p, "timestamp", -1))
        return answers

    async def delete_records(self, before: Mapping[TopicPartition, int]
                             ) -> dict[TopicPartition, tuple[ErrorCode, int]]:
        """Delete each partition's records before its offset (-1: its high watermark): the
        error and the new low watermark of each."""
        by_leader, failed = await self._by_leader(before)
        answers = {tp: (e, -1) for tp, e in failed.items()}
        for address, tps in by_leader.items():
            def body(m: types.ModuleType, _version: int, tps: list[TopicPartition] = tps) -> Any:
                return build(m.DeleteRecordsRequest, timeout=ADMIN_TIMEOUT_MS, topics=tuple(
                    build(m.DeleteRecordsTopic, name=topic, partitions=tuple(
                        build(m.DeleteRecordsPartition, partition_index=p, offset=before[TopicPartition(topic, p)])
                        for p in ps)) for topic, ps in _grouped(tps).items()))

            async with _Node(address, security=self.security) as node:
                response = await node.request(ApiKey.DELETE_RECORDS, body)
            for t in response.topics:
                for p in t.partitions:
                    answers[TopicPartition(t.name, p.partition_index)] = (ErrorCode(p.error_code), p.low_watermark)
        return answers


def _grouped(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped
