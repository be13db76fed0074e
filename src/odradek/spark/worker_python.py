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

import builtins
import subprocess
import sys
import types

__all__ = [
    "EXECUTOR_FIXES",
    "WORKER_MODULES",
    "ExecutorChecked",
    "WorkerPythonError",
    "check_worker_python",
    "worker_import_problem",
]

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


# What an executor whose Python lacks the data source's modules says to do (README, "Spark on
# a cluster").
EXECUTOR_FIXES = (
    "install odradek[spark] in that Python on every worker, or ship a packed virtualenv with "
    "--conf spark.archives=pyspark_venv.tar.gz#environment and "
    "spark.pyspark.python=./environment/bin/python"
)


def _load_checked(payload: bytes, modules: tuple[str, ...], fixes: str) -> object:
    """Unpickle a data source object on a Python worker, after checking that the worker's
    interpreter can import ``modules``. Runs in a worker that may lack odradek: it uses only
    the standard library, and reaches the worker as code, not as a reference to this module."""
    import importlib.util
    import pickle
    import socket
    import sys

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise RuntimeError(
            f"odradek data source: the executor's Python {sys.executable} on "
            f"{socket.gethostname()} cannot import {', '.join(missing)}; {fixes}"
        )
    cls, state = pickle.loads(payload)
    instance = cls.__new__(cls)
    instance.__dict__.update(state)
    return instance


# A copy of _load_checked whose qualified name leads nowhere, so cloudpickle sends it by value:
# a worker without odradek can run it, where unpickling a reference to any odradek class would
# stop at "No module named 'odradek'" deep inside a traceback.
_LOAD_CHECKED_BY_VALUE = types.FunctionType(
    _load_checked.__code__, {"__builtins__": builtins}, "_load_checked"
)
_LOAD_CHECKED_BY_VALUE.__qualname__ = "_load_checked<by value>"
_LOAD_CHECKED_BY_VALUE.__module__ = __name__


class ExecutorChecked:
    """Mixin for the data source's pickled objects (the data source, its readers and writers):
    a Python worker unpickling one first checks that it can import what the data source needs,
    and otherwise fails with one line naming its interpreter, what is missing and the fixes."""

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        from pyspark import cloudpickle

        payload = cloudpickle.dumps((type(self), self.__dict__))
        return _LOAD_CHECKED_BY_VALUE, (payload, WORKER_MODULES, EXECUTOR_FIXES)
