"""``odradek replica-verification``: Kafka 2.8's ReplicaVerificationTool
(kafka-replica-verification.sh): do all replicas of a set of partitions hold the same data?

Every round, each broker is fetched from (as Kafka's debugging consumer, replica id -2, which
may read a follower's copy) for all its replicas at the offsets verified so far; then the
batches of every partition are walked in step across its replicas, up to each replica's high
watermark: their last offsets must match (else the tool stops: "replica A's offset X doesn't
match replica B's offset Y") and so must their stored checksums ("has unmatched checksum").
Every report interval it prints the largest distance between the verified offset and the
high watermark: "max lag is L for partition T-P at offset O among N partitions".

``ReplicaVerifier`` is that walk without I/O; ``ReplicaFetcher`` fetches one broker's replicas.
"""

from __future__ import annotations

import datetime
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from odradek.admin.client import AdminClientError, AdminConnection
from odradek.admin.hash_map_order import java_hash_map_order, java_topic_partition_hashcode
from odradek.common import TopicPartition
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages import build
from odradek.protocol.records import iter_batches
from odradek.security.client import ClientSecurity

__all__ = ["BatchInfo", "FetchedReplica", "ReplicaFetcher", "ReplicaMismatch", "ReplicaVerifier", "time_text"]

DEBUGGING_CONSUMER_ID = -2  # Kafka's Request.DebuggingConsumerId: may fetch from followers


class BatchInfo(NamedTuple):
    """What the verification compares of one record batch."""

    last_offset: int
    next_offset: int
    checksum: int


class FetchedReplica(NamedTuple):
    """One replica's answer to a round's fetch: its high watermark and the batches read."""

    high_watermark: int
    batches: Sequence[BatchInfo]


class ReplicaMismatch(Exception):
    """Replicas disagree on a batch's offsets: the tool's last line (it stops, exit code 1)."""


def time_text(now_ms: int) -> str:
    """Kafka's ``yyyy-MM-dd HH:mm:ss,SSS`` in local time."""
    moment = datetime.datetime.fromtimestamp(now_ms / 1000)
    return f"{moment:%Y-%m-%d %H:%M:%S},{now_ms % 1000:03d}"


def batches_of(records: bytes | None) -> list[BatchInfo]:
    """The whole batches of a fetch response's records (a cut last batch is left out)."""
    return [BatchInfo(h.base_offset + h.last_offset_delta, h.base_offset + h.last_offset_delta + 1, h.crc)
            for _, h in iter_batches(records or b"", partial_tail_ok=True)]


