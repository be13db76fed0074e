"""Batch reads and writes through Spark against the broker fixture."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from pyspark.sql import Row

from support import TANSU_ONE_RECORD_PER_BATCH, consume_all, end_offsets, produce, wait_until


def read(spark, bootstrap, **options):
    return (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .options(**options)
        .load()
    )


def write(df, bootstrap, **options):
    (
        df.write.format("odradek")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .options(**options)
        .save()
    )


def test_round_trip(spark, kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("roundtrip", partitions=3)
    rows = [(f"k{i}".encode(), f"value {i}".encode(), i % 3) for i in range(300)]
    rows.append((None, b"no key", 1))
    df = spark.createDataFrame(rows, "key binary, value binary, partition int").repartition(2)
    before = datetime.now(UTC) - timedelta(minutes=1)
    write(df, kafka_bootstrap, topic=topic)
    after = datetime.now(UTC) + timedelta(minutes=1)

    got = read(spark, kafka_bootstrap, subscribe=topic).collect()

    assert sorted((r.key or b"", r.value, r.partition) for r in got) == sorted(
        (k or b"", v, p) for k, v, p in rows
    )
    assert {r.topic for r in got} == {topic}
    for partition, count in ((0, 100), (1, 101), (2, 100)):
        offsets = sorted(r.offset for r in got if r.partition == partition)
        assert offsets == list(range(count))
    assert {r.timestampType for r in got} == {0}  # CreateTime
    for r in got:
        stamp = r.timestamp.replace(tzinfo=UTC)  # the session time zone is UTC
        assert before <= stamp <= after


def test_written_records_are_what_a_plain_consumer_sees(spark, kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("plain", partitions=1)
    df = spark.createDataFrame([("a", "1"), (None, "2")], "key string, value string")
    write(df, kafka_bootstrap, topic=topic)
    seen = consume_all(kafka_bootstrap, topic, 1, expected=2)
    assert sorted(((m.key() or b""), m.value()) for m in seen) == [(b"", b"2"), (b"a", b"1")]


def test_topic_column_routes_rows_and_the_topic_option_overrides_it(spark, kafka_bootstrap, odradek_broker):
    left = odradek_broker.new_topic("left")
    right = odradek_broker.new_topic("right")
    df = spark.createDataFrame(
        [(left, "l1"), (right, "r1"), (right, "r2")], "topic string, value string"
    )
    write(df, kafka_bootstrap)
    assert sorted(r.value for r in read(spark, kafka_bootstrap, subscribe=left).collect()) == [
        b"l1"
    ]
    assert sorted(r.value for r in read(spark, kafka_bootstrap, subscribe=right).collect()) == [
        b"r1",
        b"r2",
    ]

    write(df, kafka_bootstrap, topic=left)  # the option wins over the column
    assert len(read(spark, kafka_bootstrap, subscribe=left).collect()) == 4


def test_failed_delivery_fails_the_write_with_the_error(spark, kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("onepart", partitions=1)
    df = spark.createDataFrame([("x", 7)], "value string, partition int")
    # The client refuses at once or in the delivery report, depending on what metadata it
    # already has; either way the job fails naming the partition and the error.
    with pytest.raises(Exception, match="KafkaWriteError") as caught:
        write(df, kafka_bootstrap, topic=topic)
    assert f"topic '{topic}'" in str(caught.value)
    assert "partition 7" in str(caught.value)
    assert "Unknown partition" in str(caught.value)


def test_ranges_between_starting_and_ending_offsets(spark, kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("ranges", partitions=2)
    produce(
        kafka_bootstrap,
        topic,
        [(p, None, f"{p}:{i}".encode()) for i in range(10) for p in (0, 1)],
    )
    df = read(
        spark,
        kafka_bootstrap,
        subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 3, "1": -2}}),
        endingOffsets=json.dumps({topic: {"0": 7, "1": -1}}),
    )
    got = sorted((r.partition, r.offset, r.value) for r in df.collect())
    expected = [(0, i, f"0:{i}".encode()) for i in range(3, 7)]
    expected += [(1, i, f"1:{i}".encode()) for i in range(10)]
    assert got == expected

    empty = read(
        spark,
        kafka_bootstrap,
        subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 4, "1": 10}}),
        endingOffsets=json.dumps({topic: {"0": 4, "1": 10}}),
    )
    assert empty.count() == 0


def test_ranges_that_start_inside_a_record_batch(spark, kafka_bootstrap, odradek_broker):
    """Records produced in multi-record batches; the read starts and stops mid-batch."""
    topic = odradek_broker.new_topic("midbatch", partitions=1)
    with Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 50}) as producer:
        for i in range(50):
            producer.produce(topic, value=str(i).encode(), partition=0)
        assert producer.flush(30) == 0
    df = read(
        spark,
        kafka_bootstrap,
        subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 17}}),
        endingOffsets=json.dumps({topic: {"0": 41}}),
    )
    assert [(r.offset, r.value) for r in df.orderBy("offset").collect()] == [
        (i, str(i).encode()) for i in range(17, 41)
    ]


def _read_to_end(bootstrap, topic):
    """(offset, key, value) of every record in partition 0, read to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compacted-check",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        while True:
            m = consumer.poll(10)
            assert m is not None, "no end of partition within 10 s"
            if m.error() is None:
                out.append((m.offset(), m.key(), m.value()))
            elif m.error().code() == KafkaError._PARTITION_EOF:
                return out
    finally:
        consumer.close()


