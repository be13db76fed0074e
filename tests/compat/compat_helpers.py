"""Shared by the compatibility tests: topics on a real cluster, raw Kafka requests through
odradek's own connection class, and the records each client run produces and checks.

Every client test follows one pattern: build ``n`` keyed records with headers and explicit
timestamps (:func:`make_records`), produce them with the client under test, collect what the
client's delivery reports acknowledge (partition, offset), read everything back with that
client's consumer from explicit offsets, and compare with :func:`assert_read_back`.
"""

from __future__ import annotations

import asyncio
import datetime
import random
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.fetch.v12 import response as fetch_resp
from kio.schema.list_offsets.v7 import request as list_offsets_req
from kio.schema.list_offsets.v7 import response as list_offsets_resp
from kio.schema.metadata.v12 import request as metadata_req
from kio.schema.metadata.v12 import response as metadata_resp
from kio.schema.produce.v9 import request as produce_req
from kio.schema.produce.v9 import response as produce_resp

from cluster_helpers import run_odradek, wait_until
from odradek.local.cluster import LocalCluster
from odradek.net.client import BrokerConnection
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import RecordBatchHeader, iter_batches

Address = tuple[str, int]
Headers = tuple[tuple[str, bytes | None], ...]

LATEST = -1
EARLIEST = -2


@dataclass(frozen=True, slots=True)
class Rec:
    """A record as a client produced it (before ``offset`` is known) or read it back."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int


# ----------------------------------------------------------------------------- raw requests


def address_of(cluster: LocalCluster, broker_id: int) -> Address:
    return "127.0.0.1", cluster.brokers[broker_id].port


def kafka_request(address: Address, payload: Any, response_type: type[Any], timeout_s: float = 30.0) -> Any:
    """Send one request on a fresh :class:`BrokerConnection` and return the decoded response."""

    async def call() -> Any:
        conn = BrokerConnection(address[0], address[1], "odradek-compat-tests")
        await conn.connect(timeout_s=10)
        try:
            return await conn.send(payload, response_type, timeout_s=timeout_s)
        finally:
            await conn.close()

    return asyncio.run(call())


def metadata(address: Address, topics: Sequence[str] | None) -> Any:
    """A Metadata v12 response (``topics=None``: all topics)."""
    request = metadata_req.MetadataRequest(
        topics=None if topics is None else tuple(
            metadata_req.MetadataRequestTopic(topic_id=None, name=t) for t in topics),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return kafka_request(address, request, metadata_resp.MetadataResponse)


def list_offset(address: Address, topic: str, partition: int, timestamp: int) -> tuple[ErrorCode, int, int]:
    """ListOffsets v7 for one partition: (error, offset, timestamp)."""
    request = list_offsets_req.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        list_offsets_req.ListOffsetsTopic(name=topic, partitions=(
            list_offsets_req.ListOffsetsPartition(partition_index=partition, timestamp=timestamp),)),))
    response = kafka_request(address, request, list_offsets_resp.ListOffsetsResponse)
    (p,) = response.topics[0].partitions
    return p.error_code, p.offset, p.timestamp


def produce(address: Address, topic: str, partition: int, records: bytes | None, acks: int = -1,
            timeout_ms: int = 10_000) -> Any:
    """Produce v9 of one record batch (or any bytes) to one partition: its PartitionProduceResponse."""
    request = produce_req.ProduceRequest(
        acks=acks, timeout=datetime.timedelta(milliseconds=timeout_ms), topic_data=(
            produce_req.TopicProduceData(name=topic, partition_data=(
                produce_req.PartitionProduceData(index=partition, records=records),)),))
    response = kafka_request(address, request, produce_resp.ProduceResponse, timeout_s=timeout_ms / 1000 + 30)
    (t,) = response.responses
    (p,) = t.partition_responses
    return p


def fetch(address: Address, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20,
          max_wait_ms: int = 0) -> Any:
    """Fetch v12 (as a consumer) for one partition: its PartitionData."""
    request = fetch_req.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1, max_bytes=max_bytes,
        topics=(fetch_req.FetchTopic(topic=topic, partitions=(fetch_req.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes),)),),
        forgotten_topics_data=())
    response = kafka_request(address, request, fetch_resp.FetchResponse)
    assert response.error_code == ErrorCode.none, response.error_code
    (t,) = response.responses
    (p,) = t.partitions
    return p


def batch_headers(address: Address, topic: str, partition: int) -> list[RecordBatchHeader]:
    """The headers of every batch in a partition (from offset 0), read with raw fetches."""
    out: list[RecordBatchHeader] = []
    offset = 0
    while True:
        p = fetch(address, topic, partition, offset)
        assert p.error_code == ErrorCode.none, p.error_code
        headers = [h for _, h in iter_batches(p.records or b"", partial_tail_ok=True)]
        if not headers:
            return out
        out += headers
        offset = headers[-1].next_offset


# ----------------------------------------------------------------------------- topics


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def partitions_of(address: Address, topic: str) -> dict[int, PartitionInfo] | None:
    """What one broker's metadata says about a topic (None when it does not know it)."""
    response = metadata(address, [topic])
    (t,) = response.topics
    if t.error_code != ErrorCode.none:
        return None
    return {p.partition_index: PartitionInfo(p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes))
            for p in t.partitions}


