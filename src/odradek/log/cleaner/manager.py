"""Kafka's ``LogCleanerManager``: which compacted log to clean next, and how far each has
been cleaned.

:class:`LogCleanerManager` (no I/O but the checkpoint files) decides what to clean: for
every log whose ``cleanup.policy`` includes ``compact`` it finds the dirty section (from the
``cleaner-offset-checkpoint`` entry to the first uncleanable offset) and picks the log with
the highest dirty ratio above ``min.cleanable.dirty.ratio``, or one whose first dirty
segment is older than ``max.compaction.lag.ms``, or one holding tombstones that are due for
removal. :class:`~odradek.log.cleaner.log_cleaner.LogCleaner` cleans what it picks.

The first uncleanable offset is the lowest of: the active segment's base offset, the base
of the segment holding the high watermark or the first unstable offset (nothing at or above
it is read or rewritten: Kafka 2.8 stops at the last stable offset), and the base of the
first dirty segment with a record newer than ``min.compaction.lag.ms``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odradek.common import TopicPartition, now_ms
from odradek.log.checkpoints import CorruptCheckpointError, OffsetCheckpointFile
from odradek.log.cleaner.job import CleanResult
from odradek.log.log import Log

log = logging.getLogger(__name__)

__all__ = ["CLEANER_OFFSET_CHECKPOINT", "LogCleanerManager", "LogToClean", "cleanable_offsets"]

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

@dataclass(frozen=True, slots=True)
class LogToClean:
    """A compacted log's dirty section, as Kafka's ``LogToClean`` measures it."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool  # the first dirty segment is older than max.compaction.lag.ms

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.log.topic, self.log.partition)

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


def cleanable_offsets(lg: Log, checkpoint: int | None, now_ms: int) -> tuple[int, int, bool]:
    """Kafka's ``LogCleanerManager.cleanableOffsets``: ``(first dirty offset, first
    uncleanable offset, needs compaction now)``.

    A checkpoint below the log start offset or past the log end (the log was truncated or
    recreated) restarts cleaning from the log start offset.
    """
    start = lg.log_start_offset
    if checkpoint is None or checkpoint < start or checkpoint > lg.log_end_offset:
        first_dirty = start
    else:
        first_dirty = checkpoint
    segments = lg.segments
    uncleanable = segments[-1].base_offset  # the active segment is never cleaned
    # Kafka cleans up to the last stable offset, min(high watermark, first unstable offset):
    # an open transaction's data (or one whose marker is not yet replicated) may still be
    # aborted, so neither it nor anything after it is mapped or rewritten.
    for bound in (lg.high_watermark, lg.first_unstable_offset):
        if bound is not None:
            bound_segment = lg.segment_for(bound)
            if bound_segment is not None:
                uncleanable = min(uncleanable, bound_segment.base_offset)
    dirty = [s for s in segments[:-1] if lg.segment_end(s) > first_dirty]
    config = lg.config
    if config.min_compaction_lag_ms > 0:
        horizon = now_ms - config.min_compaction_lag_ms
        young = next((s for s in dirty if s.largest_timestamp > horizon), None)
        if young is not None:
            uncleanable = min(uncleanable, young.base_offset)
    needs_now = False
    if config.max_compaction_lag_ms < 2**63 - 1 and dirty:
        first_ts = dirty[0].first_batch_timestamp
        if first_ts < 0:
            first_ts = dirty[0].largest_timestamp
        needs_now = first_ts >= 0 and now_ms - first_ts > config.max_compaction_lag_ms
    return first_dirty, max(uncleanable, first_dirty), needs_now


