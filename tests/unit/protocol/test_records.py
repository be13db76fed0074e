"""Record batch v2: header codec, CRC, in-place rewrites, record decoding, builder.

The golden vectors are record batches produced by librdkafka (confluent-kafka 2.16.1,
idempotent producer, linger 50 ms) with each compression codec, captured from the
broker side with a raw Fetch against librdkafka's mock cluster: 3 records with keys
``key-<i>``, values ``value-<i>`` x3, headers ``h=x<i>`` and ``n=null``, timestamps
1700000000000 + i.
"""

from __future__ import annotations

import struct

import crc32c
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record import default_records as kafka_records

from odradek.protocol.errors import CorruptMessageError, InvalidRecordError
from odradek.protocol.records import (
    HEADER_SIZE,
    CompressionType,
    Record,
    SimpleRecord,
    TimestampType,
    build_batch,
    check_crc,
    decode_batch,
    iter_batches,
    parse_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)

LIBRDKAFKA_BATCHES = {
    "none": (
        "0000000000000000000000ac0000000002ad54fdc00000000000020000018bcfe568000000018bcfe5680200"
        "00000002a663f800000000000000000003500000000a6b65792d302a76616c75652d3076616c75652d307661"
        "6c75652d30040268047830026e01500002020a6b65792d312a76616c75652d3176616c75652d3176616c7565"
        "2d31040268047831026e01500004040a6b65792d322a76616c75652d3276616c75652d3276616c75652d3204"
        "0268047832026e01"
    ),
    "gzip": (
        "0000000000000000000000810000000002bedb9ce30001000000020000018bcfe568000000018bcfe5680200"
        "00000002f4a720000000000000000000031f8b08000000000000030b606060e0ca4eadd435d02a4bcc294dd5"
        "3540a5589832582a0c98f21803189898c00a0da10a0d5129b04243b0421616b04223a84223540aacd008a810"
        "0049cff4637b000000"
    ),
    "snappy": (
        "0000000000000000000000810000000002aa2e517f0002000000020000018bcfe568000000018bcfe5680200"
        "00000025f986f0000000000000000000037b44500000000a6b65792d302a76616c75652d3036070030040268"
        "047830026e0150000202052900310d29003109291107052900310529040404052900320d2900320929110720"
        "040268047832026e01"
    ),
    "lz4": (
        "00000000000000000000009200000000026bffbfec0003000000020000018bcfe568000000018bcfe5680200"
        "00000002964ec80000000000000000000304224d1860408252000000fa03500000000a6b65792d302a76616c"
        "75652d300700d1040268047830026e0150000202290013312900123129000407000129001131290021040429"
        "00133229001232290004070090040268047832026e0100000000"
    ),
    "zstd": (
        "00000000000000000000007f0000000002133517060004000000020000018bcfe568000000018bcfe5680200"
        "00000008a0e4900000000000000000000328b52ffd00582d0200a402500000000a6b65792d302a76616c7565"
        "2d30040268047830026e01500002023131310404323232026e010c0040002000c68164a03520022e0002601c"
        "4896a9f6935cc2"
    ),
}

EXPECTED = [
    Record(i, 1_700_000_000_000 + i, b"key-%d" % i, b"value-%d" % i * 3,
           (("h", b"x%d" % i), ("n", None)))
    for i in range(3)
]


def golden(codec: str) -> bytes:
    return bytes.fromhex("".join(LIBRDKAFKA_BATCHES[codec]))


def test_golden_uncompressed_header_by_hand() -> None:
    raw = golden("none")
    # Fields read straight from the bytes, independent of parse_header.
    base_offset, length, ple, magic, crc = struct.unpack_from(">qiibI", raw)
    assert (base_offset, magic) == (0, 2)
    assert length + 12 == len(raw) == 184
    assert crc == crc32c.crc32c(raw[21:])
    attributes, last_delta, base_ts, max_ts, pid, epoch, seq, count = struct.unpack_from(
        ">hiqqqhii", raw, 21)
    header = parse_header(raw)
    assert (header.attributes, header.last_offset_delta, header.base_timestamp,
            header.max_timestamp) == (attributes, last_delta, base_ts, max_ts) == (
        0, 2, 1_700_000_000_000, 1_700_000_000_002)
    assert (header.producer_id, header.producer_epoch, header.base_sequence,
            header.records_count) == (pid, epoch, seq, count)
    assert header.has_producer_id and header.base_sequence == 0 and header.last_sequence == 2
    assert header.partition_leader_epoch == ple
    assert header.compression is CompressionType.NONE
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert not header.is_transactional and not header.is_control
    assert header.size == len(raw) and header.next_offset == 3


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_golden_batches_decode(codec: str) -> None:
    raw = golden(codec)
    [(pos, header)] = list(iter_batches(raw))
    assert pos == 0 and header.compression.name.lower() == codec
    check_crc(raw, 0, header)
    decoded_header, records = decode_batch(raw)
    assert decoded_header == header
    assert records == EXPECTED


