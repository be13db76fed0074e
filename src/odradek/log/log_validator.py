"""Kafka's ``LogValidator`` for magic 2, header-only: check produced batches, then give
them offsets by rewriting fields in place.

Checks per batch, with Kafka's error codes: size against ``max.message.bytes``
(MESSAGE_TOO_LARGE), CRC-32C (CORRUPT_MESSAGE), record count against the offset delta, no
control batches and a sequence for every idempotent batch from clients (INVALID_RECORD; the
coordinators' appends skip both), and
for CreateTime topics ``message.timestamp.difference.max.ms`` against the batch's first
and max timestamps (INVALID_TIMESTAMP; Kafka checks every record, odradek the two the
header carries, then reads the records of a batch that fails to name each offending one, as
Kafka's record_errors do). The whole request must fit a segment (RECORD_LIST_TOO_LARGE).

A compacted topic (cleanup.policy holds ``compact``) takes only records with a key: the
cleaner keeps the latest record per key, so a keyless one has no meaning there.  As Kafka's
LogValidator.validateKey, every keyless record of a batch is reported by its index in the
batch (ProduceResponse v8+ record_errors) and the whole produce to the partition fails with
INVALID_RECORD; this is the one check that reads records, decompressing the batch if needed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from odradek.config import LogConfig
from odradek.log.segment import BatchInfo
from odradek.protocol.errors import (
    CorruptMessageError,
    InvalidRecordError,
    MessageTooLargeError,
    RecordListTooLargeError,
    for_code,
)
from odradek.protocol.records import (
    HEADER_SIZE,
    NO_TIMESTAMP,
    RecordBatchHeader,
    check_crc,
    decompress,
    iter_batches,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from odradek.protocol.varint import VarintError, read_varlong

InvalidTimestampError = for_code(ErrorCode.invalid_timestamp)

Batches = list[tuple[int, RecordBatchHeader]]


class RecordValidationError(InvalidRecordError):
    """Kafka's RecordValidationException: some records of a batch broke a rule; each is
    named by its index in the batch with a message (ProduceResponse ``record_errors``)."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class TimestampValidationError(InvalidTimestampError):
    """RecordValidationException around an InvalidTimestampException: INVALID_TIMESTAMP, with
    the offending records by index in the batch."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.record_errors = record_errors


@dataclass(slots=True)
class AssignedOffsets:
    infos: list[BatchInfo]
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    num_records: int


def validate_produced(buf: bytes | bytearray | memoryview, config: LogConfig, now_ms: int,
                      topic_partition: str = "", *, from_client: bool = True) -> Batches:
    """``(position, header)`` of every batch in a produce request, all checks passed.
    ``topic_partition`` (``<topic>-<partition>``) names the log in error messages;
    ``from_client=False`` for a coordinator's append (Kafka's ``AppendOrigin.Coordinator``)."""
    if len(buf) > config.segment_bytes:
        raise RecordListTooLargeError(f"record set of {len(buf)} bytes exceeds the segment "
                                      f"size {config.segment_bytes}")
    check_time = config.message_timestamp_type == "CreateTime"
    max_diff = config.message_timestamp_difference_max_ms
    compact = config.compact
    batches = []
    for pos, header in iter_batches(buf):
        if header.size > config.max_message_bytes:
            raise MessageTooLargeError(f"record batch of {header.size} bytes exceeds "
                                       f"max.message.bytes {config.max_message_bytes}")
        check_crc(buf, pos, header)
        if header.records_count <= 0 or header.records_count != header.last_offset_delta + 1:
            raise InvalidRecordError(f"record batch count {header.records_count} does not "
                                     f"match its offset delta {header.last_offset_delta}")
        if from_client:
            if header.is_control:
                raise InvalidRecordError("Clients are not allowed to write control records")
            if header.has_producer_id and header.base_sequence < 0:
                raise InvalidRecordError("idempotent record batch without a sequence number")
        if check_time and any(ts != NO_TIMESTAMP and abs(ts - now_ms) > max_diff
                              for ts in (header.base_timestamp, header.max_timestamp)):
            raise TimestampValidationError(
                "One or more records have been rejected due to invalid timestamp",
                _timestamp_errors(buf, pos, header, now_ms, max_diff))
        if compact:
            keyless = keyless_records(buf, pos, header)
            if keyless:
                message = ("Compacted topic cannot accept message without key in topic partition "
                           f"{topic_partition}.")
                raise RecordValidationError("One or more records have been rejected",
                                            [(index, message) for index in keyless])
        batches.append((pos, header))
    if not batches:
        raise InvalidRecordError("produce request contains no record batch")
    return batches


def assign_offsets(buf: bytearray | memoryview, batches: Batches, first_offset: int, leader_epoch: int,
                   log_append_time: int | None,
                   on_batch: Callable[[int, RecordBatchHeader, int, int, int], None]) -> AssignedOffsets:
    """Rewrite base offset and partition leader epoch of each batch (both outside the CRC);
    with ``log_append_time`` also stamp maxTimestamp and recompute the CRC. ``on_batch``
    sees ``(position, header, first offset, last offset, effective max timestamp)``."""
    infos: list[BatchInfo] = []
    offset = first_offset
    max_ts, offset_of_max = NO_TIMESTAMP, first_offset
    num_records = 0
    for pos, header in batches:
        last = offset + header.last_offset_delta
        set_base_offset(buf, pos, offset)
        set_partition_leader_epoch(buf, pos, leader_epoch)
        ts = header.max_timestamp
        if log_append_time is not None:
            set_log_append_time(buf, pos, header, log_append_time)
            ts = log_append_time
        on_batch(pos, header, offset, last, ts)
        if ts > max_ts:
            max_ts, offset_of_max = ts, last
        infos.append((pos, header.size, last, ts))
        num_records += header.records_count
        offset = last + 1
    return AssignedOffsets(infos, first_offset, offset - 1, max_ts, offset_of_max, num_records)


def keyless_records(buf: bytes | bytearray | memoryview, pos: int, header: RecordBatchHeader) -> list[int]:
    """The indexes (in the batch) of its records without a key."""
    return [index for index, (_, key_length) in enumerate(_record_fields(buf, pos, header)) if key_length < 0]


def _timestamp_errors(buf: bytes | bytearray | memoryview, pos: int, header: RecordBatchHeader, now_ms: int,
                      max_diff: int) -> list[tuple[int, str]]:
    """Each record of a batch whose timestamp is too far from now, by index (Kafka's
    record_errors), or the batch's first record when only its header is out of range."""
    errors = []
    for index, (delta, _) in enumerate(_record_fields(buf, pos, header)):
        ts = header.base_timestamp + delta
        if abs(ts - now_ms) > max_diff:
            errors.append((index, f"Timestamp {ts} of message with offset {header.base_offset + index} is out of "
                                  f"range. The timestamp should be within [{now_ms - max_diff}, {now_ms + max_diff}]"))
    return errors or [(0, f"record batch timestamps {header.base_timestamp}..{header.max_timestamp} are out of "
                          f"range (now {now_ms}, allowed difference {max_diff} ms)")]


def _record_fields(buf: bytes | bytearray | memoryview, pos: int, header: RecordBatchHeader) -> list[tuple[int, int]]:
    """(timestamp delta, key length; -1 for none) of each record of a batch.  Reads each record
    only up to its key length; a compressed batch is decompressed first (CORRUPT_MESSAGE if it
    cannot be, or if a record runs past the batch)."""
    payload = decompress(header.compression, memoryview(buf)[pos + HEADER_SIZE:pos + header.size])
    fields = []
    size = len(payload)
    at = 0
    try:
        for _ in range(header.records_count):
            length, at = read_varlong(payload, at, size)
            end = at + length
            if length < 0 or end > size:
                raise CorruptMessageError("record length runs past the end of the batch")
            timestamp_delta, field_at = read_varlong(payload, at + 1, end)  # after the attributes byte
            _offset_delta, field_at = read_varlong(payload, field_at, end)
            key_length, _ = read_varlong(payload, field_at, end)
            fields.append((timestamp_delta, key_length))
            at = end
    except VarintError as e:
        raise CorruptMessageError(f"malformed record in batch: {e}") from None
    return fields
