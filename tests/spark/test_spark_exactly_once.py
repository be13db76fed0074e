"""The sink's ``exactlyOnce`` when the driver fails after the tasks wrote:

- A streaming query's commit in the driver raises (sink_faults.FAIL_COMMIT_PROPERTY), as a
  driver dying between the sink's writes and the checkpoint commit; the query is started again
  from its checkpoint, which replays the batch: with exactlyOnce its tasks find their
  partitions committed and write nothing, so each input id is in the output once; without,
  the batch's rows are there twice.
- The same with the driver itself killed (``-m ecosystem``): a streaming query's driver
  program (its own process: spark/fault_driver.py) is SIGKILLed while its commit of the first
  micro-batch waits (sink_faults.PAUSE_COMMIT_PROPERTY), and the query is started again from
  its checkpoint on a new driver, with the same outcome.
- A batch write's commit raises (sink_faults.FAIL_COMMIT_PROPERTY): with exactlyOnce nothing
  of it is visible to read_committed readers (the driver aborts the tasks' transactions), so
  running it again writes each row once; without, the failed job's rows stay and the second
  run doubles them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from odradek.spark import fault_pipeline
from odradek.spark.fault_pipeline import (
    BatchWrite,
    PipelineRun,
    input_value,
    local_properties,
    output_value,
    start_pipeline,
)
from odradek.spark.fault_runs import kill_driver_in_commit, produce_input
from odradek.spark.sink_faults import FAIL_COMMIT_PROPERTY
from support import OdradekBroker
from support.transactions import read_topic

PARTITIONS = 4
RECORDS = 2000
MAX_OFFSETS = 1000  # two micro-batches


def committed(bootstrap: str, topic: str) -> Counter[bytes]:
    return Counter(v for _, _, v in read_topic(bootstrap, topic, PARTITIONS, "read_committed"))


def stream(spark, bootstrap: str, source: str, sink: str, checkpoint: Path, exactly_once: str):  # type: ignore[no-untyped-def]
    run = PipelineRun(name="restart", bootstrap=bootstrap, source=source, sink=sink,
                      checkpoint=str(checkpoint), exactly_once=exactly_once == "true",
                      max_offsets=MAX_OFFSETS, marker=str(checkpoint.with_name("pause")))
    return start_pipeline(spark, run)


@pytest.mark.parametrize("exactly_once", ["true", "false"])
def test_a_query_restarted_after_a_failed_commit_writes_each_row_once_with_exactly_once(
    spark, odradek_broker: OdradekBroker, kafka_bootstrap: str, tmp_path: Path, exactly_once: str
):
    source = odradek_broker.new_topic("eos-restart-in", PARTITIONS)
    sink = odradek_broker.new_topic("eos-restart-out", PARTITIONS)
    produce_input(kafka_bootstrap, source, RECORDS, PARTITIONS)
    outputs = {output_value(i) for i in range(RECORDS)}  # the query upper-cases each row
    checkpoint = tmp_path / "checkpoint"

    with local_properties(spark, {FAIL_COMMIT_PROPERTY: "true"}):
        query = stream(spark, kafka_bootstrap, source, sink, checkpoint, exactly_once)
        try:
            with pytest.raises(StreamingQueryException, match="injected failure of the driver's commit"):
                query.awaitTermination(300)
        finally:
            query.stop()
    # The first micro-batch's tasks committed their rows; the checkpoint does not know it.
    first_batch = committed(kafka_bootstrap, sink)
    assert sum(first_batch.values()) == MAX_OFFSETS
    assert not (checkpoint / "commits" / "0").exists()

    query = stream(spark, kafka_bootstrap, source, sink, checkpoint, exactly_once)
    try:
        assert query.awaitTermination(300)
    finally:
        query.stop()
    assert [p["batchId"] for p in query.recentProgress] == [0, 1]  # batch 0 ran again
    assert (checkpoint / "commits" / "1").exists()

    output = committed(kafka_bootstrap, sink)
    assert set(output) == outputs
    if exactly_once == "true":
        assert all(n == 1 for n in output.values())
    else:
        assert {value for value, n in output.items() if n == 2} == set(first_batch)
        assert sum(output.values()) == RECORDS + MAX_OFFSETS


# The real thing, with -m ecosystem (two driver programs of their own per case: minutes on a
# loaded machine; bench/spark_exactly_once.py runs it too): the driver SIGKILLed while its
# commit waits. The checks at the kill show it struck between the sink's writes and the
# checkpoint commit.
@pytest.mark.ecosystem
@pytest.mark.parametrize("exactly_once", [True, False], ids=["on", "off"])
def test_a_driver_killed_between_the_sinks_writes_and_the_checkpoint_commit(
    odradek_broker: OdradekBroker, kafka_bootstrap: str, tmp_path: Path, exactly_once: bool
):
    source = odradek_broker.new_topic("eos-restart-in", PARTITIONS)
    sink = odradek_broker.new_topic("eos-restart-out", PARTITIONS)
    produce_input(kafka_bootstrap, source, RECORDS, PARTITIONS)
    outputs = {output_value(i) for i in range(RECORDS)}  # the query upper-cases each row
    checkpoint = tmp_path / "checkpoint"
    run = PipelineRun(name="driver-kill", bootstrap=kafka_bootstrap, source=source, sink=sink,
                      checkpoint=str(checkpoint), exactly_once=exactly_once, max_offsets=MAX_OFFSETS,
                      marker=str(tmp_path / "pause"))
    at_kill: dict[str, object] = {}

    def look() -> None:  # the driver is dead; the query has not started again
        at_kill["output"] = committed(kafka_bootstrap, sink)
        at_kill["batch 0 committed"] = (checkpoint / "commits" / "0").exists()
        at_kill["batch 0 planned"] = (checkpoint / "offsets" / "0").exists()

    result = kill_driver_in_commit(tmp_path / "driver", "local[2]", run, timeout_s=300, between=look)

    # The first micro-batch's tasks had written (and with exactlyOnce committed) their rows;
    # the checkpoint had planned the batch but not recorded it done.
    first_batch = at_kill["output"]
    assert isinstance(first_batch, Counter) and sum(first_batch.values()) == MAX_OFFSETS
    assert (at_kill["batch 0 planned"], at_kill["batch 0 committed"]) == (True, False)
    assert result["batch_ids"] == [0, 1]  # batch 0 ran again
    assert (checkpoint / "commits" / "1").exists()

    output = committed(kafka_bootstrap, sink)
    assert set(output) == outputs
    if exactly_once:
        assert all(n == 1 for n in output.values())
    else:
        assert {value for value, n in output.items() if n == 2} == set(first_batch)
        assert sum(output.values()) == RECORDS + MAX_OFFSETS


def batch_write(spark, bootstrap: str, topic: str, exactly_once: str) -> None:  # type: ignore[no-untyped-def]
    fault_pipeline.batch_write(spark, BatchWrite(bootstrap, topic, RECORDS, PARTITIONS, exactly_once == "true"))


@pytest.mark.parametrize("exactly_once", ["true", "false"])
def test_a_failed_batch_write_leaves_nothing_with_exactly_once(
    spark, odradek_broker: OdradekBroker, kafka_bootstrap: str, exactly_once: str
):
    topic = odradek_broker.new_topic("eos-batch", PARTITIONS)
    rows = {input_value(i) for i in range(RECORDS)}

    with local_properties(spark, {FAIL_COMMIT_PROPERTY: "true"}), pytest.raises(
        Exception, match="injected failure of the driver's commit"
    ):
        batch_write(spark, kafka_bootstrap, topic, exactly_once)
    written = read_topic(kafka_bootstrap, topic, PARTITIONS, "read_uncommitted")
    assert {v for _, _, v in written} == rows  # the tasks did write
    after_failure = committed(kafka_bootstrap, topic)
    assert after_failure == (Counter() if exactly_once == "true" else Counter(rows))

    batch_write(spark, kafka_bootstrap, topic, exactly_once)
    output = committed(kafka_bootstrap, topic)
    assert set(output) == rows
    assert set(output.values()) == ({1} if exactly_once == "true" else {2})
    # The data source reads the same: read_committed skips the aborted rows and the markers.
    assert spark_read_committed(spark, kafka_bootstrap, topic) == output


def spark_read_committed(spark, bootstrap: str, topic: str) -> Counter[bytes]:  # type: ignore[no-untyped-def]
    df = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
        .load()
    )
    return Counter(bytes(r.value) for r in df.select("value").collect())
