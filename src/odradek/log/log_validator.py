"""Kafka's ``LogValidator`` for magic 2, header-only: check produced batches, then give
them offsets by rewriting fields in place.

Checks per batch, with Kafka's error codes: size against ``max.message.bytes``
(MESSAGE_TOO_LARGE), CRC-32C (CORRUPT_MESSAGE), record count against the offset delta, no
control batches from clients, a sequence for every idempotent batch (INVALID_RECORD), and
for CreateTime topics ``message.timestamp.difference.max.ms`` against the batch's first
and max timestamps (INVALID_TIMESTAMP; Kafka checks every record, odradek the two the
header carries). The whole request must fit a segment (RECORD_LIST_TOO_LARGE).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from odradek.config import LogConfig
from odradek.log.segment import BatchInfo
from odradek.protocol.errors import (
    InvalidRecordError,
    MessageTooLargeError,
    RecordListTooLargeError,
    for_code,
)
from odradek.protocol.records import (
    NO_TIMESTAMP,
    RecordBatchHeader,
    check_crc,
    iter_batches,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)

InvalidTimestampError = for_code(ErrorCode.invalid_timestamp)

Batches = list[tuple[int, RecordBatchHeader]]


@dataclass(slots=True)
class AssignedOffsets:
    infos: list[BatchInfo]
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    num_records: int


def validate_produced(buf: bytes | bytearray | memoryview, config: LogConfig, now_ms: int
                      ) -> Batches:
    """``(position, header)`` of every batch in a produce request, all checks passed."""
    if len(buf) > config.segment_bytes:
        raise RecordListTooLargeError(f"record set of {len(buf)} bytes exceeds the segment "
                                      f"size {config.segment_bytes}")
    check_time = config.message_timestamp_type == "CreateTime"
    max_diff = config.message_timestamp_difference_max_ms
    batches = []
    for pos, header in iter_batches(buf):
        if header.size > config.max_message_bytes:
            raise MessageTooLargeError(f"record batch of {header.size} bytes exceeds "
                                       f"max.message.bytes {config.max_message_bytes}")
        check_crc(buf, pos, header)
        if header.records_count <= 0 or header.records_count != header.last_offset_delta + 1:
            raise InvalidRecordError(f"record batch count {header.records_count} does not "
                                     f"match its offset delta {header.last_offset_delta}")
        if header.is_control:
            raise InvalidRecordError("clients are not allowed to write control records")
        if header.has_producer_id and header.base_sequence < 0:
            raise InvalidRecordError("idempotent record batch without a sequence number")
        if check_time:
            for ts in (header.base_timestamp, header.max_timestamp):
                if ts != NO_TIMESTAMP and abs(ts - now_ms) > max_diff:
                    raise InvalidTimestampError(f"timestamp {ts} is out of range (now {now_ms}, "
                                                f"allowed difference {max_diff} ms)")
        batches.append((pos, header))
    if not batches:
        raise InvalidRecordError("produce request contains no record batch")
    return batches


def assign_offsets(buf: bytearray | memoryview, batches: Batches, first_offset: int, leader_epoch: int,
                   log_append_time: int | None,
                   on_batch: Callable[[RecordBatchHeader, int, int, int], None]) -> AssignedOffsets:
    """Rewrite base offset and partition leader epoch of each batch (both outside the CRC);
    with ``log_append_time`` also stamp maxTimestamp and recompute the CRC. ``on_batch``
    sees ``(header, first offset, last offset, effective max timestamp)``."""
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
        on_batch(header, offset, last, ts)
        if ts > max_ts:
            max_ts, offset_of_max = ts, last
        infos.append((pos, header.size, last, ts))
        num_records += header.records_count
        offset = last + 1
    return AssignedOffsets(infos, first_offset, offset - 1, max_ts, offset_of_max, num_records)
