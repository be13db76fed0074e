"""failOnDataLoss: records removed below the offsets a query needs (retention's effect,
produced on demand with DeleteRecords)."""

from __future__ import annotations

import json

import pytest
from pyspark.errors import StreamingQueryException
from spark_helpers import create_topic, delete_records, produce


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


def test_batch_read_of_removed_offsets(spark, kafka_bootstrap):
    topic = create_topic(kafka_bootstrap, "lossbatch", partitions=1)
    fill(kafka_bootstrap, topic, range(10))
    delete_records(kafka_bootstrap, topic, {0: 4})
    from_two = json.dumps({topic: {"0": 2}})

    with pytest.raises(Exception, match="failOnDataLoss") as caught:
        batch(spark, kafka_bootstrap, topic, startingOffsets=from_two)
    assert f"offsets 2..3 of partition {topic}-0 were removed" in str(caught.value)

    skipped = batch(spark, kafka_bootstrap, topic, startingOffsets=from_two, failOnDataLoss="false")
    assert skipped == values(range(4, 10))
    assert batch(spark, kafka_bootstrap, topic) == values(range(4, 10))  # earliest is no loss


def test_streaming_query_behind_retention(spark, kafka_bootstrap, tmp_path):
    topic = create_topic(kafka_bootstrap, "lossstream", partitions=1)
    fill(kafka_bootstrap, topic, range(10))

    def run(**options):
        query = (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
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

    run()
    fill(kafka_bootstrap, topic, range(10, 20))
    delete_records(kafka_bootstrap, topic, {0: 15})  # offsets 10..14 never reached the query

    with pytest.raises(StreamingQueryException, match="failOnDataLoss") as caught:
        run()
    assert f"offsets 10..14 of partition {topic}-0 were removed" in str(caught.value)

    run(failOnDataLoss="false")  # same checkpoint: skip what is gone, go on from 15
    got = sorted((r.offset, r.value) for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert got == values(range(10)) + values(range(15, 20))
