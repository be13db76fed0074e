"""Magic 0/1 message sets (Produce v0-v2) read and up-converted to one v2 batch, and the v0-v2
ProduceRequest and ProduceResponse layouts (kio has no schema for them: Kafka 4 dropped them).
Messages are written here by a small encoder of the documented format."""

from __future__ import annotations

import gzip
import struct
import zlib

import pytest

from odradek.protocol.errors import CorruptMessageError
from odradek.protocol.framing import decode_request_header
from odradek.protocol.legacy_records import is_legacy_message_set, read_message_set, up_convert
from odradek.protocol.produce_request import parse_produce_request
from odradek.protocol.produce_response import ProducedPartition, encode_produce_response
from odradek.protocol.records import NO_TIMESTAMP, CompressionType, decode_batch, parse_header


def message(value: bytes | None, key: bytes | None = None, *, magic: int = 1, timestamp: int = 1000,
            codec: int = 0, log_append_time: bool = False, offset: int = 0) -> bytes:
    """One message of a message set (offset, size, crc, magic, attributes, [timestamp], key, value)."""
    attributes = codec | (0x08 if log_append_time else 0)
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    body = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(body)) + body


def test_magic_0_messages_become_one_batch_without_timestamps() -> None:
    data = message(b"a", b"k1", magic=0) + message(None, b"k2", magic=0) + message(b"c", magic=0)
    assert is_legacy_message_set(data)
    batch = up_convert(data)
    header, records = decode_batch(batch)
    assert (header.magic, header.records_count, header.producer_id, header.compression) == (
        2, 3, -1, CompressionType.NONE)
    assert header.base_timestamp == header.max_timestamp == NO_TIMESTAMP
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        (b"k1", b"a", NO_TIMESTAMP), (b"k2", None, NO_TIMESTAMP), (None, b"c", NO_TIMESTAMP)]
    assert not is_legacy_message_set(batch)


def test_a_gzip_wrapper_is_opened_and_the_batch_keeps_its_codec() -> None:
    inner = message(b"x", timestamp=5000, offset=0) + message(b"y", timestamp=7000, offset=1)
    data = message(gzip.compress(inner), codec=1, timestamp=7000, offset=1)
    codec, records = read_message_set(data)
    assert codec is CompressionType.GZIP and [(r.value, r.timestamp) for r in records] == [(b"x", 5000), (b"y", 7000)]
    header, decoded = decode_batch(up_convert(data))
    assert header.compression is CompressionType.GZIP and (header.base_timestamp, header.max_timestamp) == (5000, 7000)
    assert [r.value for r in decoded] == [b"x", b"y"]


def test_a_log_append_time_wrapper_gives_its_timestamp_to_every_inner_message() -> None:
    inner = message(b"x", timestamp=1) + message(b"y", timestamp=2)
    _, records = read_message_set(message(gzip.compress(inner), codec=1, timestamp=99, log_append_time=True))
    assert [r.timestamp for r in records] == [99, 99]


@pytest.mark.parametrize("data, reason", [
    (message(b"a")[:-1], "does not fit"),
    (message(b"a")[:8], "truncated"),
    (message(b"a")[:20] + b"\xff" + message(b"a")[21:], "CRC"),
    (message(gzip.compress(message(gzip.compress(message(b"a")), codec=1)), codec=1), "nested"),
    (message(b"a", codec=5), "codec 5"),
    (message(b"not gzip", codec=1), "decompress"),
    (b"", "empty"),
])
def test_what_is_refused(data: bytes, reason: str) -> None:
    with pytest.raises(CorruptMessageError, match=reason):
        up_convert(data)


def _produce_v2(records: bytes) -> bytes:
    """A Produce v2 request frame: header v1, acks -1, timeout 1000, topic t partition 3."""
    header = struct.pack(">hhi", 0, 2, 42) + struct.pack(">h", 1) + b"c"
    body = struct.pack(">hi", -1, 1000) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
    body += struct.pack(">i", 1) + struct.pack(">i", 3) + struct.pack(">i", len(records)) + records
    return header + body


def test_produce_v2_request_has_no_transactional_id() -> None:
    frame = _produce_v2(message(b"a"))
    header, offset = decode_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (0, 2, 42, "c")
    parsed = parse_produce_request(frame, offset, 2)
    assert (parsed.transactional_id, parsed.acks, parsed.timeout_ms) == (None, -1, 1000)
    assert [(t, p, bytes(r or b"")) for t, p, r in parsed.partitions] == [("t", 3, message(b"a"))]


@pytest.mark.parametrize("version, partition_tail, throttle", [
    (0, b"", b""),  # no log append time, no throttle time
    (1, b"", struct.pack(">i", 9)),  # throttle time at the end
    (2, struct.pack(">q", 1234), struct.pack(">i", 9)),  # and a log append time per partition
])
def test_produce_v0_to_v2_responses(version: int, partition_tail: bytes, throttle: bytes) -> None:
    frame = encode_produce_response(5, version, [("t", [ProducedPartition(3, 0, 77, 1234)])], throttle_time_ms=9)
    expected = (struct.pack(">i", 5) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 1)
                + struct.pack(">ihq", 3, 0, 77) + partition_tail + throttle)
    assert frame == struct.pack(">i", len(expected)) + expected


def test_v2_batch_header_of_a_converted_set_is_valid() -> None:
    batch = up_convert(message(b"a", magic=1, timestamp=1234))
    header = parse_header(batch)
    assert (header.base_offset, header.last_offset_delta, header.max_timestamp) == (0, 0, 1234)
