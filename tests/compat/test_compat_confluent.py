"""confluent-kafka (librdkafka 2.x) against a 3-broker cluster: a producer with each
compression codec and an idempotent one, consumers with assign() from explicit offsets.

The Python wrapper refuses to build a Consumer without ``group.id``; with
``enable.auto.commit=False`` and assign() at explicit offsets the consumers here never commit.
Group consumers are covered by tests/integration/test_consumer_groups.py.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence

import pytest
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from odradek.local.cluster import LocalCluster
from odradek.protocol.records import CompressionType, compress
from support import (
    PartitionInfo,
    Rec,
    address_of,
    assert_acknowledged,
    assert_read_back,
    batch_headers,
    controller_of,
    create_topic,
    end_offsets,
    make_records,
    partition_state,
    stored_batches,
    wait_until,
)

PARTITIONS = 4
N = 300


def produce(cluster: LocalCluster, topic: str, records: Sequence[Rec], **config: object) -> list[Rec]:
    """Produce ``records`` (the partitioner picks partitions by key) and return them as the
    delivery reports describe them, in send order."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 20, **config})
    reports: list[Rec | None] = [None] * len(records)
    errors: list[tuple[int, KafkaError]] = []

    def on_delivery(i: int):  # type: ignore[no-untyped-def]
        def report(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append((i, err))
                return
            # A delivery report carries no headers: those come from what was sent.
            reports[i] = Rec(msg.partition(), msg.offset(), msg.key(), msg.value(), records[i].headers,
                             msg.timestamp()[1])
            assert msg.timestamp()[0] == TIMESTAMP_CREATE_TIME
        return report

    with producer:
        for i, r in enumerate(records):
            producer.produce(topic, key=r.key, value=r.value, headers=list(r.headers), timestamp=r.timestamp,
                             on_delivery=on_delivery(i))
            producer.poll(0)
        assert producer.flush(60) == 0, "messages still in flight after 60s"
    assert not errors, errors[:5]
    return reports  # type: ignore[return-value]


def consume(cluster: LocalCluster, topic: str, start: Mapping[int, int], end: Mapping[int, int],
            **config: object) -> list[Rec]:
    """assign() every partition at its ``start`` offset and read until each partition
    reports end-of-partition at ``end``; returns what was read, in arrival order."""
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap_servers,
        "group.id": f"unused-{uuid.uuid4().hex[:6]}",  # required by the wrapper, never joined
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        **config,
    })
    out: list[Rec] = []
    at_end: dict[int, int] = {}
    try:
        consumer.assign([TopicPartition(topic, p, offset) for p, offset in start.items()])
        deadline = time.monotonic() + 60
        while any(at_end.get(p) != end[p] for p in start) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end[msg.partition()] = msg.offset()
                continue
            ts_type, ts = msg.timestamp()
            assert ts_type == TIMESTAMP_CREATE_TIME
            out.append(Rec(msg.partition(), msg.offset(), msg.key(), msg.value(),
                           tuple(msg.headers() or ()), ts))
        assert all(at_end.get(p) == end[p] for p in start), f"end of partition reached at {at_end}, expected {end}"
    finally:
        consumer.close()
    return out


def round_trip(cluster: LocalCluster, info: Mapping[int, PartitionInfo], topic: str, records: Sequence[Rec],
               **producer_config: object) -> list[Rec]:
    acked = produce(cluster, topic, records, **producer_config)
    assert_acknowledged(records, acked, PARTITIONS)
    counts = {p: sum(1 for r in acked if r.partition == p) for p in info}
    assert sum(1 for c in counts.values() if c) >= 2, f"all records landed in one partition: {counts}"
    # With acks=1 the high watermark follows once the followers have fetched.
    ends = wait_until(lambda: (e := end_offsets(cluster.bootstrap_servers, topic, len(info)))
                      and all(e[p] >= counts[p] for p in e) and e,
                      message="high watermarks to cover every acknowledged record")
    assert ends == counts, "the log holds other records than those acknowledged"
    assert_read_back(acked, consume(cluster, topic, dict.fromkeys(info, 0), counts))
    return acked


