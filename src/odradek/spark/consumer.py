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
from itertools import chain

import numpy as np
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
FETCH_QUEUE_BACKOFF_MS = 1
QUEUED_MIN_MESSAGES = 100_000  # librdkafka's default

_TIMESTAMP_US = pa.timestamp("us", tz="UTC")


def consumer_config(options: SourceOptions, range_size: int | None = None) -> dict[str, object]:
    conf: dict[str, object] = dict(options.kafka_params)
    conf.setdefault("group.id", f"{options.group_id_prefix}-{uuid.uuid4().hex}")
    conf.setdefault("isolation.level", "read_uncommitted")
    # librdkafka stops fetching a partition once queued.min.messages records wait in its
    # queue and only looks again after fetch.queue.backoff.ms (1 s by default): a reader
    # that drains the queue quickly then sits idle most of the time (a 1M-record read ran
    # 3-4x slower). Look again after 1 ms, and prefetch no more than the range needs.
    conf.setdefault("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS)
    if range_size is not None:
        conf.setdefault("queued.min.messages", max(1, min(QUEUED_MIN_MESSAGES, range_size)))
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
    consumer = Consumer(consumer_config(options, r.size))
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
        # Offsets as runs of consecutive offsets (first, count): a consumed list without gaps
        # (the common case) is one run, so no per-record offset() call is needed.
        self.offset_runs: list[tuple[int, int]] = []
        self.stamps: list[int] = []  # flat (librdkafka type, milliseconds) pairs
        self.headers: list[list[dict] | None] = []
        self.rows = 0

    def add_all(self, messages: list[Message]) -> None:
        # map over the C methods: per record, a read costs these calls and little else
        n = len(messages)
        self.keys.extend(map(Message.key, messages))
        self.values.extend(map(Message.value, messages))
        first = messages[0].offset()
        if messages[-1].offset() - first == n - 1:  # increasing offsets, so no gap
            self.offset_runs.append((first, n))
        else:
            self.offset_runs.extend((o, 1) for o in map(Message.offset, messages))
        self.stamps.extend(chain.from_iterable(map(Message.timestamp, messages)))
        if self.include_headers:
            self.headers.extend(map(_headers, map(Message.headers, messages)))
        self.rows += n

    def flush(self) -> pa.RecordBatch:
        n = self.rows
        offsets = np.concatenate(
            [np.arange(first, first + count, dtype=np.int64) for first, count in self.offset_runs]
        )
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array(offsets, pa.int64()),
            *_timestamp_columns(self.stamps),
        ]
        if self.include_headers:
            columns.append(pa.array(self.headers, self.schema.field("headers").type))
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        self._reset()
        return batch


def _headers(headers: list[tuple[str, bytes | None]] | None) -> list[dict] | None:
    # Spark's Kafka source gives null, not an empty array, for a record without headers.
    return [{"key": k, "value": v} for k, v in headers] if headers else None


def _timestamp_columns(stamps: list[int]) -> tuple[pa.Array, pa.Array]:
    """The timestamp (UTC microseconds) and timestampType columns from flat (type, ms)
    pairs. librdkafka numbers the types 0 (none), 1 (create time), 2 (log append time);
    Kafka and Spark use one less."""
    pairs = np.array(stamps, dtype=np.int64).reshape(-1, 2)
    micros = pa.array(pairs[:, 1] * 1000, _TIMESTAMP_US)
    types = pa.array((pairs[:, 0] - 1).astype(np.int32), pa.int32())
    return micros, types
