"""Batch reads: ``spark.read.format("odradek")``."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from odradek.spark.consumer import read_range
from odradek.spark.offset_reader import KafkaOffsetReader
from odradek.spark.offsets import plan_ranges, split_ranges
from odradek.spark.options import OptionError, SourceOptions
from odradek.spark.worker_python import ExecutorChecked

log = logging.getLogger("odradek.spark")


class KafkaBatchReader(ExecutorChecked, DataSourceReader):
    """Plans one input partition per offset range (large ranges cut into pieces) between
    startingOffsets and endingOffsets, resolved once, on the driver."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        for warning in options.warnings:
            log.warning("odradek data source: %s", warning)
        offsets = KafkaOffsetReader(options)
        partitions = offsets.partitions()
        start = offsets.resolve(options.starting, partitions, starting=True)
        end = offsets.resolve(options.ending, partitions, starting=False)
        for tp in partitions:
            if start[tp] > end[tp]:
                raise OptionError(
                    _option_name(options.starting, "startingOffsets"),
                    f"partition {tp} would start at offset {start[tp]}, after its ending "
                    f"offset {end[tp]}",
                )
        ranges, losses = plan_ranges(
            start, end, offsets.earliest(partitions), fail_on_data_loss=options.fail_on_data_loss
        )
        for loss in losses:
            log.warning("odradek data source: data loss, skipping: %s", loss)
        pieces = split_ranges(
            ranges,
            min_partitions=options.min_partitions,
            max_records=options.max_records_per_partition,
        )
        return [InputPartition(piece) for piece in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # With no ranges, PySpark still runs one task with InputPartition(None).
        if partition.value is None:
            return iter(())
        return read_range(partition.value, self.options)


def _option_name(spec: object, default: str) -> str:
    return getattr(spec, "option", default)
