"""Which log the cleaner picks and what part of it (Kafka's LogCleanerManager), over real
log files: dirty ratio, first uncleanable offset (active segment, high watermark,
min.compaction.lag.ms), max.compaction.lag.ms, tombstones due, checkpoints."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from log_helpers import T0, Clock, batch, config

from odradek.common import TopicPartition
from odradek.log.cleaner.job import CleanerStats, CleanResult
from odradek.log.cleaner.manager import (
    CLEANER_OFFSET_CHECKPOINT,
    LogCleanerManager,
    cleanable_offsets,
)
from odradek.log.log import Log

COMPACT = config(cleanup_policy=("compact",), segment_bytes=300, min_cleanable_dirty_ratio=0.5)


def _fill(lg: Log, n: int, *, ts: int = T0, hw: bool = True) -> None:
    for i in range(n):
        lg.append_as_leader(batch(1, key=b"k%d" % (i % 3), ts=ts), leader_epoch=0)
    if hw:
        lg.update_high_watermark(lg.log_end_offset)


def test_the_dirty_section_ends_at_the_active_segment(open_log: Callable[..., Log], clock: Clock) -> None:
    lg = open_log(COMPACT)
    _fill(lg, 30)
    first_dirty, uncleanable, now = cleanable_offsets(lg, None, clock())
    assert (first_dirty, uncleanable, now) == (0, lg.active_segment.base_offset, False)


def test_nothing_at_or_above_the_high_watermark_is_cleanable(open_log: Callable[..., Log], clock: Clock) -> None:
    lg = open_log(COMPACT)
    _fill(lg, 30, hw=False)
    lg.update_high_watermark(lg.segments[2].base_offset + 1)
    _, uncleanable, _ = cleanable_offsets(lg, None, clock())
    assert uncleanable == lg.segments[2].base_offset
    assert lg.cleanable_segments(uncleanable) == lg.segments[:2]


def test_min_compaction_lag_keeps_young_segments_dirty(open_log: Callable[..., Log], clock: Clock) -> None:
    lg = open_log(config(cleanup_policy=("compact",), segment_bytes=300, min_compaction_lag_ms=60_000))
    _fill(lg, 12, ts=clock() - 120_000)  # old enough
    young = lg.log_end_offset
    _fill(lg, 20, ts=clock())
    _, uncleanable, _ = cleanable_offsets(lg, None, clock())
    assert lg.segment_for(young - 1).base_offset < uncleanable <= young


def test_max_compaction_lag_forces_a_cleaning(open_log: Callable[..., Log], clock: Clock) -> None:
    lg = open_log(config(cleanup_policy=("compact",), segment_bytes=300, max_compaction_lag_ms=60_000))
    _fill(lg, 30, ts=clock() - 120_000)
    assert cleanable_offsets(lg, None, clock())[2] is True
    clock.advance(-100_000)
    assert cleanable_offsets(lg, None, clock())[2] is False


def test_a_checkpoint_outside_the_log_restarts_from_the_log_start(open_log: Callable[..., Log], clock: Clock) -> None:
    lg = open_log(COMPACT)
    _fill(lg, 30)
    assert cleanable_offsets(lg, 12, clock())[0] == 12
    assert cleanable_offsets(lg, lg.log_end_offset + 5, clock())[0] == 0


def _manager(tmp_path: Path, logs: list[Log], clock: Clock) -> LogCleanerManager:
    return LogCleanerManager([tmp_path], lambda: logs, clock)


def test_the_filthiest_compacted_log_is_chosen_and_held(open_log: Callable[..., Log], tmp_path: Path,
                                                        clock: Clock) -> None:
    dirty = open_log(COMPACT, name="dirty-0")
    _fill(dirty, 30)
    deleting = open_log(config(segment_bytes=300), name="plain-0")
    _fill(deleting, 30)
    manager = _manager(tmp_path, [deleting, dirty], clock)
    chosen = manager.grab_filthiest_log()
    assert chosen is not None and chosen.log is dirty and chosen.cleanable_ratio == 1.0
    assert manager.grab_filthiest_log() is None  # in progress: not handed out twice
    result = CleanResult((), chosen.first_uncleanable_offset, CleanerStats())
    manager.done_cleaning(chosen.tp, result, tmp_path)
    assert manager.grab_filthiest_log() is None  # all clean now: ratio 0
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text().splitlines() == [
        "0", "1", f"dirty 0 {chosen.first_uncleanable_offset}"]


def test_a_log_below_its_ratio_waits_until_tombstones_are_due(open_log: Callable[..., Log], tmp_path: Path,
                                                              clock: Clock) -> None:
    lg = open_log(COMPACT)
    _fill(lg, 30)
    manager = _manager(tmp_path, [lg], clock)
    clean_to = lg.segments[-2].base_offset  # nearly everything clean: ratio below 0.5
    tp = TopicPartition(lg.topic, lg.partition)
    manager.done_cleaning(tp, CleanResult((), clean_to, CleanerStats(), tombstone_due_ms=clock() + 1000), tmp_path)
    assert manager.grab_filthiest_log() is None
    clock.advance(1001)
    chosen = manager.grab_filthiest_log()
    assert chosen is not None and chosen.first_dirty_offset == clean_to


def test_truncation_lowers_the_checkpoint(open_log: Callable[..., Log], tmp_path: Path, clock: Clock) -> None:
    lg = open_log(COMPACT)
    _fill(lg, 30)
    manager = _manager(tmp_path, [lg], clock)
    tp = TopicPartition(lg.topic, lg.partition)
    manager.checkpoints[tp] = 20
    lg.truncate_to(15)
    assert manager.checkpoint_of(lg) == 15
    assert lg.truncated_to is None
    manager.load_checkpoints()  # nothing written yet: the in-memory value stays
    assert manager.checkpoints[tp] == 15
