"""The hand-written FetchResponse (v4-v12) against kio's generated reader for every version:
file regions travel inline as themselves and, once read from the file, the frame decodes to
the fields that were asked for."""

from __future__ import annotations

import datetime
import os
import struct
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader

from odradek.protocol.fetch_response import FetchedPartition, FileSlice, encode_fetch_response
from odradek.protocol.records import SimpleRecord, build_batch, decode_batch, iter_batches

VERSIONS = range(4, 13)


@dataclass(frozen=True)
class Region:
    """A region of the segment file, as the log hands it out."""

    fd: int
    position: int
    size: int


@pytest.fixture
def segment() -> Iterator[tuple[int, list[bytes], list[Region]]]:
    """A file holding three record batches after some unrelated bytes, and their regions."""
    batches = [build_batch([SimpleRecord(b"value-%d-%d" % (base, i), key=b"k") for i in range(3)],
                           base_offset=base, timestamp=1_700_000_000_000) for base in (0, 3, 6)]
    with tempfile.TemporaryFile() as f:
        f.write(b"\xee" * 100)
        regions = []
        for batch in batches:
            regions.append(Region(f.fileno(), f.tell(), len(batch)))
            f.write(batch)
        f.flush()
        yield f.fileno(), batches, regions


def resolve(parts: Sequence[bytes | FileSlice]) -> bytes:
    """The frame as the socket server sends it: bytes as they are, regions read from the file."""
    return b"".join(p if isinstance(p, bytes) else os.pread(p.fd, p.size, p.position) for p in parts)


def decode(frame: bytes, version: int) -> tuple[int, Any]:
    """Correlation id and payload, read by kio's generated readers alone."""
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    header_type = ResponseHeaderV1 if version >= 12 else ResponseHeaderV0
    header, header_size = entity_reader(header_type)(frame, 4)
    payload, body_size = entity_reader(load_response_schema(1, version))(frame, 4 + header_size)
    assert 4 + header_size + body_size == len(frame)
    return header.correlation_id, payload


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_decodes_with_kio(version: int, segment: tuple[int, list[bytes], list[Region]]
                                        ) -> None:
    _fd, batches, regions = segment
    with_data = FetchedPartition(partition=2, error_code=ErrorCode.none, high_watermark=9,
                                 last_stable_offset=8, log_start_offset=3, chunks=regions[1:])
    empty = FetchedPartition(partition=0, error_code=ErrorCode.offset_out_of_range,
                             high_watermark=9, last_stable_offset=9, log_start_offset=3,
                             aborted_transactions_null=False)
    one = FetchedPartition(partition=5, error_code=ErrorCode.none, high_watermark=3,
                           last_stable_offset=3, log_start_offset=0, chunks=regions[:1])
    parts = encode_fetch_response(4242, version, ErrorCode.none, 987, [
        ("orders", [with_data, empty]), ("t-2", [one])], throttle_time_ms=17)

    # The regions go out as themselves, in order, never copied into the encoded bytes.
    assert [p for p in parts if not isinstance(p, bytes)] == [regions[1], regions[2], regions[0]]
    assert all(p is r for p, r in zip([p for p in parts if not isinstance(p, bytes)],
                                      [regions[1], regions[2], regions[0]], strict=True))

    correlation_id, response = decode(resolve(parts), version)
    assert correlation_id == 4242
    assert response.throttle_time == datetime.timedelta(milliseconds=17)
    if version >= 7:
        assert (response.error_code, response.session_id) == (ErrorCode.none, 987)
    assert [t.topic for t in response.responses] == ["orders", "t-2"]
    (p_data, p_empty), (p_one,) = (t.partitions for t in response.responses)

    assert (p_data.partition_index, p_data.error_code, p_data.high_watermark,
            p_data.last_stable_offset) == (2, ErrorCode.none, 9, 8)
    assert p_data.aborted_transactions is None
    assert p_data.records == batches[1] + batches[2]
    assert [header.base_offset for _, header in iter_batches(p_data.records)] == [3, 6]
    assert decode_batch(p_data.records[:len(batches[1])])[1][0].value == b"value-3-0"

    assert (p_empty.partition_index, p_empty.error_code) == (0, ErrorCode.offset_out_of_range)
    assert p_empty.aborted_transactions == ()
    assert p_empty.records == b""

    assert p_one.partition_index == 5 and p_one.records == batches[0]
    for p in (p_data, p_empty, p_one):
        if version >= 5:
            assert p.log_start_offset == (0 if p is p_one else 3)
        if version >= 11:
            assert p.preferred_read_replica == -1


@pytest.mark.parametrize("version", VERSIONS)
def test_a_response_without_topics(version: int) -> None:
    parts = encode_fetch_response(1, version, ErrorCode.fetch_session_id_not_found, 0, [])
    assert all(isinstance(p, bytes) for p in parts)
    _, response = decode(resolve(parts), version)
    assert response.responses == ()
    if version >= 7:
        assert response.error_code == ErrorCode.fetch_session_id_not_found


def test_a_compact_length_above_one_byte(segment: tuple[int, list[bytes], list[Region]]) -> None:
    """v12 writes lengths as unsigned varints: a records section above 127 bytes and a topic
    name of 200 characters take two bytes each."""
    _fd, batches, regions = segment
    name = "n" * 200
    partition = FetchedPartition(partition=0, error_code=ErrorCode.none, high_watermark=9,
                                 last_stable_offset=9, log_start_offset=0, chunks=regions)
    parts = encode_fetch_response(7, 12, ErrorCode.none, 1, [(name, [partition])])
    _, response = decode(resolve(parts), 12)
    assert response.responses[0].topic == name
    assert response.responses[0].partitions[0].records == b"".join(batches)
    assert len(b"".join(batches)) > 127


@pytest.mark.parametrize("version", VERSIONS)
def test_aborted_transactions_decode_with_kio(version: int, segment: tuple[int, list[bytes], list[Region]]
                                              ) -> None:
    """read_committed answers list each aborted transaction as (producer id, first offset);
    the partition's fields after the list still line up."""
    _fd, batches, regions = segment
    aborted = [(7, 3), (2**40, 6)]
    partition = FetchedPartition(partition=1, error_code=ErrorCode.none, high_watermark=9,
                                 last_stable_offset=6, log_start_offset=2, chunks=regions[:2],
                                 aborted_transactions_null=False, aborted_transactions=aborted)
    _, response = decode(resolve(encode_fetch_response(3, version, ErrorCode.none, 0, [("t", [partition])])),
                         version)
    p = response.responses[0].partitions[0]
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == aborted
    assert p.last_stable_offset == 6
    assert p.records == batches[0] + batches[1]
    if version >= 5:
        assert p.log_start_offset == 2
