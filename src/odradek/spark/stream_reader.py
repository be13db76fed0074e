"""Streaming reads: ``spark.readStream.format("odradek")``."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from odradek.spark.consumer import read_range
from odradek.spark.offset_reader import KafkaOffsetReader
from odradek.spark.offsets import (
    TopicPartition,
    cap_offsets,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
    split_ranges,
)
from odradek.spark.options import SourceOptions
from odradek.spark.worker_python import ExecutorChecked

log = logging.getLogger("odradek.spark")


class KafkaStreamReader(ExecutorChecked, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over Kafka offsets, checkpointed as ``{"topic": {"partition": offset}}``.

    Spark keeps one driver-side Python process per query for this object, so the cached
    latest offsets and the AvailableNow target live here; the Kafka client lives in
    offset_reader's per-process registry.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._offsets = KafkaOffsetReader(options)
        self._target: dict[TopicPartition, int] | None = None
        self._latest_seen: dict[TopicPartition, int] | None = None

    def initialOffset(self) -> dict:
        partitions = self._offsets.partitions()
        start = self._offsets.resolve(self.options.starting, partitions, starting=True)
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._offsets.latest_now(max_age_s=0)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        latest = self._offsets.latest_now()
        self._latest_seen = latest
        if self._target is not None:
            latest = cap_offsets(latest, self._target)
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        return offsets_to_json(latest)

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest_seen is None else offsets_to_json(self._latest_seen)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, stop = offsets_from_json(start), offsets_from_json(end)
        if begin == stop:
            return []
        ranges, losses = plan_ranges(
            begin,
            stop,
            self._offsets.earliest(stop),
            fail_on_data_loss=self.options.fail_on_data_loss,
        )
        for loss in losses:
            log.warning("odradek data source: data loss, skipping: %s", loss)
        pieces = split_ranges(
            ranges,
            min_partitions=self.options.min_partitions,
            max_records=self.options.max_records_per_partition,
        )
        return [InputPartition(piece) for piece in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.value is None:  # PySpark's stand-in when there is nothing to read
            return iter(())
        return read_range(partition.value, self.options)

    def commit(self, end: dict) -> None:
        """Nothing to do: the checkpoint is the only record of progress; no group commits."""
