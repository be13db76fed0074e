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
    """Register the data source with ``spark`` under the format name ``odradek``."""
    from odradek.spark.source import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)
