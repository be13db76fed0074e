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
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from odradek.spark.offsets import DataLossError, OffsetRange, data_loss_message
from odradek.spark.options import SourceOptions
from odradek.spark.schema import source_arrow_schema

log = logging.getLogger("odradek.spark")

BATCH_ROWS = 8192
POLL_SLICE_S = 1.0
WATERMARK_TIMEOUT_S = 30.0

_TIMESTAMP_US = pa.timestamp("us", tz="UTC")


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
            if _all_wanted(messages, position, r.end):
                builder.add_all(messages)  # the common case, column by column
                position = messages[-1].offset() + 1
            else:
                position = _add_one_by_one(consumer, messages, builder, position, r, options)
            if builder.rows >= batch_rows:
                yield builder.flush()
        if builder.rows:
            yield builder.flush()
    finally:
        consumer.close()


def _all_wanted(messages: list[Message], position: int, end: int) -> bool:
    """No error events, and every offset in [position, end) (they come in order)."""
    return (
        messages[0].offset() >= position
        and messages[-1].offset() < end
        and not any(map(Message.error, messages))
    )


def _add_one_by_one(
    consumer: Consumer,
    messages: list[Message],
    builder: _BatchBuilder,
    position: int,
    r: OffsetRange,
    options: SourceOptions,
) -> int:
    """Handle a consumed list holding error events or records outside the range; return
    the next offset wanted (r.end when the range is done)."""
    for message in messages:
        error = message.error()
        if error is None:
            offset = message.offset()
            if offset >= r.end:
                return r.end
            if offset >= position:
                builder.add_all([message])
                position = offset + 1
            continue
        position = _after_error(consumer, error, message, position, r, options)
        if position >= r.end:
            return r.end
    return position


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
        self.timestamps: list[tuple[int, int]] = []  # (librdkafka type, milliseconds)
        self.headers: list[list[dict] | None] = []

    @property
    def rows(self) -> int:
        return len(self.offsets)

    def add_all(self, messages: list[Message]) -> None:
        # map over the C methods: the per-record cost of a read is mostly these five calls
        self.keys.extend(map(Message.key, messages))
        self.values.extend(map(Message.value, messages))
        self.offsets.extend(map(Message.offset, messages))
        self.timestamps.extend(map(Message.timestamp, messages))
        if self.include_headers:
            self.headers.extend(map(_headers, map(Message.headers, messages)))

    def flush(self) -> pa.RecordBatch:
        n = self.rows
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array([self.topic] * n, pa.string()),
            pa.array([self.partition] * n, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            *_timestamp_columns(self.timestamps),
        ]
        if self.include_headers:
            columns.append(pa.array(self.headers, self.schema.field("headers").type))
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        self._reset()
        return batch


def _headers(headers: list[tuple[str, bytes | None]] | None) -> list[dict] | None:
    # Spark's Kafka source gives null, not an empty array, for a record without headers.
    return [{"key": k, "value": v} for k, v in headers] if headers else None


def _timestamp_columns(stamps: list[tuple[int, int]]) -> tuple[pa.Array, pa.Array]:
    """The timestamp (UTC microseconds) and timestampType columns. librdkafka numbers the
    types 0 (none), 1 (create time), 2 (log append time); Kafka and Spark use one less."""
    if not stamps:
        return pa.array([], _TIMESTAMP_US), pa.array([], pa.int32())
    kinds, millis = zip(*stamps, strict=True)
    micros = pc.multiply(pa.array(millis, pa.int64()), 1000).cast(_TIMESTAMP_US)
    types = pc.subtract(pa.array(kinds, pa.int32()), 1)
    return micros, types
