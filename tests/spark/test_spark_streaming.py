"""Streaming reads and writes through Spark against the broker fixture."""

from __future__ import annotations

import json

from support import end_offsets, produce, wait_until

QUERY_TIMEOUT_S = 180


def stream(spark, bootstrap, **options):
    return (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .options(**options)
        .load()
    )


def to_parquet(df, tmp_path, trigger=None):
    trigger = trigger or {"availableNow": True}
    return (
        df.selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(**trigger)
        .start()
    )


def run_to_end(query):
    """Wait for an AvailableNow query; a failed query raises here."""
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish"
    finally:
        query.stop()
    return query


def sink_rows(spark, tmp_path):
    return sorted(
        (r.partition, r.offset, r.value)
        for r in spark.read.parquet(str(tmp_path / "out")).collect()
    )


def records(topic_partitions: dict[int, range]):
    return [(p, None, f"{p}:{i}".encode()) for p, ids in topic_partitions.items() for i in ids]


def expected(topic_partitions: dict[int, range]):
    return sorted((p, i, f"{p}:{i}") for p, ids in topic_partitions.items() for i in ids)


def test_available_now_and_restart_neither_lose_nor_repeat(spark, kafka_bootstrap, tmp_path, odradek_broker):
    topic = odradek_broker.new_topic("stream", partitions=2)
    produce(kafka_bootstrap, topic, records({0: range(12), 1: range(8)}))
    source = stream(spark, kafka_bootstrap, subscribe=topic, startingOffsets="earliest")

    first = run_to_end(to_parquet(source, tmp_path))
    assert sink_rows(spark, tmp_path) == expected({0: range(12), 1: range(8)})
    assert json.loads(first.lastProgress["sources"][0]["endOffset"]) == {topic: {"0": 12, "1": 8}}

    produce(kafka_bootstrap, topic, records({0: range(12, 15), 1: range(8, 20)}))
    second = run_to_end(to_parquet(source, tmp_path))
    assert sink_rows(spark, tmp_path) == expected({0: range(15), 1: range(20)})
    progress = second.lastProgress["sources"][0]
    assert json.loads(progress["startOffset"]) == {topic: {"0": 12, "1": 8}}
    assert json.loads(progress["endOffset"]) == {topic: {"0": 15, "1": 20}}

    third = run_to_end(to_parquet(source, tmp_path))  # nothing new: no batch at all
    assert sum(p["numInputRows"] for p in third.recentProgress) == 0
    assert sink_rows(spark, tmp_path) == expected({0: range(15), 1: range(20)})


def test_stopped_mid_stream_query_resumes_from_its_checkpoint(spark, kafka_bootstrap, tmp_path, odradek_broker):
    topic = odradek_broker.new_topic("resume", partitions=2)
    produce(kafka_bootstrap, topic, records({0: range(40), 1: range(40)}))
    source = stream(
        spark,
        kafka_bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="10",
    )
    running = to_parquet(source, tmp_path, trigger={"processingTime": "0 seconds"})
    try:
        wait_until(
            lambda: (
                running.exception() is None
                and sum(p["numInputRows"] for p in running.recentProgress) >= 20
            ),
            message="two micro-batches",
            timeout=QUERY_TIMEOUT_S,
        )
    finally:
        running.stop()
    assert running.exception() is None
    done_before = len(sink_rows(spark, tmp_path))
    assert 20 <= done_before < 80

    run_to_end(to_parquet(source, tmp_path))
    assert sink_rows(spark, tmp_path) == expected({0: range(40), 1: range(40)})


def test_max_offsets_per_trigger_bounds_every_batch(spark, kafka_bootstrap, tmp_path, odradek_broker):
    topic = odradek_broker.new_topic("ratelimit", partitions=3)
    produce(kafka_bootstrap, topic, records({0: range(30), 1: range(10)}))
    source = stream(
        spark,
        kafka_bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="8",
    )
    query = run_to_end(to_parquet(source, tmp_path))

    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [8, 8, 8, 8, 8]
    first = query.recentProgress[0]["sources"][0]
    assert json.loads(first["endOffset"]) == {topic: {"0": 6, "1": 2, "2": 0}}  # 3:1 backlog
    assert json.loads(first["latestOffset"]) == {topic: {"0": 30, "1": 10, "2": 0}}
    assert sink_rows(spark, tmp_path) == expected({0: range(30), 1: range(10)})


def test_streaming_starts_at_latest_by_default(spark, kafka_bootstrap, tmp_path, odradek_broker):
    topic = odradek_broker.new_topic("latest", partitions=1)
    produce(kafka_bootstrap, topic, records({0: range(5)}))
    source = stream(spark, kafka_bootstrap, subscribe=topic)

    run_to_end(to_parquet(source, tmp_path))
    produce(kafka_bootstrap, topic, records({0: range(5, 8)}))
    run_to_end(to_parquet(source, tmp_path))
    assert sink_rows(spark, tmp_path) == expected({0: range(5, 8)})


def test_streaming_starting_offsets_json(spark, kafka_bootstrap, tmp_path, odradek_broker):
    topic = odradek_broker.new_topic("startjson", partitions=2)
    produce(kafka_bootstrap, topic, records({0: range(6), 1: range(6)}))
    source = stream(
        spark,
        kafka_bootstrap,
        subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 4, "1": -1}}),
    )
    run_to_end(to_parquet(source, tmp_path))
    assert sink_rows(spark, tmp_path) == expected({0: range(4, 6)})


def test_stream_write_copies_a_topic(spark, kafka_bootstrap, tmp_path, odradek_broker):
    source_topic = odradek_broker.new_topic("copyfrom", partitions=2)
    target_topic = odradek_broker.new_topic("copyto", partitions=2)
    produce(
        kafka_bootstrap,
        source_topic,
        [(i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(30)],
    )
    query = (
        stream(spark, kafka_bootstrap, subscribe=source_topic, startingOffsets="earliest")
        .selectExpr("key", "value", "partition")
        .writeStream.format("odradek")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", target_topic)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    run_to_end(query)
    assert end_offsets(kafka_bootstrap, target_topic, 2) == {0: 15, 1: 15}
    copied = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", target_topic)
        .load()
        .collect()
    )
    assert sorted((r.partition, r.key, r.value) for r in copied) == sorted(
        (i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(30)
    )
