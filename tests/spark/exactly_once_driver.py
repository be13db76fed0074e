"""A Spark driver for tests/spark/test_spark_exactly_once_retries.py, run as its own process:
Spark retries a failed task only when the master says so (``local[2,4]``: 2 cores, 4
attempts), and this process's SparkContext would be the run's ``local[2]`` session, where a
task's first failure fails its job.

``python exactly_once_driver.py SPEC.json RESULT.json``. For each entry of SPEC's ``writes``
(``exactlyOnce`` "true" or "false", output topics ``batch_topic`` and ``stream_topic``):

* a batch write of SPEC's ``rows`` ids (``row-<id>``) in ``partitions`` partitions, whose tasks
  fail as ``batch_faults`` says (sink_faults.FAIL_TASKS_PROPERTY);
* a streaming query from ``input_topic``, ``max_offsets`` per micro-batch, run with
  ``availableNow`` to the end of the topic, whose tasks fail as ``stream_faults`` says.

The result is the number of input rows of each query's micro-batches.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

import odradek.spark
from odradek.spark.sink_faults import FAIL_TASKS_PROPERTY


def _session() -> SparkSession:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2,4]")
        .appName("odradek-exactly-once-retries")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    odradek.spark.register(spark)
    return spark


def _batch_write(spark: SparkSession, spec: dict, write: dict) -> None:
    df = spark.range(spec["rows"]).repartition(spec["partitions"]).selectExpr(
        "CONCAT('row-', CAST(id AS STRING)) AS value"
    )
    (
        df.write.format("odradek")
        .mode("append")
        .option("kafka.bootstrap.servers", spec["bootstrap"])
        .option("topic", write["batch_topic"])
        .option("exactlyOnce", write["exactlyOnce"])
        .option("exactlyOnce.stateTopic", spec["state_topic"])
        .save()
    )


def _stream(spark: SparkSession, spec: dict, write: dict) -> list[int]:
    query = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", spec["bootstrap"])
        .option("subscribe", spec["input_topic"])
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(spec["max_offsets"]))
        .load()
        .selectExpr("value")
        .writeStream.format("odradek")
        .option("kafka.bootstrap.servers", spec["bootstrap"])
        .option("topic", write["stream_topic"])
        .option("exactlyOnce", write["exactlyOnce"])
        .option("exactlyOnce.stateTopic", spec["state_topic"])
        .option("checkpointLocation", write["checkpoint"])
        .trigger(availableNow=True)
        .start()
    )
    try:
        if not query.awaitTermination(300):
            raise TimeoutError("the availableNow query did not finish within 300 s")
    finally:
        query.stop()
    return [p["numInputRows"] for p in query.recentProgress]


def run(spec: dict) -> dict:
    spark = _session()
    context = spark.sparkContext
    batches = {}
    try:
        for write in spec["writes"]:
            context.setLocalProperty(FAIL_TASKS_PROPERTY, spec["batch_faults"])
            _batch_write(spark, spec, write)
            context.setLocalProperty(FAIL_TASKS_PROPERTY, spec["stream_faults"])
            batches[write["exactlyOnce"]] = _stream(spark, spec, write)
            context.setLocalProperty(FAIL_TASKS_PROPERTY, None)
    finally:
        spark.stop()
    return {"stream_batches": batches}


if __name__ == "__main__":
    spec = json.loads(Path(sys.argv[1]).read_text())
    Path(sys.argv[2]).write_text(json.dumps(run(spec)))
