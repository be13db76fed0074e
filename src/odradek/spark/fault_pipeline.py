"""The pipeline the exactly-once fault runs drive, as it runs in a Spark driver: a streaming
query from odradek through a transform back to odradek, and a batch write, with the sink's
injected faults (spark/sink_faults.py) set for its tasks.

Input rows carry unique ids (``row-<id>``); the transform upper-cases them (``ROW-<id>``), so
an output row names the input row it came from (spark/fault_runs.py counts them). The driver
program is spark/fault_driver.py; tests and bench/spark_exactly_once.py start it through
spark/fault_runs.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odradek.spark.sink_faults import (
    FAIL_TASKS_PROPERTY,
    PAUSE_COMMIT_PROPERTY,
    PAUSE_TASKS_PROPERTY,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = [
    "BatchWrite",
    "PipelineRun",
    "batch_write",
    "commit_marker",
    "done_path",
    "input_value",
    "local_properties",
    "output_value",
    "run_pipeline",
    "start_pipeline",
]

QUERY_TIMEOUT_S = 600.0
TRANSFORM = "upper(CAST(value AS STRING)) AS value"


def input_value(row_id: int) -> bytes:
    return f"row-{row_id}".encode()


def output_value(row_id: int) -> bytes:
    """What the pipeline's transform makes of ``input_value(row_id)``."""
    return f"ROW-{row_id}".encode()


def done_path(marker: str) -> Path:
    """The file the driver creates once the run of pause marker ``marker`` is over."""
    return Path(marker + ".done")


def commit_marker(marker: str) -> Path:
    """The marker of the driver's commit's pause, in a run of pause marker ``marker``."""
    return Path(marker + ".commit")


@dataclass(frozen=True)
class PipelineRun:
    """One streaming query from ``source`` to ``sink``, run with ``availableNow`` to the end of
    its source. ``fail_tasks`` and ``pause`` are the sink's fault specs (without the pause's
    marker, which is ``marker``); ``pause_commit``: the driver's commit of the first
    micro-batch pauses on ``commit_marker(marker)``, its tasks' rows written and the checkpoint
    not told, for the driver to be killed there (fault_runs.kill_driver_in_commit)."""

    name: str
    bootstrap: str
    source: str
    sink: str
    checkpoint: str
    exactly_once: bool
    max_offsets: int
    marker: str
    state_topic: str | None = None
    fail_tasks: str | None = None
    pause: str | None = None
    pause_commit: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PipelineRun:
        return cls(**data)


@dataclass(frozen=True)
class BatchWrite:
    """``rows`` ids in ``partitions`` Spark partitions written to ``topic`` with ``df.write``."""

    bootstrap: str
    topic: str
    rows: int
    partitions: int
    exactly_once: bool
    state_topic: str | None = None
    fail_tasks: str | None = None


def _sink_options(writer, bootstrap: str, topic: str, exactly_once: bool,  # type: ignore[no-untyped-def]
                  state_topic: str | None):
    writer = (
        writer.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("exactlyOnce", str(exactly_once).lower())
    )
    if state_topic is not None:
        writer = writer.option("exactlyOnce.stateTopic", state_topic)
    return writer


def start_pipeline(spark: SparkSession, run: PipelineRun) -> StreamingQuery:
    """Start ``run``'s query."""
    stream = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", run.bootstrap)
        .option("subscribe", run.source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(run.max_offsets))
        .load()
        .selectExpr(TRANSFORM)
    )
    writer = _sink_options(stream.writeStream, run.bootstrap, run.sink, run.exactly_once,
                           run.state_topic)
    return writer.option("checkpointLocation", run.checkpoint).trigger(availableNow=True).start()


@contextmanager
def local_properties(spark: SparkSession, properties: Mapping[str, str | None]) -> Iterator[None]:
    """Set Spark local properties for the jobs (and queries) started in the block."""
    context = spark.sparkContext
    for name, value in properties.items():
        context.setLocalProperty(name, value)  # type: ignore[arg-type]
    try:
        yield
    finally:
        for name in properties:
            context.setLocalProperty(name, None)  # type: ignore[arg-type]


def _await(query: StreamingQuery) -> None:
    try:
        if not query.awaitTermination(QUERY_TIMEOUT_S):
            raise TimeoutError(f"the availableNow query did not finish within {QUERY_TIMEOUT_S:.0f} s")
    finally:
        query.stop()


def run_pipeline(spark: SparkSession, run: PipelineRun) -> dict[str, Any]:
    """Run ``run`` to the end of its source; its micro-batches' input rows, its wall time and
    the time its micro-batches spent in the sink (``addBatch``). Creates ``done_path`` of its
    marker when over, even if it failed."""
    pause = f"{run.pause}:{run.marker}" if run.pause else None
    faults = {FAIL_TASKS_PROPERTY: run.fail_tasks, PAUSE_TASKS_PROPERTY: pause,
              PAUSE_COMMIT_PROPERTY: str(commit_marker(run.marker)) if run.pause_commit else None}
    try:
        started = time.monotonic()
        with local_properties(spark, faults):
            query = start_pipeline(spark, run)
        _await(query)
        seconds = time.monotonic() - started
    finally:
        done_path(run.marker).touch()
    progress = query.recentProgress
    return {
        "batches": [p["numInputRows"] for p in progress],
        "batch_ids": [p["batchId"] for p in progress],
        "seconds": seconds,
        "add_batch_s": sum(p["durationMs"].get("addBatch", 0) for p in progress) / 1000,
    }


def batch_write(spark: SparkSession, write: BatchWrite) -> None:
    """Write ``write.rows`` ids (``row-<id>``) with ``df.write``, its tasks failing as
    ``write.fail_tasks`` says."""
    df = spark.range(write.rows).repartition(write.partitions).selectExpr(
        "CONCAT('row-', CAST(id AS STRING)) AS value"
    )
    writer = _sink_options(df.write.mode("append"), write.bootstrap, write.topic, write.exactly_once,
                           write.state_topic)
    with local_properties(spark, {FAIL_TASKS_PROPERTY: write.fail_tasks}):
        writer.save()
