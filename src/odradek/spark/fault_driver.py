"""The Spark driver program of the exactly-once fault runs, run as its own process:

    python -m odradek.spark.fault_driver SPEC.json RESULT.json

A process of its own because a Python process has one SparkContext (a test run's is its
``local[2]`` session), Spark retries a failed task only on a master that allows it
(``local[2,4]``: 2 cores, 4 attempts, or a cluster), and a fault run kills executors and
restarts queries under a driver it does not share. SPEC (spark/fault_runs.py writes it):
``master`` (``local[N,F]`` or ``spark://host:port``, then ``executors``, the executors to wait
for), ``batch_writes`` (fault_pipeline.BatchWrite fields) and ``runs``
(fault_pipeline.PipelineRun fields), done in that order. RESULT: each run's result by name.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from odradek.spark.fault_pipeline import BatchWrite, PipelineRun, batch_write, run_pipeline
from odradek.spark.session import odradek_session
from odradek.spark.standalone import cluster_session

__all__ = ["drive"]


def _session(spec: dict[str, Any]):  # type: ignore[no-untyped-def]
    master = spec["master"]
    if master.startswith("spark://"):
        return cluster_session(master, "odradek-fault-run", executors=spec.get("executors", 0))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    return odradek_session(master, "odradek-fault-run", {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
    })


def drive(spec: dict[str, Any]) -> dict[str, Any]:
    """Run SPEC's batch writes, then its runs, on one SparkSession."""
    spark = _session(spec)
    try:
        for write in spec.get("batch_writes", []):
            batch_write(spark, BatchWrite(**write))
        return {"runs": {run["name"]: run_pipeline(spark, PipelineRun.from_json(run))
                         for run in spec.get("runs", [])}}
    finally:
        spark.stop()


if __name__ == "__main__":
    Path(sys.argv[2]).write_text(json.dumps(drive(json.loads(Path(sys.argv[1]).read_text()))))