class ReplicaVerifier:
    """The verification state of Kafka's ReplicaBuffer: the next offset to verify of each
    partition, and the lag reported every ``report_interval_ms``."""

    def __init__(self, expected_replicas: Mapping[TopicPartition, int], initial_offsets: Mapping[TopicPartition, int],
                 report_interval_ms: int, now_ms: int) -> None:
        self.expected_replicas = dict(expected_replicas)
        # Kafka walks its partitions in the order of a ConcurrentHashMap; ties in lag go to the first.
        self.partitions = java_hash_map_order(expected_replicas, lambda tp: java_topic_partition_hashcode(*tp))
        self.offsets = dict(initial_offsets)
        self.report_interval_ms = report_interval_ms
        self.last_report_ms = now_ms
        self.max_lag = -1
        self.offset_with_max_lag = -1
        self.max_lag_partition: TopicPartition | None = None

    def verify(self, fetched: Mapping[TopicPartition, Mapping[int, FetchedReplica]], now_ms: int) -> list[str]:
        """Walk a round's fetched data; the lines to print (a checksum mismatch, the periodic
        report).  Raises ReplicaMismatch when replicas disagree on offsets."""
        lines: list[str] = []
        self.max_lag = -1
        for tp in self.partitions:
            replicas = fetched.get(tp, {})
            if len(replicas) != self.expected_replicas[tp]:
                continue  # a broker did not answer: verify this partition in a later round
            lines += self._walk(tp, replicas, now_ms)
            max_hw = max(r.high_watermark for r in replicas.values())
            if max_hw - self.offsets[tp] > self.max_lag:
                self.offset_with_max_lag = self.offsets[tp]
                self.max_lag = max_hw - self.offset_with_max_lag
                self.max_lag_partition = tp
        if now_ms - self.last_report_ms > self.report_interval_ms:
            lines.append(f"{time_text(now_ms)}: max lag is {self.max_lag} for partition {self.max_lag_partition} "
                         f"at offset {self.offset_with_max_lag} among {len(self.partitions)} partitions")
            self.last_report_ms = now_ms
        return lines

    def _walk(self, tp: TopicPartition, replicas: Mapping[int, FetchedReplica], now_ms: int) -> list[str]:
        lines = []
        iterators = {replica: iter(answer.batches) for replica, answer in sorted(replicas.items())}
        in_all = True
        while in_all:
            first: tuple[int, BatchInfo] | None = None
            for replica, batches in iterators.items():
                batch = next(batches, None)
                if batch is None or batch.last_offset >= replicas[replica].high_watermark:
                    in_all = False  # only verify up to each replica's high watermark
                elif first is None:
                    first = (replica, batch)
                elif first[1].last_offset != batch.last_offset:
                    raise ReplicaMismatch(
                        f"{time_text(now_ms)}: partition {tp}: replica {first[0]}'s offset {first[1].last_offset} "
                        f"doesn't match replica {replica}'s offset {batch.last_offset}")
                elif first[1].checksum != batch.checksum:
                    lines.append(
                        f"{time_text(now_ms)}: partition {tp} has unmatched checksum at offset {batch.last_offset}; "
                        f"replica {first[0]}'s checksum {first[1].checksum}; replica {replica}'s checksum "
                        f"{batch.checksum}")
            if in_all and first is not None:
                self.offsets[tp] = first[1].next_offset
        return lines


class _Node(AdminConnection):
    """An AdminConnection that speaks Fetch too (v12: the last one with topic names)."""

    max_versions = {**AdminConnection.max_versions, ApiKey.FETCH: 12}
    api_names = {**AdminConnection.api_names, ApiKey.FETCH: "Fetch"}


@dataclass
class ReplicaFetcher:
    """Fetches one broker's replicas, over one connection kept for all rounds."""

    address: str
    partitions: Sequence[TopicPartition]
    fetch_size: int
    max_wait_ms: int
    security: ClientSecurity | None = None
    _node: _Node | None = None

    async def fetch(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, FetchedReplica]:
        """The replicas' batches from ``offsets``; a broker that cannot be reached answers
        nothing (high watermark -1), as in Kafka's tool, and is connected to again next round."""
        grouped: dict[str, list[int]] = {}
        for tp in self.partitions:
            grouped.setdefault(tp.topic, []).append(tp.partition)

        def body(m: types.ModuleType, _version: int) -> Any:
            return build(m.FetchRequest, replica_id=DEBUGGING_CONSUMER_ID, max_wait=self.max_wait_ms, min_bytes=1,
                         max_bytes=self.fetch_size * len(self.partitions), isolation_level=0, session_id=0,
                         session_epoch=-1, rack_id="", forgotten_topics_data=(), topics=tuple(
                             build(m.FetchTopic, topic=topic, partitions=tuple(
                                 build(m.FetchPartition, partition=p, current_leader_epoch=-1,
                                       fetch_offset=offsets[TopicPartition(topic, p)], last_fetched_epoch=-1,
                                       log_start_offset=-1, partition_max_bytes=self.fetch_size) for p in ps))
                             for topic, ps in grouped.items()))

        try:
            if self._node is None:
                node = _Node(self.address, security=self.security)
                await node.__aenter__()
                self._node = node
            response = await self._node.request(ApiKey.FETCH, body)
        except (OSError, TimeoutError, AdminClientError, KafkaError):
            await self.close()
            return {tp: FetchedReplica(-1, ()) for tp in self.partitions}
        answers = {}
        for t in response.responses:
            for p in t.partitions:
                ok = p.error_code == ErrorCode.none
                answers[TopicPartition(t.topic, p.partition_index)] = FetchedReplica(
                    p.high_watermark if ok else -1, batches_of(p.records) if ok else ())
        return answers

    async def close(self) -> None:
        if self._node is not None:
            node, self._node = self._node, None
            await node.__aexit__(None, None, None)