# lz4: librdkafka enables LZ4 only when the broker advertises FindCoordinator (its feature
# map's proxy for "Kafka >= 0.8.2"); otherwise it would send the batches uncompressed, which
# the codec check below catches.
@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume_each_compression(module_cluster: LocalCluster, compression: str) -> None:
    topic = f"confluent-{compression}"
    info = create_topic(module_cluster, topic, PARTITIONS, 3)
    records = make_records(N, seed=sum(compression.encode()))
    acked = round_trip(module_cluster, info, topic, records, **{"compression.type": compression, "acks": "all"})

    # The batches in the log are the client's, compressed as it was told: librdkafka falls
    # back to uncompressed batches, silently, for a codec it believes the broker lacks. It
    # also sends a batch uncompressed when the codec would not make it smaller (a single short
    # record, say), so an uncompressed batch passes only if the codec would not shrink it.
    codec = CompressionType[compression.upper()]
    for p, meta in info.items():
        for header, section in stored_batches(address_of(module_cluster, meta.leader), topic, p):
            if header.compression is CompressionType.NONE and codec is not CompressionType.NONE:
                assert len(compress(codec, section)) >= len(section), (
                    f"partition {p}: a batch of {header.records_count} records ({len(section)} bytes) stored "
                    f"uncompressed, though {compression} shrinks it")
            else:
                assert header.compression is codec, (
                    f"partition {p}: a batch compressed with {header.compression.name}, asked for {compression}")

    # From the middle of each partition: with compression that is inside a batch, which the
    # broker returns whole and the client trims.
    counts = end_offsets(module_cluster.bootstrap_servers, topic, len(info))
    middle = {p: counts[p] // 2 for p in info if counts[p]}
    read = consume(module_cluster, topic, middle, {p: counts[p] for p in middle})
    assert_read_back([r for r in acked if r.partition in middle and r.offset >= middle[r.partition]], read)


def test_idempotent_producer(module_cluster: LocalCluster) -> None:
    topic = "confluent-idempotent"
    info = create_topic(module_cluster, topic, PARTITIONS, 3)
    records = make_records(N, seed=7)
    round_trip(module_cluster, info, topic, records, **{
        "enable.idempotence": True, "compression.type": "lz4", "max.in.flight.requests.per.connection": 5})


def test_acks_1_and_small_batches(module_cluster: LocalCluster) -> None:
    """One record per request (no linger) with leader-only acks."""
    topic = "confluent-acks1"
    info = create_topic(module_cluster, topic, PARTITIONS, 3)
    round_trip(module_cluster, info, topic, make_records(60, seed=11), **{"acks": 1, "linger.ms": 0})


def test_fetch_limits_smaller_than_one_batch(module_cluster: LocalCluster) -> None:
    """Fetch limits below the size of a batch: the broker still returns the first batch
    whole (KIP-74), so the consumer makes progress and reads everything."""
    topic = "confluent-fetch-limits"
    info = create_topic(module_cluster, topic, 2, 3)
    records = make_records(120, seed=13)
    acked = produce(module_cluster, topic, records, **{"linger.ms": 50, "batch.size": 200_000})
    assert_acknowledged(records, acked, 2)
    counts = {p: sum(1 for r in acked if r.partition == p) for p in info}
    biggest = max(h.size for p, meta in info.items()
                  for h in batch_headers(address_of(module_cluster, meta.leader), topic, p))
    limit = 1024
    assert biggest > 4 * limit, f"the batches ({biggest} bytes) should dwarf the fetch limits"
    read = consume(module_cluster, topic, dict.fromkeys(info, 0), counts, **{
        "fetch.max.bytes": limit, "message.max.bytes": limit, "max.partition.fetch.bytes": limit})
    assert_read_back(acked, read)


def test_watermarks_and_offsets_for_times(module_cluster: LocalCluster) -> None:
    topic = "confluent-offsets"
    info = create_topic(module_cluster, topic, PARTITIONS, 3)
    records = make_records(80, seed=3)
    acked = produce(module_cluster, topic, records, **{"compression.type": "zstd"})
    consumer = Consumer({"bootstrap.servers": module_cluster.bootstrap_servers, "group.id": "unused",
                         "enable.auto.commit": False})
    try:
        for p in info:
            mine = [r for r in acked if r.partition == p]
            assert consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) == (0, len(mine))
            if not mine:
                continue
            # ListOffsets by timestamp: the first offset whose timestamp is >= the one asked.
            probe = sorted(r.timestamp for r in mine)[len(mine) // 2]
            want = next(r.offset for r in mine if r.timestamp >= probe)
            (found,) = consumer.offsets_for_times([TopicPartition(topic, p, probe)], timeout=10)
            assert found.error is None and found.offset == want, (p, probe, found)
            (beyond,) = consumer.offsets_for_times([TopicPartition(topic, p, max(r.timestamp for r in mine) + 1)],
                                                   timeout=10)
            assert beyond.offset == -1, beyond  # no such record: Kafka answers offset -1 (end)
    finally:
        consumer.close()


def test_fetch_out_of_range_is_reported_to_the_consumer(module_cluster: LocalCluster) -> None:
    """assign() past the end with auto.offset.reset=error: the client sees the broker's
    OFFSET_OUT_OF_RANGE as an auto-offset-reset error; with 'earliest' it starts over at 0."""
    topic = "confluent-out-of-range"
    info = create_topic(module_cluster, topic, 1, 3)
    acked = produce(module_cluster, topic, make_records(10, seed=5))
    assert end_offsets(module_cluster.bootstrap_servers, topic, len(info)) == {0: 10}
    consumer = Consumer({"bootstrap.servers": module_cluster.bootstrap_servers, "group.id": "unused",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    try:
        consumer.assign([TopicPartition(topic, 0, 1000)])
        deadline = time.monotonic() + 30
        error = None
        while error is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is not None, f"read a record at offset {msg.offset()}"
                error = msg.error()
        assert error is not None and error.code() == KafkaError._AUTO_OFFSET_RESET, error
        assert "out of range" in error.str().lower() or "OFFSET_OUT_OF_RANGE" in error.str(), error.str()
    finally:
        consumer.close()
    read = consume_from_reset(module_cluster, topic)
    assert_read_back(acked, read)


def consume_from_reset(cluster: LocalCluster, topic: str) -> list[Rec]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True})
    out: list[Rec] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 1000)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                if msg.offset() == 10:
                    break
                continue
            out.append(Rec(msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()),
                           msg.timestamp()[1]))
    finally:
        consumer.close()
    return out


def test_metadata_of_all_topics(module_cluster: LocalCluster) -> None:
    """list_topics() without a topic: librdkafka 2.16 writes Metadata v12's null topic array
    as four zero bytes (confluentinc/librdkafka#5049), which Kafka reads as a null array
    followed by bytes it ignores."""
    create_topic(module_cluster, "confluent-listed", 3, 3)
    with Producer({"bootstrap.servers": module_cluster.bootstrap_servers}) as producer:
        md = producer.list_topics(timeout=20)
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {
        bid: ("127.0.0.1", b.port) for bid, b in module_cluster.brokers.items()}
    assert md.controller_id == controller_of(module_cluster)[0]
    t = md.topics["confluent-listed"]
    assert t.error is None and sorted(t.partitions) == [0, 1, 2]
    for p in t.partitions.values():
        state = partition_state(module_cluster, "confluent-listed", p.id)
        assert state is not None and p.leader == state["leader"] and sorted(p.isrs) == sorted(state["isr"])
        assert len(p.replicas) == 3
