"""Executor-side reading: the records of one offset range as Arrow record batches.

Each range gets its own confluent-kafka Consumer, assigned at the exact start offset: no
subscription, no group membership, no offset commits. Reading stops at the end offset even
when offsets skip (compacted topics, transaction markers): a record at or past the end, or
the end of the partition at or past it, both finish the range.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from odradek.spark.offsets import DataLossError, OffsetRange, data_loss_message
from odradek.spark.options import SourceOptions
from odradek.spark.schema import source_arrow_schema

log = logging.getLogger("odradek.spark")

BATCH_ROWS = 8192
POLL_SLICE_S = 1.0
WATERMARK_TIMEOUT_S = 30.0

# librdkafka's timestamp types -> Kafka's TimestampType ids, as Spark reports them.
_TIMESTAMP_TYPES = {0: -1, 1: 0, 2: 1}


def consumer_config(options: SourceOptions) -> dict[str, object]:
    conf: dict[str, object] = dict(options.kafka_params)
    conf.setdefault("group.id", f"{options.group_id_prefix}-{uuid.uuid4().hex}")
    conf.setdefault("isolation.level", "read_uncommitted")
    conf.update(
        {
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "enable.partition.eof": True,
        }
    )
    return conf


def read_range(
    offset_range: OffsetRange, options: SourceOptions, batch_rows: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """Yield the records with offsets in [start, end) of one topic-partition."""
    r = offset_range
    consumer = Consumer(consumer_config(options))
    builder = _BatchBuilder(r.topic, r.partition, options.include_headers)
    try:
        position = r.start  # the next offset still wanted
        consumer.assign([KafkaTopicPartition(r.topic, r.partition, position)])
        idle_limit = options.poll_timeout_ms / 1000
        idle_since = time.monotonic()
        while position < r.end:
            messages = consumer.consume(min(batch_rows, r.end - position), POLL_SLICE_S)
            if not messages:
                if time.monotonic() - idle_since > idle_limit:
                    raise TimeoutError(
                        f"odradek data source: no record of {r.topic}-{r.partition} at offset "
                        f"{position} arrived within kafkaConsumer.pollTimeoutMs "
                        f"({options.poll_timeout_ms} ms); reading [{r.start}, {r.end})"
                    )
                continue
            idle_since = time.monotonic()
            for message in messages:
                error = message.error()
                if error is None:
                    offset = message.offset()
                    if offset >= r.end:
                        position = r.end
                        break
                    if offset >= position:
                        builder.add(message)
                        position = offset + 1
                    continue
                position = _after_error(consumer, error, message, position, r, options)
                if position >= r.end:
                    break
            if builder.rows >= batch_rows:
                yield builder.flush()
        if builder.rows:
            yield builder.flush()
    finally:
        consumer.close()


def _after_error(
    consumer: Consumer,
    error: KafkaError,
    message: Message,
    position: int,
    r: OffsetRange,
    options: SourceOptions,
) -> int:
    """The next offset to read after an error event, or r.end to stop."""
    code = error.code()
    tp = f"{r.topic}-{r.partition}"
    if code == KafkaError._PARTITION_EOF:
        log_end = message.offset()
        if log_end >= r.end:
            return r.end  # the rest of the range holds no records (markers, compaction)
        _data_loss(options, f"partition {tp} ends at offset {log_end}, before {r.end}")
        return r.end
    if code == KafkaError._AUTO_OFFSET_RESET:
        low, high = consumer.get_watermark_offsets(
            KafkaTopicPartition(r.topic, r.partition), timeout=WATERMARK_TIMEOUT_S, cached=False
        )
        if low > position:
            _data_loss(
                options,
                f"offsets {position}..{min(low, r.end) - 1} of partition {tp} were removed "
                f"(earliest available offset is {low})",
            )
            if low < r.end:
                consumer.assign([KafkaTopicPartition(r.topic, r.partition, low)])
            return low
        if position > high:
            _data_loss(options, f"offset {position} of partition {tp} is past its end ({high})")
            return r.end
        # In range again (the log moved under a leader change): fetch from where we were.
        consumer.assign([KafkaTopicPartition(r.topic, r.partition, position)])
        return position
    raise KafkaException(error)


def _data_loss(options: SourceOptions, what: str) -> None:
    message = data_loss_message([what])
    if options.fail_on_data_loss:
        raise DataLossError(message)
    log.warning(message)


class _BatchBuilder:
    """Collects the columns of consumed records and turns them into Arrow batches."""

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.schema = source_arrow_schema(include_headers)
        self._reset()

    def _reset(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[int] = []
        self.headers: list[list[dict] | None] = []

    @property
    def rows(self) -> int:
        return len(self.offsets)

    def add(self, message: Message) -> None:
        self.keys.append(message.key())
        self.values.append(message.value())
        self.offsets.append(message.offset())
        kind, millis = message.timestamp()
        self.timestamps.append(millis * 1000)
        self.timestamp_types.append(_TIMESTAMP_TYPES.get(kind, -1))
        if self.include_headers:
            headers = message.headers()
            self.headers.append([{"key": k, "value": v} for k, v in headers] if headers else None)

    def flush(self) -> pa.RecordBatch:
        n = self.rows
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array([self.topic] * n, pa.string()),
            pa.array([self.partition] * n, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps, pa.timestamp("us", tz="UTC")),
            pa.array(self.timestamp_types, pa.int32()),
        ]
        if self.include_headers:
            columns.append(pa.array(self.headers, self.schema.field("headers").type))
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        self._reset()
        return batch