def create_topic(cluster: LocalCluster, topic: str, partitions: int, replication_factor: int,
                 config: Mapping[str, str] | None = None) -> dict[int, PartitionInfo]:
    """Create a topic with the CLI (over ZooKeeper) and wait until every running broker's
    metadata shows each partition with a leader and a full ISR; returns that metadata."""
    args = ["topics", "--zookeeper", cluster.zookeeper_connect, "--create", "--topic", topic,
            "--partitions", str(partitions), "--replication-factor", str(replication_factor)]
    for key, value in (config or {}).items():
        args += ["--config", f"{key}={value}"]
    result = run_odradek(*args)
    assert result.returncode == 0, result.stderr

    def ready() -> dict[int, PartitionInfo] | None:
        seen = None
        for broker_id, broker in cluster.brokers.items():
            if not broker.alive:
                continue
            info = partitions_of(address_of(cluster, broker_id), topic)
            if info is None or len(info) != partitions or any(
                    p.leader < 0 or len(p.replicas) != replication_factor or set(p.isr) != set(p.replicas)
                    for p in info.values()):
                return None
            if seen is not None and info != seen:
                return None
            seen = info
        return seen

    return wait_until(ready, timeout=60, message=f"leaders and full ISRs for {topic}")  # type: ignore[return-value]


def end_offsets(cluster: LocalCluster, topic: str, info: Mapping[int, PartitionInfo]) -> dict[int, int]:
    """Each partition's latest offset (the high watermark), asked of its leader."""
    out = {}
    for partition, p in info.items():
        error, offset, _ = list_offset(address_of(cluster, p.leader), topic, partition, LATEST)
        assert error == ErrorCode.none, (partition, error)
        out[partition] = offset
    return out


# ----------------------------------------------------------------------------- records


def make_records(n: int, *, seed: int, with_null_header_values: bool = True,
                 text_only: bool = False) -> list[Rec]:
    """``n`` keyed records (keys repeat, so one key's records share a partition) with
    headers and explicit, not always increasing, timestamps; values mix short text, binary,
    empty, a tombstone (None) and compressible values of a few KiB.  ``partition`` and
    ``offset`` are -1: the producer decides the one and the broker the other.

    ``text_only`` keeps keys, values and headers printable, without tabs, commas, '=' or
    newlines (for kcat's line-oriented input and output)."""
    rnd = random.Random(seed)
    base_ts = int(time.time() * 1000) - 3_600_000  # an hour ago: well inside retention
    records = []
    for i in range(n):
        key = f"key-{i % 23:02d}".encode()
        kind = i % 7
        if text_only:
            value: bytes | None = (f"value {i} " + "lorem ipsum " * (i % 5 * 40)).encode()
        elif kind == 0:
            value = rnd.randbytes(rnd.randrange(1, 300))
        elif kind == 1:
            value = b""
        elif kind == 2:
            value = f"compressible {i} ".encode() * rnd.randrange(50, 400)
        elif kind == 3 and i % 21 == 3:
            value = None  # a tombstone
        else:
            value = f"value-{i}-{rnd.random()}".encode()
        headers: list[tuple[str, bytes | None]] = [("seq", str(i).encode())]
        if not text_only:
            headers += [("dup", b"first"), ("dup", b"second"), ("bin", rnd.randbytes(8))]
            if i % 3 == 0:
                headers.append(("empty", b""))
            if with_null_header_values and i % 5 == 0:
                headers.append(("null", None))
        else:
            headers.append(("src", f"kcat{i % 3}".encode()))
        timestamp = base_ts + i * 10 + (5 if i % 4 == 0 else 0) - (3 if i % 6 == 0 else 0)
        records.append(Rec(-1, -1, key, value, tuple(headers), timestamp))
    return records


def _by_partition(records: Iterable[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = defaultdict(list)
    for r in records:
        out[r.partition].append(r)
    return dict(out)


def assert_acknowledged(sent: Sequence[Rec], acked: Sequence[Rec], partitions: int) -> None:
    """``acked[i]`` is the delivery report for ``sent[i]``: same content, a real partition
    and offset; one key always maps to one partition; within a partition, offsets rise in
    send order without gaps (a fresh topic: starting at 0)."""
    assert len(acked) == len(sent)
    key_partition: dict[bytes | None, int] = {}
    for s, a in zip(sent, acked, strict=True):
        assert 0 <= a.partition < partitions and a.offset >= 0, a
        assert (a.key, a.value, a.headers, a.timestamp) == (s.key, s.value, s.headers, s.timestamp)
        assert key_partition.setdefault(a.key, a.partition) == a.partition, f"key {a.key!r} in two partitions"
    for partition, recs in _by_partition(acked).items():
        offsets = [r.offset for r in recs]
        assert offsets == list(range(len(recs))), f"partition {partition}: acknowledged offsets {offsets}"


def assert_read_back(acked: Sequence[Rec], consumed: Sequence[Rec]) -> None:
    """What was read is exactly what was acknowledged: per partition, the same records in
    the same order at the same offsets, keys, values, headers and timestamps equal."""
    want = _by_partition(acked)
    got = _by_partition(consumed)
    assert sorted(got) == sorted(want), f"partitions read {sorted(got)}, produced to {sorted(want)}"
    for partition in want:
        w, g = want[partition], got[partition]
        assert [r.offset for r in g] == [r.offset for r in w], f"partition {partition}: offsets differ"
        for a, b in zip(w, g, strict=True):
            assert a == b, f"partition {partition} offset {a.offset}: produced {a}, read {b}"
