"""PySpark data source `odradek`: Spark's Kafka source and sink without the JVM connector.

import odradek.spark
odradek.spark.register(spark)
df = (spark.read.format("odradek")
      .option("kafka.bootstrap.servers", "localhost:9092")
      .option("subscribe", "flights")
      .load())
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession) -> None:
    """Register the data source with ``spark`` under the format name ``odradek``.

    Raises ``WorkerPythonError`` if the interpreter Spark starts its Python workers with
    cannot import the data source (see ``odradek.spark.worker_python``).
    """
    from pyspark.sql.session import SparkSession as ClassicSparkSession

    from odradek.spark.source import OdradekDataSource
    from odradek.spark.worker_python import check_worker_python

    # A Spark Connect session's workers run on the server, out of reach of this check.
    if isinstance(spark, ClassicSparkSession):
        check_worker_python(spark.sparkContext.pythonExec)
    spark.dataSource.register(OdradekDataSource)
