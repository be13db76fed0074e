"""The cleaner's record scanner (odradek.log.cleaner.record_scanner) held to the record
batch decoder (odradek.protocol.records.decode_batch): the same records wherever the decoder
reads a batch, CorruptMessageError wherever a batch is cut short."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.log.cleaner import native
from odradek.log.cleaner.record_scanner import (
    ScannedRecords,
    first_key,
    records_section,
    scan_records,
    scan_records_native,
    scan_records_python,
)
from odradek.protocol.errors import CorruptMessageError
from odradek.protocol.records import (
    HEADER_SIZE,
    CompressionType,
    Record,
    compress,
    decode_batch,
    encode_batch,
    parse_header,
)
from odradek.protocol.varint import encode_varlong
from support.examples import examples

T0 = 1_700_000_000_000
BASE = 1000


def _field(value: bytes | None) -> bytes:
    return encode_varlong(-1) if value is None else encode_varlong(len(value)) + value


def encode_record(ts_delta: int, offset_delta: int, key: bytes | None, value: bytes | None,
                  headers: list[tuple[bytes, bytes | None]]) -> bytes:
    """One v2 record with any deltas (build_batch only writes 0, 1, 2, ... ones)."""
    body = (b"\x00" + encode_varlong(ts_delta) + encode_varlong(offset_delta) + _field(key)
            + _field(value) + encode_varlong(len(headers))
            + b"".join(_field(k) + _field(v) for k, v in headers))
    return encode_varlong(len(body)) + body


def make_batch(records: list[bytes], codec: CompressionType = CompressionType.NONE, *,
               count: int | None = None) -> bytes:
    """A batch of ``records`` (encoded), which says it holds ``count`` (default: as many)."""
    count = len(records) if count is None else count
    return encode_batch(compress(codec, b"".join(records)), base_offset=BASE,
                        last_offset_delta=max(count - 1, 0), records_count=count,
                        attributes=int(codec), base_timestamp=T0, max_timestamp=T0,
                        partition_leader_epoch=0, producer_id=-1, producer_epoch=-1,
                        base_sequence=-1)


def scan(batch: bytes, *, positions: bool = False) -> tuple[bytes, int, ScannedRecords]:
    header = parse_header(batch)
    buf, start, end = records_section(batch, 0, header)
    return buf, start, scan_records(buf, start, end, header.records_count, header.base_offset,
                                    positions=positions)


def agrees(scanned: ScannedRecords, decoded: list[Record]) -> None:
    keys, offsets, tombstones, keyless, *_ = scanned
    keyed = [r for r in decoded if r.key is not None]
    assert keys == [r.key for r in keyed]
    assert offsets == [r.offset for r in keyed]
    assert tombstones == [r.offset for r in keyed if r.value is None]
    assert keyless == [r.offset for r in decoded if r.key is None]


# Keys and values long enough for two-byte lengths, deltas of one, two and three bytes
# (negative ones too), a few headers.
blob = st.one_of(st.none(), st.binary(max_size=8), st.binary(min_size=60, max_size=200))
record_st = st.builds(
    encode_record,
    ts_delta=st.one_of(st.integers(-70, 70), st.integers(-2**40, 2**40)),
    offset_delta=st.one_of(st.integers(0, 70), st.integers(-100, 10_000)),
    key=blob, value=blob,
    headers=st.lists(st.tuples(st.binary(max_size=4), st.one_of(st.none(), st.binary(max_size=4))),
                     max_size=2))

# Drawing the records is most of these tests' time, so each example checks one list of
# records several ways: in every codec, or cut or damaged at several places.
CODECS = (CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4)
PLACES_PER_EXAMPLE = 5


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(record_st, max_size=40))
def test_the_scanner_reads_what_the_decoder_reads(records: list[bytes]) -> None:
    for codec in CODECS:
        _scanner_reads_what_the_decoder_reads(make_batch(records, codec))


def _scanner_reads_what_the_decoder_reads(batch: bytes) -> None:
    _, decoded = decode_batch(batch)
    _, _, plain = scan(batch)
    agrees(plain, decoded)
    assert plain[4:] == ([], [], [])  # no positions unless asked for
    buf, start, placed = scan(batch, positions=True)
    agrees(placed, decoded)
    starts, ends, timestamp_deltas = placed[4:]
    keyed = [r for r in decoded if r.key is not None]
    assert timestamp_deltas == [r.timestamp - T0 for r in keyed]
    # Each keyed record's span is that record, whole: on its own it decodes to itself.
    for s, e, record in zip(starts, ends, keyed, strict=True):
        alone = encode_batch(buf[s:e], base_offset=BASE, last_offset_delta=0, records_count=1,
                             attributes=0, base_timestamp=T0, max_timestamp=T0,
                             partition_leader_epoch=0, producer_id=-1, producer_epoch=-1,
                             base_sequence=-1)
        assert decode_batch(alone)[1] == [record]
    expected_first = decoded[0].key if decoded else None
    assert first_key(placed, start) == expected_first


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(record_st, min_size=1, max_size=20), data=st.data())
def test_a_batch_cut_short_is_corrupt_to_both(records: list[bytes], data: st.DataObject) -> None:
    payload = b"".join(records)
    cuts = data.draw(st.lists(st.integers(0, len(payload) - 1), min_size=PLACES_PER_EXAMPLE,
                              max_size=PLACES_PER_EXAMPLE))
    for cut in cuts:
        batch = make_batch([payload[:cut]], count=len(records))
        with pytest.raises(CorruptMessageError):
            scan(batch)
        with pytest.raises(CorruptMessageError):
            scan(batch, positions=True)
        # Read from a larger buffer (a segment), it must not borrow the next batch's bytes.
        header = parse_header(batch)
        with pytest.raises(CorruptMessageError):
            scan_records(batch + payload, HEADER_SIZE, header.size, len(records), BASE)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(record_st, min_size=1, max_size=10), data=st.data())
def test_where_the_decoder_reads_a_damaged_batch_the_scanner_agrees(
        records: list[bytes], data: st.DataObject) -> None:
    payload = b"".join(records)
    damages = data.draw(st.lists(st.tuples(st.integers(0, len(payload) - 1), st.integers(0, 255)),
                                 min_size=PLACES_PER_EXAMPLE, max_size=PLACES_PER_EXAMPLE))
    for at, byte in damages:
        damaged = bytearray(payload)
        damaged[at] = byte
        _scanner_agrees_where_the_decoder_reads(make_batch([bytes(damaged)], count=len(records)))


def _scanner_agrees_where_the_decoder_reads(batch: bytes) -> None:
    try:
        _, decoded = decode_batch(batch)
    except (CorruptMessageError, ValueError):
        decoded = None
    try:
        _, _, scanned = scan(batch)
    except CorruptMessageError:
        assert decoded is None, "the scanner refused a batch the decoder read"
        return
    if decoded is not None:
        agrees(scanned, decoded)


def test_a_key_running_past_its_record_is_corrupt() -> None:
    record = bytearray(encode_record(0, 0, b"k", b"v", []))
    record[4] = 2 * 5  # the key claims 5 bytes: past the value's length, into the next record
    batch = make_batch([bytes(record), encode_record(0, 1, b"key2", b"value2", [])])
    with pytest.raises(CorruptMessageError, match="ends before its value"):
        scan(batch)


def test_records_that_do_not_fill_the_batch_are_corrupt() -> None:
    batch = make_batch([encode_record(0, 0, b"k", b"v", [])] * 2, count=1)  # one left over
    with pytest.raises(CorruptMessageError, match="do not fill"):
        scan(batch)


# The compiled scanner, built as the set-up builds it (a no-op when it is).
_built = native.build()
COMPILED = native.load()


def test_the_compiled_scanner_is_built_and_loaded() -> None:
    assert _built is not None and _built.exists(), "no C compiler: scripts/bootstrap builds the scanner with one"
    assert COMPILED is not None


def both_scanners(buf: bytes, pos: int, end: int, count: int) -> tuple[object, object]:
    """What each scanner makes of a batch's records, with and without positions: its result,
    or the CorruptMessageError's text; None from the compiled one: it refused the batch."""
    assert COMPILED is not None
    results = []
    for positions in (False, True):
        try:
            python: object = scan_records_python(buf, pos, end, count, BASE, positions=positions)
        except CorruptMessageError as e:
            python = str(e)
        compiled = scan_records_native(COMPILED, buf, pos, end, count, BASE, positions)
        results.append((python, compiled))
    return tuple(results)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(record_st, max_size=40), data=st.data())
