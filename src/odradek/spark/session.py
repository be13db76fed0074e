"""SparkSessions for odradek's own jobs (the demo, benchmarks, trying things): local, or on a cluster (odradek.spark.standalone)."""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["local_session", "odradek_session"]

# Spark's driver JVM is running before builder options apply, so its log configuration comes
# in through the submit arguments: errors only, on stderr.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _quiet_logging() -> None:
    config = Path(tempfile.gettempdir()) / "odradek-spark-log4j2.properties"
    if not config.exists() or config.read_text() != _LOG4J2:
        config.write_text(_LOG4J2)
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS",
                          f"--driver-java-options -Dlog4j2.configurationFile=file:{config} pyspark-shell")
    # PySpark warns about pandas 3 on every session; the data source does not depend on it.
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\..*")


def odradek_session(master: str, app_name: str, conf: Mapping[str, str]) -> SparkSession:
    """A SparkSession on ``master`` with ``conf``, the ``odradek`` data source registered, no
    console progress bars, UTC session time and Spark's own logging at ERROR. The caller sets
    ``PYSPARK_PYTHON`` first: the interpreter the data source's Python workers run."""
    _quiet_logging()
    from pyspark.sql import SparkSession

    import odradek.spark

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for name, value in conf.items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        odradek.spark.register(spark)
    except BaseException:
        spark.stop()
        raise
    return spark


def local_session(
    app_name: str = "odradek", *, cores: int = 2, shuffle_partitions: int = 4
) -> SparkSession:
    """A ``local[cores]`` SparkSession with the ``odradek`` data source registered, no UI,
    no console progress bars and Spark's own logging at ERROR. Stop it when done."""
    # Spark starts the data source's Python workers with PYSPARK_PYTHON; they must run this
    # interpreter, which has odradek installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return odradek_session(f"local[{cores}]", app_name, {
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(cores),
        "spark.ui.enabled": "false",
    })
