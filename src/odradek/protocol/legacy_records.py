"""Message sets of magic 0 and 1 (Kafka's ``LegacyRecord``), as Produce v0-v2 clients send
them, up-converted to one v2 record batch.

Kafka 2.8 brokers store every topic in message format v2 and convert what older producers
send (``LogValidator.convertAndAssignOffsetsNonCompressed`` and its compressed twin): the
records keep their keys, values and timestamps (magic 0 has none: ``NO_TIMESTAMP``), get no
producer id, and are compressed with the codec they came in.  The broker then appends the
batch as any other.  Only Produce v0-v2 requests take this path; clients that speak Produce
v3 and up send v2 batches, which stay bytes.

A message: offset (int64), size (int32), CRC-32 (of the rest), magic, attributes (codec in
bits 0-2; magic 1: timestamp type in bit 3), magic 1 only: timestamp (int64), key and value
(int32 length, -1 for null).  A compressed message's value is a whole message set.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from odradek.protocol.errors import CorruptMessageError
from odradek.protocol.records import (
    NO_TIMESTAMP,
    CompressionType,
    SimpleRecord,
    build_batch,
    decompress,
)

__all__ = ["LegacyRecord", "is_legacy_message_set", "read_message_set", "up_convert"]

_ENTRY = struct.Struct(">qi")  # offset, message size
_MESSAGE = struct.Struct(">Ibb")  # crc, magic, attributes
_TIMESTAMP = struct.Struct(">q")
_LENGTH = struct.Struct(">i")
_MAGIC_AT = 16  # after offset, size and crc, in legacy messages and v2 batches alike
_CODEC_MASK = 0x07
_LOG_APPEND_TIME_BIT = 0x08
# The codecs a legacy message can carry (zstd came with magic 2).
_CODECS = {0: CompressionType.NONE, 1: CompressionType.GZIP, 2: CompressionType.SNAPPY, 3: CompressionType.LZ4}


@dataclass(frozen=True, slots=True)
class LegacyRecord:
    magic: int
    timestamp: int  # NO_TIMESTAMP for magic 0
    key: bytes | None
    value: bytes | None


def is_legacy_message_set(records: bytes | bytearray | memoryview) -> bool:
    """Whether ``records`` starts with a message of magic 0 or 1 (else: a v2 batch)."""
    return len(records) > _MAGIC_AT and records[_MAGIC_AT] < 2


def read_message_set(data: bytes | bytearray | memoryview, *, nested: bool = False
                     ) -> tuple[CompressionType, list[LegacyRecord]]:
    """The records of a message set, compressed messages opened, and the codec they came in
    (that of the first compressed message; NONE without one).  CorruptMessageError for a bad
    CRC, a truncated message, an unknown magic or codec, or compression nested twice."""
    buf = bytes(data)
    records: list[LegacyRecord] = []
    codec = CompressionType.NONE
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < _ENTRY.size:
            raise CorruptMessageError("truncated message in a message set")
        _offset, size = _ENTRY.unpack_from(buf, pos)
        start, pos = pos + _ENTRY.size, pos + _ENTRY.size + size
        if size < _MESSAGE.size or pos > end:
            raise CorruptMessageError(f"message of size {size} does not fit its message set")
        crc, magic, attributes = _MESSAGE.unpack_from(buf, start)
        if zlib.crc32(buf[start + 4:pos]) != crc:
            raise CorruptMessageError("message is corrupt (CRC-32 mismatch)")
        if magic not in (0, 1):
            raise CorruptMessageError(f"unknown magic {magic} in a message set")
        at = start + _MESSAGE.size
        timestamp = NO_TIMESTAMP
        if magic == 1:
            if pos - at < _TIMESTAMP.size:
                raise CorruptMessageError("truncated message timestamp")
            (timestamp,) = _TIMESTAMP.unpack_from(buf, at)
            at += _TIMESTAMP.size
        key, at = _nullable_bytes(buf, at, pos)
        value, at = _nullable_bytes(buf, at, pos)
        message_codec = _CODECS.get(attributes & _CODEC_MASK)
        if message_codec is None:
            raise CorruptMessageError(f"unknown compression codec {attributes & _CODEC_MASK}")
        if message_codec is CompressionType.NONE:
            records.append(LegacyRecord(magic, timestamp, key, value))
            continue
        if nested:
            raise CorruptMessageError("compressed message nested in a compressed message")
        if codec is CompressionType.NONE:
            codec = message_codec
        _, inner = read_message_set(decompress(message_codec, value or b""), nested=True)
        if magic == 1 and attributes & _LOG_APPEND_TIME_BIT:
            # The wrapper's timestamp is every inner message's (LogAppendTime).
            inner = [LegacyRecord(r.magic, timestamp, r.key, r.value) for r in inner]
        records.extend(inner)
    return codec, records


def _nullable_bytes(buf: bytes, at: int, end: int) -> tuple[bytes | None, int]:
    if end - at < _LENGTH.size:
        raise CorruptMessageError("truncated message key or value")
    (length,) = _LENGTH.unpack_from(buf, at)
    at += _LENGTH.size
    if length < 0:
        return None, at
    if at + length > end:
        raise CorruptMessageError("message key or value longer than its message")
    return buf[at:at + length], at + length


def up_convert(data: bytes | bytearray | memoryview) -> bytes:
    """One v2 batch holding the records of a magic 0/1 message set, compressed as they came
    (CorruptMessageError for what :func:`read_message_set` refuses, or an empty set)."""
    codec, records = read_message_set(data)
    if not records:
        raise CorruptMessageError("empty message set")
    return build_batch([SimpleRecord(r.value, r.key, timestamp=r.timestamp) for r in records],
                       timestamp=NO_TIMESTAMP, compression=codec)