def test_builder_round_trip_and_kafka_python_agrees() -> None:
    records = [SimpleRecord(b"v1", b"k1", (("a", b"1"),), 10), SimpleRecord(None, None, (), 7),
               SimpleRecord(b"", b"k3", (("b", None),))]
    raw = build_batch(records, base_offset=5, timestamp=20, producer_id=9, producer_epoch=2,
                      base_sequence=40, partition_leader_epoch=3)
    header, decoded = decode_batch(raw)
    assert (header.base_offset, header.records_count, header.base_timestamp,
            header.max_timestamp) == (5, 3, 10, 20)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (5, 10, b"k1", b"v1", (("a", b"1"),)), (6, 7, None, None, ()),
        (7, 20, b"k3", b"", (("b", None),))]
    batch = kafka_records.DefaultRecordBatch(raw)
    assert batch.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value) for r in batch] == [
        (5, 10, b"k1", b"v1"), (6, 7, None, None), (7, 20, b"k3", b"")]


def test_decode_kafka_python_gzip_batch() -> None:
    builder = kafka_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=1, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(20):
        builder.append(i, timestamp=100 + i, key=None, value=b"x" * 50, headers=[])
    raw = bytes(builder.build())
    header, records = decode_batch(raw)
    assert header.compression is CompressionType.GZIP
    assert [r.offset for r in records] == list(range(20))
    assert records[-1].timestamp == 119


@pytest.mark.parametrize("codec", list(CompressionType))
def test_builder_compression_round_trip(codec: CompressionType) -> None:
    raw = build_batch([SimpleRecord(b"payload-%d" % i) for i in range(10)], compression=codec)
    header, records = decode_batch(raw)
    assert header.compression is codec
    assert [r.value for r in records] == [b"payload-%d" % i for i in range(10)]


def test_snappy_java_framing() -> None:
    plain = build_batch([SimpleRecord(b"abc" * 20)] * 4)
    body = plain[HEADER_SIZE:]
    block = pa.Codec("snappy").compress(body, asbytes=True)
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block
    raw = bytearray(plain[:HEADER_SIZE] + framed)
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    struct.pack_into(">h", raw, 21, CompressionType.SNAPPY)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    _, records = decode_batch(bytes(raw))
    assert [r.value for r in records] == [b"abc" * 20] * 4


def test_a_snappy_block_claiming_more_than_snappy_can_expand_is_corrupt() -> None:
    """Its claimed length must not size the output buffer: 20 bytes claiming 4 GiB were a
    MemoryError (fuzz/record_batch.py found it)."""
    plain = build_batch([SimpleRecord(b"abc")])
    block = b"\xff\xff\xff\xff\x0f" + b"\x00" * 15  # uncompressed length 2**32 - 1
    raw = bytearray(plain[:HEADER_SIZE] + block)
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    struct.pack_into(">h", raw, 21, CompressionType.SNAPPY)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    with pytest.raises(CorruptMessageError, match="claims"):
        decode_batch(bytes(raw))


def test_rewrites_keep_crc_valid_and_log_append_time_recomputes_it() -> None:
    buf = bytearray(build_batch([SimpleRecord(b"a"), SimpleRecord(b"b")], timestamp=5))
    header = parse_header(buf)
    set_base_offset(buf, 0, 1234)
    set_partition_leader_epoch(buf, 0, 7)
    check_crc(buf, 0, parse_header(buf))  # both fields are outside the CRC
    set_log_append_time(buf, 0, header, 99_999)
    stamped = parse_header(buf)
    check_crc(buf, 0, stamped)
    assert stamped.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert (stamped.base_offset, stamped.partition_leader_epoch, stamped.max_timestamp) == (
        1234, 7, 99_999)
    assert [r.timestamp for r in decode_batch(bytes(buf))[1]] == [99_999, 99_999]