def test_compacted_topic_reads_the_survivors_at_their_offsets(spark, kafka_bootstrap, odradek_broker):
    """A cleaned log has offset gaps: a range over it, and one starting at an offset that was
    cleaned away, return exactly the records that are left, at their original offsets."""
    topic = odradek_broker.new_topic("compacted", partitions=1, config={
        "cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"})
    records = [(0, f"k{i % 20}".encode(), f"v{i}".encode()) for i in range(600)]
    records += [(0, b"~end-1", b"x" * 3500), (0, b"~end-2", b"x" * 3500)]  # the last closes a segment
    acked = produce(kafka_bootstrap, topic, records, **{"linger.ms": "0", "batch.size": "3000"})
    latest = {}
    for (_, key, value), (_, offset) in zip(records, acked, strict=True):
        latest[key] = (offset, key, value)
    survivors = sorted(latest.values())
    wait_until(lambda: _read_to_end(kafka_bootstrap, topic) == survivors, timeout=90,
               message="the topic cleaned to the latest value per key")

    got = read(spark, kafka_bootstrap, subscribe=topic).collect()
    assert sorted((r.offset, r.key, r.value) for r in got) == survivors
    removed = next(o for o in range(survivors[-1][0]) if o not in {s[0] for s in survivors})
    tail = read(spark, kafka_bootstrap, subscribe=topic,
                startingOffsets=json.dumps({topic: {"0": removed}})).collect()
    assert sorted((r.offset, r.key, r.value) for r in tail) == [s for s in survivors if s[0] > removed]


def test_read_stops_at_end_offset_across_a_transaction_marker(spark, tansu_bootstrap, tansu_broker):
    """A committed transaction ends with a control record: the last offset before the end
    holds no data record, and the read must still finish. On Tansu: odradek has no
    transactions."""
    topic = tansu_broker.new_topic("txn", partitions=1)
    with Producer(
        {
            "bootstrap.servers": tansu_bootstrap,
            "transactional.id": f"tx-{topic}",
            **TANSU_ONE_RECORD_PER_BATCH,
        }
    ) as producer:
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, value=f"t{i}".encode(), partition=0)
        producer.commit_transaction(30)
    assert end_offsets(tansu_bootstrap, topic, 1)[0] > 3  # the marker took an offset

    df = read(spark, tansu_bootstrap, subscribe=topic, **{"kafkaConsumer.pollTimeoutMs": "20000"})
    assert [(r.offset, r.value) for r in df.orderBy("offset").collect()] == [
        (0, b"t0"),
        (1, b"t1"),
        (2, b"t2"),
    ]


