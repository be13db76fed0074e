"""Executor-side reads of one offset range (no Spark): exact bounds, gaps, data loss."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from odradek.spark.consumer import read_range
from odradek.spark.offsets import DataLossError, OffsetRange
from odradek.spark.options import parse_source_options
from odradek.spark.schema import source_arrow_schema
from support import TANSU_ONE_RECORD_PER_BATCH, delete_records, produce


def options(bootstrap: str, topic: str, **extra: str):
    return parse_source_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **extra}, streaming=False
    )


def offsets_read(offset_range: OffsetRange, opts) -> list[int]:
    return [
        o for batch in read_range(offset_range, opts) for o in batch.column("offset").to_pylist()
    ]


def test_batches_have_the_source_schema_and_exact_bounds(kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("exact", partitions=1)
    produce(kafka_bootstrap, topic, [(0, b"k", str(i).encode()) for i in range(25)])
    opts = options(kafka_bootstrap, topic, includeHeaders="true")
    batches = list(read_range(OffsetRange(topic, 0, 3, 21), opts, batch_rows=7))
    assert all(b.schema.equals(source_arrow_schema(True)) for b in batches)
    assert all(b.num_rows <= 7 for b in batches)
    table_offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert table_offsets == list(range(3, 21))
    assert [v for b in batches for v in b.column("value").to_pylist()] == [
        str(i).encode() for i in range(3, 21)
    ]


def test_arrow_schema_is_what_pyspark_expects():
    from pyspark.sql.pandas.types import to_arrow_schema

    from odradek.spark.schema import source_schema

    for headers in (False, True):
        assert source_arrow_schema(headers).equals(
            to_arrow_schema(source_schema(headers), timezone="UTC")
        )


def test_range_ending_on_a_transaction_marker_finishes(tansu_bootstrap, tansu_broker):
    """On Tansu, which writes real transaction markers: odradek has no transactions."""
    topic = tansu_broker.new_topic("marker", partitions=1)
    with Producer(
        {
            "bootstrap.servers": tansu_bootstrap,
            "transactional.id": f"tx-{topic}",
            **TANSU_ONE_RECORD_PER_BATCH,
        }
    ) as producer:
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(4):
            producer.produce(topic, value=str(i).encode(), partition=0)
        producer.commit_transaction(30)
    opts = options(tansu_bootstrap, topic, **{"kafkaConsumer.pollTimeoutMs": "15000"})
    # offset 4 is the commit marker: no record has it, the read must still stop
    assert offsets_read(OffsetRange(topic, 0, 1, 5), opts) == [1, 2, 3]


def test_range_past_the_end_of_the_log(kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("short", partitions=1)
    produce(kafka_bootstrap, topic, [(0, None, b"x")] * 5)
    with pytest.raises(DataLossError, match=f"partition {topic}-0 ends at offset 5, before 9"):
        offsets_read(OffsetRange(topic, 0, 2, 9), options(kafka_bootstrap, topic))
    lenient = options(kafka_bootstrap, topic, failOnDataLoss="false")
    assert offsets_read(OffsetRange(topic, 0, 2, 9), lenient) == [2, 3, 4]


def test_range_whose_start_was_removed(kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("removed", partitions=1)
    produce(kafka_bootstrap, topic, [(0, None, b"x")] * 10)
    delete_records(kafka_bootstrap, topic, {0: 6})
    with pytest.raises(DataLossError, match=r"offsets 2\.\.5 of partition .* were removed"):
        offsets_read(OffsetRange(topic, 0, 2, 9), options(kafka_bootstrap, topic))
    lenient = options(kafka_bootstrap, topic, failOnDataLoss="false")
    assert offsets_read(OffsetRange(topic, 0, 2, 9), lenient) == [6, 7, 8]