def test_iter_batches_over_several_and_partial_tail() -> None:
    a = build_batch([SimpleRecord(b"1")], base_offset=0)
    b = build_batch([SimpleRecord(b"2"), SimpleRecord(b"3")], base_offset=1)
    both = a + b
    assert [(p, h.base_offset) for p, h in iter_batches(both)] == [(0, 0), (len(a), 1)]
    for cut in (1, 20, HEADER_SIZE, len(b) - 1):
        torn = both[:len(a) + cut]
        with pytest.raises(CorruptMessageError):
            list(iter_batches(torn))
        assert [p for p, _ in iter_batches(torn, partial_tail_ok=True)] == [0]


def test_corruption_is_detected() -> None:
    raw = bytearray(build_batch([SimpleRecord(b"hello world")]))
    raw[-3] ^= 0x01
    with pytest.raises(CorruptMessageError, match="crc"):
        check_crc(raw, 0, parse_header(raw))
    short = bytearray(build_batch([SimpleRecord(b"x")]))
    struct.pack_into(">i", short, 8, 10)  # shorter than a header
    with pytest.raises(CorruptMessageError):
        parse_header(short)
    bad_magic = bytearray(build_batch([SimpleRecord(b"x")]))
    bad_magic[16] = 7
    with pytest.raises(CorruptMessageError):
        parse_header(bad_magic)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_invalid_record(magic: int) -> None:
    raw = bytearray(build_batch([SimpleRecord(b"x")]))
    raw[16] = magic
    with pytest.raises(InvalidRecordError):
        list(iter_batches(raw))
    # a legacy v0 message is shorter than a v2 header: still reported as legacy
    legacy = struct.pack(">qi", 0, 14) + struct.pack(">Ibb", 0, magic, 0) + b"\xff" * 8
    with pytest.raises(InvalidRecordError):
        list(iter_batches(legacy))


def test_decode_rejects_inconsistent_record_lengths() -> None:
    raw = bytearray(build_batch([SimpleRecord(b"abc")]))
    raw[HEADER_SIZE] = 0x7E  # record length varint: claims 63 bytes
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    with pytest.raises(CorruptMessageError):
        decode_batch(bytes(raw))


@pytest.mark.parametrize(("records_section", "reason"), [
    (b"\x80" * 10 + b"\x01", "longer than 10 bytes"),  # the record length, 11 bytes long
    (b"\x06\x00\x00\x00\x01\x80", "truncated varint"),  # the value length, cut off
])
def test_a_bad_varint_in_a_record_is_corrupt(records_section: bytes, reason: str) -> None:
    raw = bytearray(build_batch([SimpleRecord(b"abc")])[:HEADER_SIZE]) + records_section
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    with pytest.raises(CorruptMessageError, match=reason):
        decode_batch(bytes(raw))


_records = st.lists(
    st.builds(SimpleRecord, st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=10),
              st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)),
                       max_size=3).map(tuple),
              st.none() | st.integers(0, 2**41)),
    min_size=1, max_size=20)


@given(_records, st.integers(0, 2**40), st.integers(-1, 2**31 - 1))
def test_builder_decoder_round_trip(records: list[SimpleRecord], base_offset: int,
                                    base_sequence: int) -> None:
    raw = build_batch(records, base_offset=base_offset, timestamp=1_000,
                      producer_id=1 if base_sequence >= 0 else -1,
                      producer_epoch=0 if base_sequence >= 0 else -1, base_sequence=base_sequence)
    header, decoded = decode_batch(raw)
    assert header.records_count == len(records) and header.next_offset == base_offset + len(records)
    for i, (record, got) in enumerate(zip(records, decoded, strict=True)):
        assert got.offset == base_offset + i
        assert got.timestamp == (1_000 if record.timestamp is None else record.timestamp)
        assert (got.key, got.value, got.headers) == (record.key, record.value, record.headers)


@given(st.binary(max_size=300))
def test_garbage_never_escapes_as_another_exception(data: bytes) -> None:
    try:
        for pos, header in iter_batches(data):
            check_crc(data, pos, header)
            decode_batch(data[pos:pos + header.size])
    except (CorruptMessageError, InvalidRecordError):
        pass
