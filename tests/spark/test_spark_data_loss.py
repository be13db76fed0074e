"""failOnDataLoss: records removed below the offsets a query needs, by DeleteRecords and by
the broker's time-based retention."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from pyspark.errors import StreamingQueryException

from support import delete_records, produce, wait_until


def values(topic_range: range) -> list[tuple[int, bytes]]:
    return [(i, str(i).encode()) for i in topic_range]


def fill(bootstrap: str, topic: str, ids: range) -> None:
    produce(bootstrap, topic, [(0, None, str(i).encode()) for i in ids])


def batch(spark, bootstrap, topic, **options):
    df = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .options(**options)
        .load()
    )
    return sorted((r.offset, r.value) for r in df.collect())


def test_batch_read_of_removed_offsets(spark, kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("lossbatch", partitions=1)
    fill(kafka_bootstrap, topic, range(10))
    delete_records(kafka_bootstrap, topic, {0: 4})
    from_two = json.dumps({topic: {"0": 2}})

    with pytest.raises(Exception, match="failOnDataLoss") as caught:
        batch(spark, kafka_bootstrap, topic, startingOffsets=from_two)
    assert f"offsets 2..3 of partition {topic}-0 were removed" in str(caught.value)

    skipped = batch(spark, kafka_bootstrap, topic, startingOffsets=from_two, failOnDataLoss="false")
    assert skipped == values(range(4, 10))
    assert batch(spark, kafka_bootstrap, topic) == values(range(4, 10))  # earliest is no loss


def run_to_parquet(spark, bootstrap, topic, tmp_path, **options) -> None:
    """One AvailableNow run of a query copying (offset, value) to parquet; raises if the
    query fails."""
    query = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .options(**options)
        .load()
        .selectExpr("offset", "value")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(180)
    finally:
        query.stop()


def parquet_rows(spark, tmp_path) -> list[tuple[int, bytes]]:
    return sorted((r.offset, r.value) for r in spark.read.parquet(str(tmp_path / "out")).collect())


def test_streaming_query_behind_deleted_records(spark, kafka_bootstrap, tmp_path, odradek_broker):
    topic = odradek_broker.new_topic("lossstream", partitions=1)
    fill(kafka_bootstrap, topic, range(10))

    run_to_parquet(spark, kafka_bootstrap, topic, tmp_path)
    fill(kafka_bootstrap, topic, range(10, 20))
    delete_records(kafka_bootstrap, topic, {0: 15})  # offsets 10..14 never reached the query

    with pytest.raises(StreamingQueryException, match="failOnDataLoss") as caught:
        run_to_parquet(spark, kafka_bootstrap, topic, tmp_path)
    assert f"offsets 10..14 of partition {topic}-0 were removed" in str(caught.value)

    # same checkpoint: skip what is gone, go on from 15
    run_to_parquet(spark, kafka_bootstrap, topic, tmp_path, failOnDataLoss="false")
    assert parquet_rows(spark, tmp_path) == values(range(10)) + values(range(15, 20))


def test_streaming_query_behind_time_retention(spark, kafka_bootstrap, tmp_path, odradek_broker):
    """The broker's retention deletes segments the query has not read yet."""
    # Segments of one single-record batch each (~70 bytes; a batch larger than a segment
    # is refused); retention off until the query has read offsets 0..9.
    keep_all = {"segment.bytes": "100", "retention.ms": "-1"}
    topic = odradek_broker.new_topic("retention", partitions=1, config=keep_all)
    two_days_ago = int(time.time() * 1000) - 2 * 86_400_000

    def send(ids: range, timestamp: int | None = None) -> None:
        for i in ids:  # one record per produce call: one batch each
            produce(kafka_bootstrap, topic, [(0, None, str(i).encode())], timestamp=timestamp)

    send(range(10), two_days_ago)
    run_to_parquet(spark, kafka_bootstrap, topic, tmp_path)
    send(range(10, 20), two_days_ago)
    send(range(20, 21))  # a current record: its segment (the active one) stays
    odradek_broker.alter_topic_config(topic, {**keep_all, "retention.ms": "3600000"})
    wait_until(
        lambda: earliest_offset(kafka_bootstrap, topic) == 20,
        message="retention to delete every segment older than an hour",
    )

    with pytest.raises(StreamingQueryException, match="failOnDataLoss") as caught:
        run_to_parquet(spark, kafka_bootstrap, topic, tmp_path)
    assert f"offsets 10..19 of partition {topic}-0 were removed" in str(caught.value)

    run_to_parquet(spark, kafka_bootstrap, topic, tmp_path, failOnDataLoss="false")
    assert parquet_rows(spark, tmp_path) == values(range(10)) + values(range(20, 21))


def earliest_offset(bootstrap: str, topic: str) -> int:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        futures = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})
        return next(iter(futures.values())).result().offset
