"""A local SparkSession for odradek's own jobs (the demo, benchmarks, trying things)."""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["local_session"]

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


def local_session(
    app_name: str = "odradek", *, cores: int = 2, shuffle_partitions: int = 4
) -> SparkSession:
    """A ``local[cores]`` SparkSession with the ``odradek`` data source registered, no UI,
    no console progress bars and Spark's own logging at ERROR. Stop it when done."""
    # Spark starts the data source's Python workers with PYSPARK_PYTHON; they must run this
    # interpreter, which has odradek installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    _quiet_logging()
    from pyspark.sql import SparkSession

    import odradek.spark

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(cores))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(spark)
    return spark
