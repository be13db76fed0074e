"""Offset index and time index: Kafka's file formats, lookups, truncation, torn files."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from odradek.log.abstract_index import IndexCorruptError
from odradek.log.offset_index import OffsetIndex, OffsetPosition
from odradek.log.time_index import TimeIndex, TimestampOffset


def test_offset_index_file_format_and_lookup(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1024)
    assert index.lookup(150) == OffsetPosition(100, 0)  # empty: segment start
    for offset, position in [(103, 0), (110, 4200), (125, 8500)]:
        index.append(offset, position)
    assert index.lookup(99) == OffsetPosition(100, 0)
    assert index.lookup(103) == OffsetPosition(103, 0)
    assert index.lookup(124) == OffsetPosition(110, 4200)
    assert index.lookup(10_000) == OffsetPosition(125, 8500)
    assert index.lookup_position(8499) == 4200 and index.lookup_position(8500) == 8500
    index.close()
    raw = (tmp_path / "00000000000000000100.index").read_bytes()
    assert raw == struct.pack(">iiiiii", 3, 0, 10, 4200, 25, 8500)  # relative offsets
    reopened = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1024)
    assert reopened.last_entry() == OffsetPosition(125, 8500)
    with pytest.raises(ValueError):
        reopened.append(125, 9000)


def test_offset_index_truncate_full_and_torn_entry(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, 8 * 4)
    for i in range(4):
        index.append(i * 10 + 9, i * 1000)
    assert index.is_full
    index.truncate_to(19)  # drops entries for offsets >= 19
    assert len(index) == 1 and index.last_offset == 9
    index.close()
    path.write_bytes(path.read_bytes() + b"\x00\x00\x00")  # a torn trailing entry
    reopened = OffsetIndex(path, 0, 1024)
    assert len(reopened) == 1 and path.stat().st_size == 8


def test_offset_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(struct.pack(">iiii", 5, 100, -3, 200))  # last entry before the base
    with pytest.raises(IndexCorruptError):
        OffsetIndex(path, 0, 1024).sanity_check(1000)
    OffsetIndex(path.with_name("1.index"), 0, 1024).sanity_check(0)  # empty: fine
    path.write_bytes(struct.pack(">ii", 5, 5000))  # points past the log
    with pytest.raises(IndexCorruptError):
        OffsetIndex(path, 0, 1024).sanity_check(1000)


def test_time_index_only_grows_and_looks_up(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.timeindex"
    index = TimeIndex(path, 50, 1024)
    assert index.lookup(123) == TimestampOffset(-1, 50)
    index.maybe_append(1000, 52)
    index.maybe_append(1000, 55)  # same timestamp: ignored
    index.maybe_append(900, 56)  # older: ignored
    index.maybe_append(2000, 60)
    assert len(index) == 2
    assert index.lookup(999) == TimestampOffset(-1, 50)
    assert index.lookup(1500) == TimestampOffset(1000, 52)
    assert index.lookup(2000) == TimestampOffset(2000, 60)
    index.close()
    assert path.read_bytes() == struct.pack(">qiqi", 1000, 2, 2000, 10)
    reopened = TimeIndex(path, 50, 1024)
    assert reopened.last_entry() == TimestampOffset(2000, 60)
    reopened.truncate_to(60)
    assert reopened.last_entry() == TimestampOffset(1000, 52)
