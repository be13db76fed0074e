"""LogSegment: append, whole-batch reads, lookups, recovery and truncation."""

from __future__ import annotations

import os
from pathlib import Path

from log_helpers import T0, batch

from odradek.log.segment import LogSegment
from odradek.protocol.records import iter_batches, parse_header, set_base_offset


def make_segment(tmp_path: Path, base: int = 0, interval: int = 100) -> LogSegment:
    return LogSegment(tmp_path, base, index_interval_bytes=interval, max_index_size=4096,
                      now_ms=T0)


def fill(segment: LogSegment, count: int, records_per_batch: int = 2) -> list[tuple[int, int]]:
    """Append ``count`` batches; returns (position, size) of each."""
    regions = []
    offset = segment.next_offset
    for i in range(count):
        raw = bytearray(batch(records_per_batch, ts=T0 + i))
        set_base_offset(raw, 0, offset)
        header = parse_header(raw)
        regions.append((segment.size, len(raw)))
        segment.append(raw, [(0, len(raw), header.last_offset, header.max_timestamp)])
        offset = header.next_offset
    return regions


def test_names_append_and_translate(tmp_path: Path) -> None:
    segment = make_segment(tmp_path, base=42)
    assert segment.log_path.name == "00000000000000000042.log"
    assert segment.index.path.name == "00000000000000000042.index"
    assert segment.time_index.path.name == "00000000000000000042.timeindex"
    regions = fill(segment, 30)
    assert segment.next_offset == 42 + 60
    assert len(segment.index) > 5  # sparse, every ~100 bytes
    for i, (position, _) in enumerate(regions):
        for offset in (42 + 2 * i, 42 + 2 * i + 1):  # both records of batch i
            found_position, header = segment.translate_offset(offset)
            assert found_position == position and header.base_offset == 42 + 2 * i
    assert segment.translate_offset(42 + 60) is None


def test_read_returns_whole_batches(tmp_path: Path) -> None:
    segment = make_segment(tmp_path)
    regions = fill(segment, 20)
    size = regions[0][1]
    assert segment.read(0, size * 3 + size // 2) == (0, size * 3)  # 3.5 batches -> 3
    assert segment.read(5, size * 2) == (regions[2][0], size * 2)  # offset 5 is in batch 2
    assert segment.read(0, size - 1) == (0, 0)  # first batch does not fit
    assert segment.read(0, size - 1, min_one_message=True) == (0, size)
    assert segment.read(0, 10**6, max_position=regions[4][0]) == (0, regions[4][0])
    assert segment.read(39, 10**6) == (regions[19][0], size)
    assert segment.read(40, 10**6) is None


def test_find_batch_by_timestamp(tmp_path: Path) -> None:
    segment = make_segment(tmp_path)
    fill(segment, 20)
    _, header = segment.find_batch_by_timestamp(T0 + 7, 0)
    assert header.base_offset == 14 and header.max_timestamp == T0 + 7
    assert segment.find_batch_by_timestamp(T0 + 7, 20)[1].base_offset == 20
    assert segment.find_batch_by_timestamp(T0 + 100, 0) is None
    assert segment.max_timestamp_so_far == T0 + 19
    assert segment.offset_of_max_timestamp_so_far == 39


def test_truncate_to(tmp_path: Path) -> None:
    segment = make_segment(tmp_path)
    regions = fill(segment, 10)
    removed = segment.truncate_to(7)  # inside batch 3 (offsets 6, 7): the batch goes
    assert removed == sum(size for _, size in regions[3:])
    assert segment.next_offset == 6 and segment.size == regions[3][0]
    assert all(o < 6 for o in segment.index.keys)
    fill(segment, 1)
    assert segment.next_offset == 8


def test_recover_rebuilds_indexes_and_truncates_torn_tail(tmp_path: Path) -> None:
    segment = make_segment(tmp_path)
    regions = fill(segment, 25)
    entries = list(zip(segment.index.keys, segment.index.values, strict=True))
    segment.close()
    log_path = tmp_path / "00000000000000000000.log"
    with open(log_path, "r+b") as f:
        f.truncate(regions[20][0] + 30)  # cut batch 20 in the middle
    os.unlink(tmp_path / "00000000000000000000.index")
    reopened = make_segment(tmp_path)
    seen = []
    truncated = reopened.recover(seen.append)
    assert truncated == 30
    assert [h.base_offset for h in seen] == [2 * i for i in range(20)]
    assert reopened.next_offset == 40 and reopened.size == regions[20][0]
    assert [e for e in zip(reopened.index.keys, reopened.index.values, strict=True)
            if e[0] < 40] == [e for e in entries if e[0] < 40]
    data = reopened.read_bytes(0, reopened.size)
    assert [h.base_offset for _, h in iter_batches(data)] == [2 * i for i in range(20)]


def test_recover_stops_at_crc_mismatch(tmp_path: Path) -> None:
    segment = make_segment(tmp_path)
    regions = fill(segment, 10)
    with open(segment.log_path, "r+b") as f:
        f.seek(regions[6][0] + regions[6][1] - 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert segment.recover() == sum(size for _, size in regions[6:])
    assert segment.next_offset == 12


def test_tail_lookups_agree_with_the_index_walk(tmp_path: Path) -> None:
    """translate_offset answers the recently appended batches from memory; a segment opened
    afresh (no memory, index and header walk only) must give the same answer for every
    offset, after single- and multi-batch appends and after a truncation."""
    import random

    rng = random.Random(7)
    live = make_segment(tmp_path, base=100, interval=300)
    offset = 100
    for _ in range(120):
        raws = []
        for _ in range(rng.choice((1, 1, 2, 5))):
            raw = bytearray(batch(rng.randint(1, 4), size=rng.randint(1, 90)))
            set_base_offset(raw, 0, offset)
            offset = parse_header(raw).next_offset
            raws.append(raw)
        data = b"".join(raws)
        infos, rel = [], 0
        for raw in raws:
            header = parse_header(raw)
            infos.append((rel, len(raw), header.last_offset, header.max_timestamp))
            rel += len(raw)
        live.append(data, infos)
        if rng.random() < 0.05:
            live.truncate_to(rng.randint(100, offset - 1))
            offset = live.next_offset
    assert live._tail_last, "the tail memory is in use"
    live.index.flush()
    fresh = LogSegment(tmp_path, 100, index_interval_bytes=300, max_index_size=4096, now_ms=T0)
    assert not fresh._tail_last
    positions = sorted({live.translate_offset(o)[0] for o in range(100, offset)})
    for o in range(95, offset + 3):
        assert live.translate_offset(o) == fresh.translate_offset(o), o
        for start in (0, positions[len(positions) // 2], positions[-1]):
            assert live.translate_offset(o, start) == fresh.translate_offset(o, start), (o, start)


def test_a_segment_with_data_has_its_index_files(tmp_path: Path) -> None:
    """Tail reads need no index lookup, so the files are made on the first append (a segment
    with data but no index files would be rebuilt as corrupt at the next start)."""
    segment = make_segment(tmp_path, base=7)
    assert not segment.index.path.exists() and not segment.time_index.path.exists()
    fill(segment, 1)
    assert segment.translate_offset(7) is not None
    assert segment.index.path.exists() and segment.time_index.path.exists()
    segment.sanity_check()