class LogCleanerManager:
    """Which logs are dirty, which are being cleaned, and how far each has been cleaned."""

    def __init__(self, log_dirs: list[Path], logs: Callable[[], list[Log]],
                 time_ms: Callable[[], int] = now_ms) -> None:
        self.log_dirs = log_dirs
        self._logs = logs
        self._time_ms = time_ms
        self.checkpoints: dict[TopicPartition, int] = {}
        self.in_progress: set[TopicPartition] = set()
        self.tombstones_due: dict[TopicPartition, int] = {}
        self.dirtiest_log_cleanable_ratio = 0.0  # at the last grab_filthiest_log

    def load_checkpoints(self) -> None:
        for log_dir in self.log_dirs:
            try:
                self.checkpoints.update(OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT).read())
            except (CorruptCheckpointError, OSError) as e:
                log.warning("ignoring %s: %s", log_dir / CLEANER_OFFSET_CHECKPOINT, e)

    def write_checkpoints(self, only_dir: Path | None = None) -> None:
        """Write each log dir's ``cleaner-offset-checkpoint`` with the entries of the logs it
        holds now (a deleted partition's entry goes with it)."""
        live = {TopicPartition(lg.topic, lg.partition): lg for lg in self._logs()}
        for tp in [tp for tp in self.checkpoints if tp not in live]:
            del self.checkpoints[tp]
            self.tombstones_due.pop(tp, None)
        for log_dir in self.log_dirs:
            if only_dir is not None and log_dir != only_dir:
                continue
            OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT).write(
                {tp: offset for tp, offset in self.checkpoints.items() if live[tp].dir.parent == log_dir})

    def checkpoint_of(self, lg: Log) -> int | None:
        """The log's checkpoint, lowered to where it was truncated since (Kafka's
        maybeTruncateCheckpoint): data re-fetched after a truncation is dirty again."""
        tp = TopicPartition(lg.topic, lg.partition)
        checkpoint = self.checkpoints.get(tp)
        if lg.truncated_to is not None:
            if checkpoint is not None and checkpoint > lg.truncated_to:
                checkpoint = self.checkpoints[tp] = lg.truncated_to
            lg.truncated_to = None
        return checkpoint

    def dirtiness(self, lg: Log, now_ms: int) -> LogToClean:
        first_dirty, uncleanable, needs_now = cleanable_offsets(lg, self.checkpoint_of(lg), now_ms)
        clean = cleanable = 0
        for segment in lg.segments[:-1]:
            end = lg.segment_end(segment)
            if end <= first_dirty:
                clean += segment.size
            elif end <= uncleanable:
                cleanable += segment.size
        return LogToClean(lg, first_dirty, uncleanable, clean, cleanable, needs_now)

    def grab_filthiest_log(self) -> LogToClean | None:
        """Kafka's ``grabFilthiestCompactedLog``: the dirtiest eligible log, now marked in
        progress (call :meth:`done_cleaning` afterwards); None if nothing needs cleaning."""
        now = self._time_ms()
        best: LogToClean | None = None
        dirtiest = 0.0
        for lg in self._logs():
            tp = TopicPartition(lg.topic, lg.partition)
            if not lg.config.compact or tp in self.in_progress or len(lg.segments) < 2:
                continue
            ltc = self.dirtiness(lg, now)
            dirtiest = max(dirtiest, ltc.cleanable_ratio)
            due = self.tombstones_due.get(tp)
            eligible = (ltc.cleanable_bytes > 0 and (
                ltc.needs_compaction_now or ltc.cleanable_ratio > lg.config.min_cleanable_dirty_ratio))
            if not eligible and not (due is not None and due <= now and ltc.clean_bytes > 0):
                continue
            if best is None or ltc.cleanable_ratio > best.cleanable_ratio:
                best = ltc
        self.dirtiest_log_cleanable_ratio = dirtiest  # the max-dirty-percent gauge
        if best is not None:
            self.in_progress.add(best.tp)
        return best

    def done_cleaning(self, tp: TopicPartition, result: CleanResult | None, log_dir: Path) -> None:
        """A cleaning ended: record its end offset (if it was swapped in) and free the log."""
        self.in_progress.discard(tp)
        if result is None:
            return
        self.checkpoints[tp] = result.end_offset
        if result.tombstone_due_ms is None:
            self.tombstones_due.pop(tp, None)
        else:
            self.tombstones_due[tp] = result.tombstone_due_ms
        self.write_checkpoints(log_dir)
