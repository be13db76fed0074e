"""A Spark driver for tests/spark/test_spark_cluster.py, run as its own process: the test run's
own SparkSession (``local[2]``, tests/spark/conftest.py) holds the one SparkContext a Python
process may have, and a driver on a cluster is a separate program anyway (spark-submit).

``python cluster_driver.py SPEC.json RESULT.json``; SPEC's ``job``:

* ``read``: on one application, a batch read of ``topic`` (its rows, and which executor ran
  each task of the scan), then a streaming ``availableNow`` query from ``topic`` into a
  parquet directory, run once, then again from its checkpoint after producing ``more``
  further records; then the exactly-once ``fault_runs`` (odradek.spark.fault_pipeline), whose
  executors the test kills (odradek.spark.fault_runs.strike).
* ``bare-executors``: a batch read whose executors run ``executor_archive``'s Python (one
  without odradek); the result is the error the driver saw.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from confluent_kafka import Producer

from odradek.spark.fault_pipeline import PipelineRun, run_pipeline
from odradek.spark.standalone import cluster_session, stage_tasks


def _source(spark, spec: dict, streaming: bool):  # type: ignore[no-untyped-def]
    reader = spark.readStream if streaming else spark.read
    return (
        reader.format("odradek")
        .option("kafka.bootstrap.servers", spec["bootstrap"])
        .option("subscribe", spec["topic"])
        .option("startingOffsets", "earliest")
        .load()
    )


def _stream_once(spark, spec: dict) -> int:  # type: ignore[no-untyped-def]
    query = (
        _source(spark, spec, streaming=True)
        .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition", "offset")
        .writeStream.format("parquet")
        .option("path", spec["output"])
        .option("checkpointLocation", spec["checkpoint"])
        .trigger(availableNow=True)
        .start()
    )
    try:
        if not query.awaitTermination(120):
            raise TimeoutError("the availableNow query did not finish within 120 s")
    finally:
        query.stop()
    return sum(p["numInputRows"] for p in query.recentProgress)


def read(spec: dict) -> dict:
    spark = cluster_session(spec["master"], "odradek-cluster-test", executors=spec["workers"])
    try:
        spark.sparkContext.setJobGroup("batch", "batch read")
        rows = (
            _source(spark, spec, streaming=False)
            .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition")
            .collect()
        )
        tasks = stage_tasks(spark, "batch")
        first_run = _stream_once(spark, spec)
        producer = Producer({"bootstrap.servers": spec["bootstrap"], "acks": "all", "enable.idempotence": True})
        for key, value in spec["more"]:
            producer.produce(spec["topic"], value.encode(), key.encode())
        if producer.flush(60):
            raise RuntimeError("records of the second streaming run still unacknowledged")
        second_run = _stream_once(spark, spec)
        fault_runs = {run["name"]: run_pipeline(spark, PipelineRun.from_json(run)) for run in spec["fault_runs"]}
    finally:
        spark.stop()
    return {
        "rows": [[r.key, r.value, r.partition] for r in rows],
        "tasks": [[t.stage_id, t.partition, t.executor_id] for t in tasks],
        "stream_input_rows": [first_run, second_run],
        "fault_runs": fault_runs,
    }


def bare_executors(spec: dict) -> dict:
    spark = cluster_session(
        spec["master"], "odradek-bare-executors", executor_python="./environment/bin/python",
        conf={"spark.archives": f"{spec['executor_archive']}#environment", "spark.task.maxFailures": "1"},
    )
    try:
        _source(spark, spec, streaming=False).count()
        return {"error": None}
    except Exception as e:  # the error is the result
        return {"error": str(e)}
    finally:
        spark.stop()


if __name__ == "__main__":
    spec = json.loads(Path(sys.argv[1]).read_text())
    result = {"read": read, "bare-executors": bare_executors}[spec["job"]](spec)
    Path(sys.argv[2]).write_text(json.dumps(result))
