"""The `odradek` data source: Spark's Kafka source and sink, in Python."""

from __future__ import annotations

import uuid

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from odradek.spark.options import OptionError, parse_sink_options, parse_source_options
from odradek.spark.reader import KafkaBatchReader
from odradek.spark.schema import check_sink_schema, check_user_schema, source_schema
from odradek.spark.sink_state_topic import ensure_state_topic
from odradek.spark.stream_reader import KafkaStreamReader
from odradek.spark.worker_python import ExecutorChecked
from odradek.spark.writer import KafkaBatchWriter, KafkaStreamWriter


class OdradekDataSource(ExecutorChecked, DataSource):
    """Reads and writes Kafka topics of odradek or any Kafka-compatible cluster.

    Pickled to Spark's Python workers: it holds only its options.
    """

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> StructType:
        # Called by load() for batch and streaming alike, so only mode-free rules apply here;
        # reader() / streamReader() check the rest.
        options = parse_source_options(self.options, streaming=None)
        return source_schema(options.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse_source_options(self.options, streaming=False)
        check_user_schema(schema, options.include_headers)
        return KafkaBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = parse_source_options(self.options, streaming=True)
        check_user_schema(schema, options.include_headers)
        return KafkaStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        # Spark calls this for the Append and Overwrite save modes only. ErrorIfExists (the
        # default, which Spark's Kafka sink accepts) and Ignore it refuses itself, before it
        # creates the data source, so no message of ours can reach the user there.
        if overwrite:
            raise OptionError("mode", "Kafka topics can only be appended to; use mode 'append'")
        options = parse_sink_options(self.options)
        check_sink_schema(schema, options.topic)
        return KafkaBatchWriter(options, write_id=uuid.uuid4().hex)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # overwrite is the Complete output mode: as in Spark's Kafka sink, whose truncate does
        # nothing, each micro-batch appends the whole result again.
        options = parse_sink_options(self.options)
        check_sink_schema(schema, options.topic)
        if options.exactly_once:
            ensure_state_topic(options)
        return KafkaStreamWriter(options)
