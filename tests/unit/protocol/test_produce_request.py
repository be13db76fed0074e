"""The hand-written ProduceRequest reader agrees with kio's encoding for every version, and
refuses lies about lengths."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema

from odradek.protocol.framing import MalformedRequestError, decode_request_header, encode_request
from odradek.protocol.messages import request_module
from odradek.protocol.produce_request import has_transactional_records, parse_produce_request
from odradek.protocol.records import SimpleRecord, build_batch
from support.examples import examples

topics = st.text(alphabet="abc.-_XYZ019", min_size=1, max_size=12)
records = st.one_of(st.none(), st.binary(max_size=300))


def _request(version: int, txn: str | None, acks: int, timeout_ms: int,
             data: list[tuple[str, list[tuple[int, bytes | None]]]]) -> bytes:
    m = request_module(0, version)
    request = load_request_schema(0, version)(
        transactional_id=txn, acks=acks, timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=tuple(m.TopicProduceData(name=name, partition_data=tuple(
            m.PartitionProduceData(index=i, records=r) for i, r in parts)) for name, parts in data))
    return encode_request(request, 9, "client")[4:]


@pytest.mark.parametrize("version", range(3, 10))
@settings(max_examples=examples(40), deadline=None)
@given(txn=st.one_of(st.none(), topics), acks=st.sampled_from([-1, 0, 1, 2]),
       timeout_ms=st.integers(0, 2**31 - 1),
       data=st.lists(st.tuples(topics, st.lists(st.tuples(st.integers(0, 2**31 - 1), records), max_size=4)),
                     max_size=4))
def test_agrees_with_kio(version: int, txn: str | None, acks: int, timeout_ms: int,
                        data: list[tuple[str, list[tuple[int, bytes | None]]]]) -> None:
    frame = _request(version, txn, acks, timeout_ms, data)
    _, offset = decode_request_header(frame)
    parsed = parse_produce_request(frame, offset, version)
    assert (parsed.transactional_id, parsed.acks, parsed.timeout_ms) == (txn, acks, timeout_ms)
    flat = [(t, i, r) for t, parts in data for i, r in parts]
    assert [(t, i, None if r is None else bytes(r)) for t, i, r in parsed.partitions] == flat


def test_views_into_a_bytearray_frame_are_writable() -> None:
    frame = bytearray(_request(9, None, -1, 1000, [("t", [(0, b"abcdef")])]))
    _, offset = decode_request_header(frame)
    view = parse_produce_request(frame, offset, 9).partitions[0][2]
    assert view is not None and not view.readonly
    view[0:1] = b"Z"
    assert b"Zbcdef" in frame


@pytest.mark.parametrize("version", [3, 8, 9])
def test_every_truncation_is_malformed(version: int) -> None:
    frame = _request(version, "tx", 1, 30000, [("topic", [(0, b"x" * 20), (1, None)])])
    _, offset = decode_request_header(frame)
    for cut in range(offset, len(frame)):
        with pytest.raises(MalformedRequestError):
            parse_produce_request(frame[:cut], offset, version)


def test_forged_counts_and_lengths_are_malformed() -> None:
    frame = bytearray(_request(8, None, 1, 30000, [("t", [(0, b"abc")])]))
    _, offset = decode_request_header(frame)
    # topic count, just after transactional id (2 bytes), acks (2) and timeout (4)
    count_at = offset + 2 + 2 + 4
    for forged in (0x7FFFFFFF, -2):
        bad = bytearray(frame)
        bad[count_at:count_at + 4] = forged.to_bytes(4, "big", signed=True)
        with pytest.raises(MalformedRequestError):
            parse_produce_request(bad, offset, 8)
    records_len_at = len(frame) - 3 - 4
    bad = bytearray(frame)
    bad[records_len_at:records_len_at + 4] = (10**6).to_bytes(4, "big")
    with pytest.raises(MalformedRequestError):
        parse_produce_request(bad, offset, 8)


def test_a_varint_longer_than_5_bytes_is_malformed() -> None:
    frame = _request(9, None, 1, 30000, [("t", [(0, b"abc")])])
    _, offset = decode_request_header(frame)
    # The transactional id's compact length, the body's first field.
    bad = frame[:offset] + b"\x80" * 5 + b"\x01" + frame[offset + 1:]
    with pytest.raises(MalformedRequestError, match="produce request: varint is longer than 5 bytes"):
        parse_produce_request(bad, offset, 9)


def test_has_transactional_records_reads_the_first_batch_attributes() -> None:
    plain = memoryview(build_batch([SimpleRecord(b"v")], producer_id=3, producer_epoch=0, base_sequence=0))
    txn = memoryview(build_batch([SimpleRecord(b"v")], producer_id=3, producer_epoch=0, base_sequence=0,
                                 is_transactional=True))
    assert not has_transactional_records([("t", 0, plain), ("t", 1, None), ("t", 2, memoryview(b"\x00" * 5))])
    assert has_transactional_records([("t", 0, plain), ("u", 4, txn)])
    # A legacy (magic 1) message set with the same bit set is no transactional batch.
    legacy = bytearray(txn)
    legacy[16] = 1
    assert not has_transactional_records([("t", 0, memoryview(legacy))])