def test_the_compiled_scanner_finds_what_the_python_one_finds_and_refuses_what_it_refuses(
        records: list[bytes], data: st.DataObject) -> None:
    payload = b"".join(records)
    # Intact: both read it, the same.
    for python, compiled in both_scanners(payload, 0, len(payload), len(records)):
        assert compiled == python
    if not payload:
        return
    places = data.draw(st.lists(st.tuples(st.integers(0, len(payload) - 1), st.integers(0, 255)),
                                min_size=PLACES_PER_EXAMPLE, max_size=PLACES_PER_EXAMPLE))
    for at, byte in places:
        damaged = bytearray(payload)
        damaged[at] = byte
        cut = payload[:at]
        for buf, end in ((bytes(damaged), len(damaged)), (cut + payload, len(cut))):  # damaged; cut short
            for python, compiled in both_scanners(buf, 0, end, len(records)):
                # Where the compiled scanner answers, it answers as the Python one; where it
                # refuses, scan_records asks the Python one.
                assert compiled is None or compiled == python


def test_scan_records_uses_the_compiled_scanner_and_the_python_one_names_the_fault() -> None:
    records = [encode_record(0, i, b"key%d" % i, None if i == 2 else b"v", []) for i in range(6)]
    records.insert(3, encode_record(0, 6, None, b"keyless", []))
    payload = b"".join(records)
    assert COMPILED is not None
    found = scan_records_native(COMPILED, payload, 0, len(payload), len(records), BASE, False)
    assert found is not None and found == scan_records(payload, 0, len(payload), len(records), BASE)
    keys, offsets, tombstones, keyless, *_ = found
    assert keys == [b"key%d" % i for i in range(6)] and offsets == [BASE + i for i in range(6)]
    assert (tombstones, keyless) == ([BASE + 2], [BASE + 6])
    with pytest.raises(CorruptMessageError, match="do not fill"):
        scan_records(payload + payload[:5], 0, len(payload) + 5, len(records), BASE)
