"""A local SparkSession for odradek's own jobs (the demo, benchmarks, trying things)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["local_session"]


def local_session(
    app_name: str = "odradek", *, cores: int = 2, shuffle_partitions: int = 4
) -> SparkSession:
    """A ``local[cores]`` SparkSession with the ``odradek`` data source registered, no UI,
    no console progress bars and Spark's own logging at ERROR. Stop it when done."""
    # Spark starts the data source's Python workers with PYSPARK_PYTHON; they must run this
    # interpreter, which has odradek installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
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