def test_large_ranges_are_split_into_input_partitions(spark, kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("split", partitions=1)
    produce(
        kafka_bootstrap,
        topic,
        [(0, None, str(i).encode()) for i in range(35)],
    )
    by_size = read(spark, kafka_bootstrap, subscribe=topic, maxRecordsPerPartition="10")
    assert by_size.rdd.getNumPartitions() == 4
    assert sorted(r.offset for r in by_size.collect()) == list(range(35))

    by_hint = read(spark, kafka_bootstrap, subscribe=topic, minPartitions="5")
    assert by_hint.rdd.getNumPartitions() == 5
    assert sorted(r.offset for r in by_hint.collect()) == list(range(35))


def test_headers(spark, kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("headers", partitions=1)
    produce(
        kafka_bootstrap,
        topic,
        [(0, b"k", b"with")],
        headers=[("trace", b"abc"), ("empty", None), ("trace", b"again")],
    )
    produce(kafka_bootstrap, topic, [(0, b"k", b"without")])

    df = read(spark, kafka_bootstrap, subscribe=topic, includeHeaders="true")
    assert df.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    rows = {r.value: r.headers for r in df.collect()}
    assert rows == {
        b"with": [
            Row(key="trace", value=b"abc"),
            Row(key="empty", value=None),
            Row(key="trace", value=b"again"),
        ],
        b"without": None,
    }
    assert "headers" not in read(spark, kafka_bootstrap, subscribe=topic).columns


def test_headers_column_is_written(spark, kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("writeheaders", partitions=1)
    df = spark.createDataFrame(
        [("v", [("a", b"1"), ("b", None)])],
        "value string, headers array<struct<key: string, value: binary>>",
    )
    write(df, kafka_bootstrap, topic=topic)
    got = read(spark, kafka_bootstrap, subscribe=topic, includeHeaders="true").collect()
    assert [r.headers for r in got] == [[Row(key="a", value=b"1"), Row(key="b", value=None)]]


def test_assign_reads_only_the_assigned_partitions(spark, kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("assign", partitions=3)
    produce(
        kafka_bootstrap,
        topic,
        [(p, None, f"{p}".encode()) for p in range(3) for _ in range(4)],
    )
    df = read(spark, kafka_bootstrap, assign=json.dumps({topic: [0, 2]}))
    assert sorted((r.partition, r.offset) for r in df.collect()) == [
        (p, o) for p in (0, 2) for o in range(4)
    ]


def test_subscribe_pattern_reads_every_matching_topic(spark, kafka_bootstrap, odradek_broker):
    bootstrap = kafka_bootstrap
    first = odradek_broker.new_topic("pattern", partitions=2)
    prefix = first + "-x"  # no other topic starts with it
    second = odradek_broker.new_topic(prefix, partitions=1)
    third = odradek_broker.new_topic(prefix, partitions=1)
    other = odradek_broker.new_topic("elsewhere", partitions=1)
    for topic in (first, second, third, other):
        produce(bootstrap, topic, [(0, None, topic.encode())])

    df = read(spark, bootstrap, subscribePattern=prefix.replace(".", r"\.") + ".*")
    assert sorted(r.topic for r in df.collect()) == sorted([second, third])


def test_subscribe_to_several_topics(spark, kafka_bootstrap, odradek_broker):
    one = odradek_broker.new_topic("several")
    two = odradek_broker.new_topic("several")
    produce(kafka_bootstrap, one, [(0, None, b"1")])
    produce(kafka_bootstrap, two, [(0, None, b"2")])
    df = read(spark, kafka_bootstrap, subscribe=f"{one},{two}")
    assert sorted((r.topic, r.value) for r in df.collect()) == sorted([(one, b"1"), (two, b"2")])


def test_starting_offsets_by_timestamp(spark, kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("bytime", partitions=1)
    # An hour ago, on a whole second: inside the topic's retention (7 days), which the
    # brokers enforce every second in these tests.
    base = (int(time.time()) - 3600) * 1000
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        for i in range(10):
            producer.produce(topic, value=str(i).encode(), partition=0, timestamp=base + i * 1000)
        assert producer.flush(30) == 0

    df = read(
        spark,
        kafka_bootstrap,
        subscribe=topic,
        startingOffsetsByTimestamp=json.dumps({topic: {"0": base + 6500}}),
    )
    assert sorted(r.offset for r in df.collect()) == [7, 8, 9]
    stamps = [r.timestamp.replace(tzinfo=UTC) for r in df.orderBy("offset").collect()]
    assert stamps[0] == datetime.fromtimestamp((base + 7000) / 1000, UTC)

    bounded = read(
        spark,
        kafka_bootstrap,
        subscribe=topic,
        startingTimestamp=str(base + 2000),
        endingTimestamp=str(base + 5000),
    )
    assert sorted(r.offset for r in bounded.collect()) == [2, 3, 4]

    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy"):
        read(spark, kafka_bootstrap, subscribe=topic, startingTimestamp=str(base + 99_000)).count()
    latest = read(
        spark,
        kafka_bootstrap,
        subscribe=topic,
        startingTimestamp=str(base + 99_000),
        startingOffsetsByTimestampStrategy="latest",
    )
    assert latest.count() == 0
