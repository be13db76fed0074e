"""Spark's half of the spark-kafka suite (compat/suites/spark_kafka.py), in a process of its
own: its SparkSession must start with Spark's Kafka connector in ``spark.jars``, which a
session already running in the caller's process (a test run's) would ignore.

``python -m compat.spark_kafka_job --bootstrap B --source T --sink-prefix P --checkpoints D
--jars a.jar:b.jar`` runs the flights pipeline (odradek.spark.flights) once per data source,
``kafka`` (Spark's connector) and ``odradek``, each writing to ``P-<source>``, then reads each
results topic with the other source too.  It prints one JSON object a line:

* ``{"versions": {...}}`` first;
* ``{"format": f, "input_rows": n, "batches": n, "seconds": s, "table": [...]}`` or
  ``{"format": f, "error": "..."}`` per data source (with ``"retried"`` when Spark's Python
  worker had to be started again);
* ``{"written": f, "read": g, "table": [...]}`` or with ``"error"`` per cross read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from odradek.spark.flights import read_delay_stats, run_delay_stats
from odradek.spark.session import odradek_session

__all__ = ["DATA_SOURCES", "main"]

DATA_SOURCES = ("kafka", "odradek")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.spark_kafka_job", description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink-prefix", required=True)
    parser.add_argument("--checkpoints", required=True)
    parser.add_argument("--jars", required=True, help="the connector's jars, joined by the path separator")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = odradek_session("local[2]", "compat-spark-kafka", {
        "spark.jars": ",".join(args.jars.split(os.pathsep)),
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "2",
        "spark.ui.enabled": "false",
    })
    try:
        import pyspark

        _print({"versions": {"pyspark": pyspark.__version__, "spark": spark.version}})
        for source in DATA_SOURCES:
            def pipeline(source: str = source) -> dict[str, object]:
                run = run_delay_stats(spark, args.bootstrap, str(Path(args.checkpoints) / source), args.source,
                                      f"{args.sink_prefix}-{source}", data_source=source, timeout_s=900)
                table = read_delay_stats(spark, args.bootstrap, f"{args.sink_prefix}-{source}", data_source=source)
                return {"input_rows": run.input_rows, "batches": run.batches, "seconds": round(run.seconds, 1),
                        "table": table.to_dict(orient="records")}
            _print({"format": source, **_attempt(pipeline)})
        for written, read in zip(DATA_SOURCES, reversed(DATA_SOURCES), strict=True):
            def cross(written: str = written, read: str = read) -> dict[str, object]:
                table = read_delay_stats(spark, args.bootstrap, f"{args.sink_prefix}-{written}", data_source=read)
                return {"table": table.to_dict(orient="records")}
            _print({"written": written, "read": read, **_attempt(cross)})
    finally:
        spark.stop()
    return 0


# Spark gives the Python worker it starts for a Python data source 10 s to connect back (not
# configurable); on a loaded machine it may take longer.  That is Spark's start-up, not the
# data source: the query is run again (its checkpoint makes it resume), and the output says so.
_WORKER_TIMEOUT = "Python worker failed to connect back"
_ATTEMPTS = 3


def _attempt(body: Callable[[], dict[str, object]]) -> dict[str, object]:
    retried: list[str] = []
    for _ in range(_ATTEMPTS):
        try:
            return {**body(), **({"retried": retried} if retried else {})}
        except Exception as e:  # the suite reports it: a connector that cannot load is a finding
            error = evidence(f"{type(e).__name__}: {e}")
            if _WORKER_TIMEOUT not in error:
                break
            retried.append(_WORKER_TIMEOUT)
    return {"error": error, **({"retried": retried} if retried else {})}


def evidence(message: str, limit: int = 1500) -> str:
    """The lines of a (Py4J) error that say what went wrong: its first lines and every
    ``Caused by``, not the whole Java stack trace."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    kept = [line for i, line in enumerate(lines)
            if (i < 3 and not line.startswith("at ")) or line.startswith("Caused by")]
    return " | ".join(kept)[:limit]


def _print(obj: dict[str, object]) -> None:
    print(json.dumps(obj), flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
