"""register() on a SparkSession the user built: it refuses, in one line naming what to set,
when Spark's Python workers would run an interpreter that cannot import the data source.

Spark starts those workers with ``PYSPARK_PYTHON`` (read when the SparkContext is created),
else ``python3`` from ``PATH``; the sessions here are built in a child process so this run's
own ``PYSPARK_PYTHON`` (set by the ``spark`` fixture) does not leak into them.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import odradek
from odradek.spark.worker_python import WORKER_MODULES, worker_import_problem

SPARK_SESSION_TIMEOUT_S = 300

# Two sessions of the user's own making in one child process (one JVM). The first is built
# as a user would from a virtualenv: no PYSPARK_PYTHON, so workers run `python3` from PATH,
# and `spark.pyspark.python` on the builder, which Spark ignores for such a session. The
# second is built after setting PYSPARK_PYTHON to this interpreter. Each step prints one
# JSON line: what register() said, and what Spark's worker did with the data source.
CHILD = r"""
import json, os, sys
from pyspark.sql import SparkSession
import odradek.spark
from odradek.spark.source import OdradekDataSource

def report(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)

def session():
    return (SparkSession.builder.master("local[1]")
            .config("spark.ui.enabled", "false")
            .config("spark.pyspark.python", sys.executable)
            .getOrCreate())

def load_schema(spark):
    # load() asks a planner worker for the data source's schema: the worker imports it.
    try:
        df = (spark.read.format("odradek").option("kafka.bootstrap.servers", "localhost:9")
              .option("subscribe", "t").load())
        return {"columns": df.columns}
    except Exception as e:
        return {"worker_error": str(e)}

spark = session()
try:
    odradek.spark.register(spark)
    report("without", python=spark.sparkContext.pythonExec, registered=True)
except Exception as e:
    spark.dataSource.register(OdradekDataSource)  # what register() did before it checked
    report("without", python=spark.sparkContext.pythonExec, registered=False,
           error_type=type(e).__name__, message=str(e), **load_schema(spark))
spark.stop()

os.environ["PYSPARK_PYTHON"] = sys.executable
spark = session()
odradek.spark.register(spark)
report("with", python=spark.sparkContext.pythonExec, registered=True, **load_schema(spark))
spark.stop()
"""


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv of this Python with nothing installed: like a system ``python3``, it has
    none of the packages the data source needs."""
    env_dir = tmp_path_factory.mktemp("bare-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    return env_dir / "bin" / "python3"


def run_user_sessions(bare_python: Path) -> dict[str, dict]:
    unset = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["PATH"] = f"{bare_python.parent}{os.pathsep}{env['PATH']}"
    child = subprocess.run(
        [sys.executable, "-c", CHILD],
        env=env,
        capture_output=True,
        text=True,
        timeout=SPARK_SESSION_TIMEOUT_S,
    )
    steps = {}
    for line in child.stdout.splitlines():
        if line.startswith("{"):
            step = json.loads(line)
            steps[step.pop("step")] = step
    assert child.returncode == 0 and steps.keys() == {"without", "with"}, child.stderr[-3000:]
    return steps


def test_register_names_the_python_to_set_when_workers_cannot_import_odradek(bare_python):
    steps = run_user_sessions(bare_python)

    without = steps["without"]
    assert without["python"] == "python3"  # spark.pyspark.python on the builder is not used
    assert not without["registered"]
    assert without["error_type"] == "WorkerPythonError"
    message = without["message"]
    assert "\n" not in message
    assert message.startswith(
        "odradek.spark.register: Spark starts its Python workers with 'python3', "
        "which cannot import "
    )
    assert "pyarrow" in message
    assert f"set PYSPARK_PYTHON={sys.executable} in the environment" in message
    assert f"--conf spark.pyspark.python={sys.executable}" in message
    # The check is no false alarm: Spark's own worker fails to load the data source there.
    assert "ModuleNotFoundError" in without["worker_error"]

    with_python = steps["with"]
    assert with_python["python"] == sys.executable
    assert with_python["registered"]
    assert with_python["columns"][:3] == ["key", "value", "topic"]


def test_a_virtualenv_python_with_odradek_passes_the_check():
    # This run's interpreter is a virtualenv python (as PYSPARK_PYTHON in the spark fixture).
    assert worker_import_problem(sys.executable) is None


def test_an_interpreter_without_the_packages_fails_the_check(bare_python):
    problem = worker_import_problem(str(bare_python))
    assert problem is not None and problem.startswith("cannot import ")
    assert set(problem.removeprefix("cannot import ").split(", ")) >= {
        "confluent_kafka",
        "numpy",
        "pyarrow",
    }


def test_a_missing_interpreter_fails_the_check(tmp_path):
    assert worker_import_problem(str(tmp_path / "python3")) == (
        "cannot be started (No such file or directory)"
    )


def imported_modules(file: Path) -> list[str]:
    """The absolute imports of a source file, wherever they stand in it."""
    names: list[str] = []
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_worker_modules_lists_every_package_the_data_source_imports():
    """WORKER_MODULES is odradek plus every top-level package, besides pyspark and the
    standard library, that loading odradek.spark.source imports through odradek's modules."""
    src = Path(odradek.__file__).parent.parent
    packages = {"odradek"}
    seen: set[str] = set()
    pending = ["odradek.spark.source"]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        pending += [".".join(parts[:i]) for i in range(1, len(parts))]  # parent packages
        path = src.joinpath(*parts)
        file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        for name in imported_modules(file):
            top = name.partition(".")[0]
            if top == "odradek":
                pending.append(name)
            elif top not in sys.stdlib_module_names and top not in ("pyspark", "__future__"):
                packages.add(top)
    assert packages == set(WORKER_MODULES)
