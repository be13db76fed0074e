"""ProduceRequest (v0-v9) read by hand: record batches come back as views into the frame.

The generic decoder copies every partition's records into a new ``bytes``; a large produce
request read into its own buffer (see the socket server) is instead appended straight from
that buffer, with its offsets rewritten in place.  Every length is bounds-checked: a request
that lies about its sizes is malformed, never a crash or an over-read.  Versions 0-2 (no
transactional id) carry magic 0/1 message sets, which the handler up-converts
(``protocol.legacy_records``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.protocol.body_reader import BodyReader
from odradek.protocol.errors import CorruptMessageError, InvalidRecordError
from odradek.protocol.framing import MalformedRequestError
from odradek.protocol.records import ATTRIBUTES_OFFSET, MAGIC, MAGIC_OFFSET, TRANSACTIONAL_MASK

__all__ = ["ProduceRequestView", "has_transactional_records", "parse_produce_request", "validate_records"]

# The transactional flag lies in the low byte of the big-endian int16 attributes.
_ATTRIBUTES_LOW_BYTE = ATTRIBUTES_OFFSET + 1
# What Kafka's batch iterator needs to see a batch: the length prefix (offset + length, 12
# bytes) and the magic byte (17 bytes in); a length below the smallest legacy record is corrupt.
_LOG_OVERHEAD = 12
_HEADER_SIZE_UP_TO_MAGIC = 17
_MIN_RECORD_SIZE = 14
_LENGTH = struct.Struct(">i")


@dataclass(slots=True)
class ProduceRequestView:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    # (topic, partition, records) in request order; records None when the client sent null
    partitions: list[tuple[str, int, memoryview | None]]


def parse_produce_request(frame: bytes | bytearray | memoryview, offset: int, version: int) -> ProduceRequestView:
    """Parse the body of a Produce request that starts at ``offset`` of ``frame``."""
    if not 0 <= version <= 9:
        raise MalformedRequestError(f"produce request version {version} is not supported here")
    flexible = version >= 9
    view = memoryview(frame)
    r = BodyReader(view, offset, len(view), flexible, "produce request")
    transactional_id = r.string(nullable=True) if version >= 3 else None
    acks = r.int16()
    timeout_ms = r.int32()
    partitions: list[tuple[str, int, memoryview | None]] = []
    for _ in range(r.count()):
        topic = r.string()
        assert topic is not None
        for _ in range(r.count()):
            index = r.int32()
            partitions.append((topic, index, r.nullable_bytes()))
            if flexible:
                r.skip_tagged_fields()
        if flexible:
            r.skip_tagged_fields()
    if flexible:
        r.skip_tagged_fields()
    return ProduceRequestView(transactional_id, acks, timeout_ms, partitions)


def has_transactional_records(partitions: list[tuple[str, int, memoryview | None]]) -> bool:
    """Whether the first batch of some partition is a transactional v2 batch (Kafka's
    RequestUtils.hasTransactionalRecords; a v3+ request carries one batch per partition).
    Reads two bytes per partition: the Produce fast path can afford it."""
    for _, _, records in partitions:
        if (records is not None and len(records) > _ATTRIBUTES_LOW_BYTE and records[MAGIC_OFFSET] == MAGIC
                and records[_ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_MASK):
            return True
    return False


def validate_records(records: bytes | bytearray | memoryview | None) -> int:
    """Kafka's ProduceRequest.validateRecords for v3+: a partition's records hold exactly one
    whole batch of magic 2 (INVALID_RECORD otherwise; CORRUPT_MESSAGE for a length below any
    record's).  Returns where that batch ends: bytes after it too few to make a second batch
    are ignored, as Kafka's batch iterator ignores them.  Reads a few header bytes only."""
    end = _batch_end(records, 0)
    if end is None:
        raise InvalidRecordError("Produce requests with version 3 and up must have at least one record batch "
                                 "per partition")
    assert records is not None
    if records[MAGIC_OFFSET] != MAGIC:
        raise InvalidRecordError("Produce requests with version 3 and up are only allowed to contain record "
                                 "batches with magic version 2")
    if _batch_end(records, end) is not None:
        raise InvalidRecordError("Produce requests with version 3 and up are only allowed to contain exactly one "
                                 "record batch per partition")
    return end


def _batch_end(records: bytes | bytearray | memoryview | None, pos: int) -> int | None:
    """The end of the whole batch at ``pos``, or None when too few bytes remain for one."""
    if records is None or len(records) - pos < _LOG_OVERHEAD:
        return None
    (size,) = _LENGTH.unpack_from(records, pos + 8)
    if size < _MIN_RECORD_SIZE:
        raise CorruptMessageError(f"Record size {size} is less than the minimum record overhead ({_MIN_RECORD_SIZE})")
    end = pos + _LOG_OVERHEAD + size
    if len(records) - pos < _HEADER_SIZE_UP_TO_MAGIC or len(records) < end:
        return None
    return end
