"""Swapping cleaned segments into a log (Kafka's replaceSegments) and completing a swap that a
crash interrupted: whatever step the crash hit, the reopened log is the old one or the new
one, never a mix."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from log_helpers import batch, config

from odradek.log.cleaner.job import CLEANED_SUFFIX, SWAP_SUFFIX
from odradek.log.log import Log
from odradek.log.segment import DELETED_SUFFIX, LogSegment, filename_prefix
from odradek.protocol.records import iter_batches

CFG = config(segment_bytes=400)


def _filled(open_log: Callable[..., Log]) -> Log:
    lg = open_log(CFG)
    for i in range(40):
        lg.append_as_leader(batch(1, key=b"k%d" % (i % 4)), leader_epoch=0)
    lg.update_high_watermark(lg.log_end_offset)
    assert len(lg.segments) >= 5
    return lg


def _batches(lg: Log, segments: list[LogSegment]) -> list[bytes]:
    out = []
    for segment in segments:
        data = segment.read_bytes(0, segment.size)
        out += [data[pos:pos + h.size] for pos, h in iter_batches(data)]
    return out


def _write_cleaned(lg: Log, segments: list[LogSegment], keep: Callable[[int], bool]) -> list[int]:
    """Write ``<base>.log.cleaned`` holding the kept batches of ``segments``; returns the
    offsets it holds."""
    cleaned = LogSegment(lg.dir, segments[0].base_offset, index_interval_bytes=100,
                         max_index_size=4096, now_ms=0, suffix=CLEANED_SUFFIX)
    offsets = []
    for data in _batches(lg, segments):
        header = next(h for _, h in iter_batches(data))
        if keep(header.base_offset):
            cleaned.append(data, [(0, header.size, header.last_offset, header.max_timestamp)])
            offsets.append(header.base_offset)
    cleaned.on_become_inactive()
    cleaned.flush()
    cleaned.close()
    return offsets


def _offsets(lg: Log) -> list[int]:
    offsets, position = [], lg.log_start_offset
    while True:
        data = lg.read(position, 1 << 20).read_bytes()
        if not data:
            return offsets
        for _, h in iter_batches(data):
            offsets.extend(range(h.base_offset, h.next_offset))
        position = offsets[-1] + 1


def _reopen(lg: Log, tmp_path: Path) -> Log:
    lg.close()
    return Log.open(lg.dir, CFG, topic=lg.topic, partition=lg.partition, had_clean_shutdown=True)


def test_replace_segments_swaps_in_the_cleaned_run(open_log: Callable[..., Log], tmp_path: Path) -> None:
    lg = _filled(open_log)
    before = _offsets(lg)
    run = lg.segments[:3]
    kept = _write_cleaned(lg, run, keep=lambda offset: offset % 2 == 1)
    rest = [o for o in before if o >= lg.segments[3].base_offset]
    (new,) = lg.replace_segments([(run, run[0].base_offset)])

    assert lg.segments[0] is new and new.base_offset == run[0].base_offset
    assert _offsets(lg) == kept + rest
    names = os.listdir(lg.dir)
    assert not any(n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for n in names)
    assert f"{filename_prefix(run[1].base_offset)}.log{DELETED_SUFFIX}" in names
    assert _offsets(_reopen(lg, tmp_path)) == kept + rest


def test_replace_segments_refuses_the_active_segment(open_log: Callable[..., Log]) -> None:
    lg = _filled(open_log)
    with pytest.raises(ValueError, match="not a run of inactive segments"):
        lg.replace_segments([(lg.segments[-2:], lg.segments[-2].base_offset)])


def test_holds_segments_sees_retention_and_truncation(open_log: Callable[..., Log]) -> None:
    lg = _filled(open_log)
    read = [(s, s.size) for s in lg.segments[:3]]
    assert lg.holds_segments(read)
    lg.truncate_to(lg.segments[2].base_offset + 1)
    assert not lg.holds_segments(read)
    assert lg.truncated_to == lg.log_end_offset


def _rename(lg: Log, base: int, old: str, new: str, files: tuple[str, ...]) -> None:
    for kind in files:
        source = lg.dir / f"{filename_prefix(base)}{kind}{old}"
        if source.exists() or kind == ".log":  # an index with no entries has no file
            os.rename(source, lg.dir / f"{filename_prefix(base)}{kind}{new}")


@pytest.mark.parametrize("step", ["cleaned", "index-swapped", "swapped", "old-deleted",
                                  "index-renamed"])
def test_a_crash_at_any_step_leaves_the_old_or_the_new_log(
        open_log: Callable[..., Log], tmp_path: Path, step: str) -> None:
    lg = _filled(open_log)
    before = _offsets(lg)
    run = lg.segments[:3]
    base = run[0].base_offset
    kept = _write_cleaned(lg, run, keep=lambda offset: offset % 3 == 0)
    after = kept + [o for o in before if o >= lg.segments[3].base_offset]
    bases = [s.base_offset for s in run]
    lg.close()
    # Replay replace_segments' renames up to the crash point, by hand.
    index_files = (".index", ".timeindex")
    if step != "cleaned":
        _rename(lg, base, CLEANED_SUFFIX, SWAP_SUFFIX, index_files)
    if step in ("swapped", "old-deleted", "index-renamed"):
        _rename(lg, base, CLEANED_SUFFIX, SWAP_SUFFIX, (".log",))
    if step in ("old-deleted", "index-renamed"):
        for b in bases:
            _rename(lg, b, "", DELETED_SUFFIX, (".log", ".index", ".timeindex"))
    if step == "index-renamed":
        _rename(lg, base, SWAP_SUFFIX, "", index_files)

    reopened = Log.open(lg.dir, CFG, topic=lg.topic, partition=lg.partition, had_clean_shutdown=False)
    expected = before if step in ("cleaned", "index-swapped") else after
    assert _offsets(reopened) == expected
    names = os.listdir(lg.dir)
    assert not any(n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX)) for n in names)
    for segment in reopened.segments:
        assert segment.recover() == 0  # every batch on disk is whole and valid
    reopened.close()


@pytest.mark.parametrize("step", ["first-swapped", "all-swapped", "first-done", "all-done"])
def test_a_cleaning_of_several_groups_is_swapped_in_as_a_whole(
        open_log: Callable[..., Log], step: str) -> None:
    lg = _filled(open_log)
    before = _offsets(lg)
    runs = [lg.segments[0:2], lg.segments[2:4]]
    kept = [o for run in runs for o in _write_cleaned(lg, run, keep=lambda offset: offset % 4 == 3)]
    after = kept + [o for o in before if o >= lg.segments[4].base_offset]
    lg.close()
    bases = [run[0].base_offset for run in runs]
    files = (".index", ".timeindex", ".log")
    swapped = bases[:1] if step == "first-swapped" else bases
    for base in swapped:
        _rename(lg, base, CLEANED_SUFFIX, SWAP_SUFFIX, files)
    done = {"first-done": runs[:1], "all-done": runs}.get(step, [])
    for run in done:
        for segment in run:
            _rename(lg, segment.base_offset, "", DELETED_SUFFIX, files)
        _rename(lg, run[0].base_offset, SWAP_SUFFIX, "", files)

    reopened = Log.open(lg.dir, CFG, topic=lg.topic, partition=lg.partition, had_clean_shutdown=False)
    assert _offsets(reopened) == (before if step == "first-swapped" else after)
    assert not any(n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX)) for n in os.listdir(lg.dir))
    reopened.close()


def test_replace_segments_swaps_several_groups(open_log: Callable[..., Log], tmp_path: Path) -> None:
    lg = _filled(open_log)
    before = _offsets(lg)
    runs = [lg.segments[0:2], lg.segments[2:4]]
    kept = [o for run in runs for o in _write_cleaned(lg, run, keep=lambda offset: offset % 4 == 0)]
    after = kept + [o for o in before if o >= lg.segments[4].base_offset]
    new = lg.replace_segments([(run, run[0].base_offset) for run in runs])
    assert lg.segments[:2] == new
    assert _offsets(lg) == after
    assert _offsets(_reopen(lg, tmp_path)) == after
