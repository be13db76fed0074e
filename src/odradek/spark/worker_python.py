"""The interpreter Spark starts the data source's Python workers with, and whether it can
import the data source.

Spark pickles ``OdradekDataSource`` by reference, so every Python worker that plans or runs a
read or write imports ``odradek.spark.source`` again: planner workers on the driver (``schema()``,
``reader()``, ``partitions()``, ``writer()``) and task workers on the executors (``read()``,
``write()``). A SparkSession built from Python starts them all with
``SparkContext.pythonExec``: the ``PYSPARK_PYTHON`` environment variable as it was when the
SparkContext was created, else ``python3`` from ``PATH``. ``spark.pyspark.python`` counts only
through spark-submit, which turns it into ``PYSPARK_PYTHON`` for the driver process; set on a
``SparkSession.builder`` it is ignored. When that interpreter lacks odradek (the system
``python3`` beside a virtualenv), the first read or write fails inside a worker with
``No module named 'odradek'``; ``register()`` says so up front instead. The check runs the
interpreter on the driver's machine, where the planner workers run; executors on other
machines start the same path there.
"""

from __future__ import annotations

import subprocess
import sys

__all__ = ["WORKER_MODULES", "WorkerPythonError", "check_worker_python", "worker_import_problem"]

# The top-level packages a worker imports to load odradek.spark.source (pyspark itself comes
# with Spark's PYTHONPATH). tests/spark/test_spark_register.py keeps this list complete.
WORKER_MODULES = ("odradek", "confluent_kafka", "numpy", "pyarrow")

# find_spec locates a top-level package without importing it, so the probe costs an
# interpreter start (about 10 ms); importing odradek.spark.source would cost about 250 ms.
_PROBE = (
    "import importlib.util, sys\n"
    "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
)


class WorkerPythonError(RuntimeError):
    """Spark's Python workers would run an interpreter that cannot import the data source."""


def worker_import_problem(python: str) -> str | None:
    """What stops ``python`` (a path, or a name looked up on ``PATH`` as Spark does) from
    importing the data source, or None if nothing does."""
    try:
        probe = subprocess.run(
            [python, "-c", _PROBE, *WORKER_MODULES], capture_output=True, text=True, check=False
        )
    except OSError as e:
        return f"cannot be started ({e.strerror})"
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines() or [f"exit status {probe.returncode}"]
        return f"fails to run ({lines[-1]})"
    missing = probe.stdout.split()
    return f"cannot import {', '.join(missing)}" if missing else None


def check_worker_python(python: str) -> None:
    """Raise WorkerPythonError, in one line naming what to set, if ``python`` cannot import
    the data source."""
    problem = worker_import_problem(python)
    if problem is not None:
        raise WorkerPythonError(
            f"odradek.spark.register: Spark starts its Python workers with {python!r}, which "
            f"{problem}; set PYSPARK_PYTHON={sys.executable} in the environment before the "
            f"SparkSession is created (spark-submit: --conf spark.pyspark.python={sys.executable})"
        )
