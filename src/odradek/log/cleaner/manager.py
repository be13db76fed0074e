"""Kafka's ``LogCleanerManager`` and ``LogCleaner`` on the broker's side.

:class:`LogCleanerManager` (no I/O but the checkpoint files) decides what to clean: for
every log whose ``cleanup.policy`` includes ``compact`` it finds the dirty section (from the
``cleaner-offset-checkpoint`` entry to the first uncleanable offset) and picks the log with
the highest dirty ratio above ``min.cleanable.dirty.ratio``, or one whose first dirty
segment is older than ``max.compaction.lag.ms``, or one holding tombstones that are due for
removal.

:class:`LogCleaner` runs ``log.cleaner.threads`` asyncio tasks, each with its own cleaner
process (see ``worker``): it describes the chosen part of the log as a
:class:`~odradek.log.cleaner.job.CleanJob`, waits for the process, and on the event loop
swaps the cleaned segments in (if the log still has the segments the job read), advances
the checkpoint and writes one line to ``log-cleaner.log``.

The first uncleanable offset is the lowest of: the active segment's base offset, the base
of the segment holding the high watermark or the first unstable offset (nothing at or above
it is read or rewritten: Kafka 2.8 stops at the last stable offset), and the base of the
first dirty segment with a record newer than ``min.compaction.lag.ms``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odradek import tasks
from odradek.common import TopicPartition
from odradek.config import CleanerConfig
from odradek.log.checkpoints import CorruptCheckpointError, OffsetCheckpointFile
from odradek.log.cleaner.cleaner import remove_cleaned
from odradek.log.cleaner.job import CleanJob, CleanResult, SegmentRef
from odradek.log.cleaner.worker import CleanerError, CleanerProcess
from odradek.log.log import Log
from odradek.log.segment import LogSegment

log = logging.getLogger(__name__)
# Kafka's log4j sends kafka.log.LogCleaner to log-cleaner.log: one summary line per cleaning.
summary_log = logging.getLogger("odradek.log_cleaner")

__all__ = ["CLEANER_OFFSET_CHECKPOINT", "LogCleaner", "LogCleanerManager", "LogToClean",
           "cleanable_offsets"]

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


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
                 time_ms: Callable[[], int] = _now_ms) -> None:
        self.log_dirs = log_dirs
        self._logs = logs
        self._time_ms = time_ms
        self.checkpoints: dict[TopicPartition, int] = {}
        self.in_progress: set[TopicPartition] = set()
        self.tombstones_due: dict[TopicPartition, int] = {}

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
        for lg in self._logs():
            tp = TopicPartition(lg.topic, lg.partition)
            if not lg.config.compact or tp in self.in_progress or len(lg.segments) < 2:
                continue
            ltc = self.dirtiness(lg, now)
            due = self.tombstones_due.get(tp)
            eligible = (ltc.cleanable_bytes > 0 and (
                ltc.needs_compaction_now or ltc.cleanable_ratio > lg.config.min_cleanable_dirty_ratio))
            if not eligible and not (due is not None and due <= now and ltc.clean_bytes > 0):
                continue
            if best is None or ltc.cleanable_ratio > best.cleanable_ratio:
                best = ltc
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


class LogCleaner:
    """Runs the cleaner threads (tasks with a process each) over a log manager's logs."""

    def __init__(self, config: CleanerConfig, log_dirs: list[Path], logs: Callable[[], list[Log]],
                 get_log: Callable[[str, int], Log | None], time_ms: Callable[[], int] = _now_ms) -> None:
        self.config = config
        self.manager = LogCleanerManager(log_dirs, logs, time_ms)
        self._get_log = get_log
        self._time_ms = time_ms
        self._threads: list[tuple[asyncio.Task[None], CleanerProcess]] = []
        self._wake = asyncio.Event()
        self.cleanings = 0  # completed swaps, for tests and tools

    async def startup(self) -> None:
        self.manager.load_checkpoints()
        self._resize()

    async def shutdown(self) -> None:
        threads, self._threads = self._threads, []
        for task, process in threads:
            await tasks.cancel_and_wait(task)
            await process.stop()
        try:
            self.manager.write_checkpoints()
        except OSError as e:
            log.error("could not write %s: %s", CLEANER_OFFSET_CHECKPOINT, e)

    def reconfigure(self, config: CleanerConfig) -> None:
        """Apply changed ``log.cleaner.*`` settings (Kafka's LogCleaner.reconfigure): the
        number of threads follows at once, the rest from the next cleaning on."""
        self.config = config
        self._resize()
        self._wake.set()

    def wake(self) -> None:
        """Look for work now instead of after ``log.cleaner.backoff.ms``."""
        self._wake.set()

    def _resize(self) -> None:
        wanted = self.config.threads if self.config.enable else 0
        while len(self._threads) < wanted:
            i = len(self._threads)
            process = CleanerProcess(f"kafka-log-cleaner-thread-{i}")
            task = tasks.start(self._run(i, process), name=f"log-cleaner-{i}")
            self._threads.append((task, process))
        while len(self._threads) > wanted:
            task, process = self._threads.pop()
            tasks.start(self._stop_thread(task, process), name="log-cleaner-stop")

    @staticmethod
    async def _stop_thread(task: asyncio.Task[None], process: CleanerProcess) -> None:
        await tasks.cancel_and_wait(task)
        await process.stop()

    async def _run(self, thread: int, process: CleanerProcess) -> None:
        while True:
            ltc = self.manager.grab_filthiest_log()
            if ltc is None:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), self.config.backoff_ms / 1000)
                except TimeoutError:
                    pass
                continue
            result: CleanResult | None = None
            try:
                result = await self._clean(thread, process, ltc)
            except CleanerError as e:
                log.error("cleaning %s failed: %s", ltc.tp, e)
            except OSError as e:
                log.error("cleaning %s failed: %s", ltc.tp, e)
            finally:
                try:
                    self.manager.done_cleaning(ltc.tp, result, ltc.log.dir.parent)
                except OSError as e:
                    log.error("could not write %s: %s", CLEANER_OFFSET_CHECKPOINT, e)

    def make_job(self, ltc: LogToClean) -> tuple[CleanJob, list[tuple[LogSegment, int]]]:
        """The job for ``ltc`` and the segments (with their sizes) it reads."""
        lg, config = ltc.log, ltc.log.config
        segments = lg.cleanable_segments(ltc.first_uncleanable_offset)
        refs = tuple(SegmentRef(s.base_offset, str(s.log_path), s.size, lg.segment_end(s),
                                s.last_modified_ms) for s in segments)
        # Kafka's buildOffsetMap and cleanSegments collect these from the txnindexes.
        aborted = (tuple(lg.collect_aborted_transactions(refs[0].base_offset,
                                                         ltc.first_uncleanable_offset))
                   if refs else ())
        producers = lg.producer_state.producers
        rate = self.config.io_max_bytes_per_second
        job = CleanJob(
            topic=lg.topic, partition=lg.partition, directory=str(lg.dir), segments=refs,
            first_dirty_offset=ltc.first_dirty_offset,
            first_uncleanable_offset=ltc.first_uncleanable_offset, now_ms=self._time_ms(),
            delete_retention_ms=config.delete_retention_ms, segment_bytes=config.segment_bytes,
            max_index_bytes=config.segment_index_bytes, index_interval_bytes=config.index_interval_bytes,
            max_map_entries=self.config.max_map_entries(),
            io_max_bytes_per_second=rate if rate < 1e300 else math.inf,
            producer_last_offsets={pid: entry.last_offset for pid, entry in producers.items()
                                   if entry.last_offset >= 0},
            marker_only_producers={pid: entry.producer_epoch for pid, entry in producers.items()
                                   if entry.last_offset < 0},
            aborted_txns=aborted)
        return job, [(s, s.size) for s in segments]

    async def _clean(self, thread: int, process: CleanerProcess, ltc: LogToClean) -> CleanResult | None:
        job, read = self.make_job(ltc)
        if not read:
            return None
        started = time.monotonic()
        try:
            result = await process.clean(job)
        except BaseException:
            _remove_cleaned(ltc.log.dir, job)
            raise
        lg = ltc.log
        if self._get_log(lg.topic, lg.partition) is not lg or not lg.holds_segments(read):
            log.info("discarding the cleaning of %s: its segments changed meanwhile", ltc.tp)
            _remove_cleaned(lg.dir, job)
            return None
        by_base = {s.base_offset: s for s, _ in read}
        before = sum(size for _, size in read)
        lg.replace_segments([([by_base[b] for b in group.replaced], group.base_offset)
                             for group in result.groups])
        self.cleanings += 1
        _log_summary(thread, ltc, job, result, before, time.monotonic() - started)
        return result


def _remove_cleaned(directory: Path, job: CleanJob) -> None:
    for ref in job.segments:
        try:
            remove_cleaned(directory, ref.base_offset)
        except OSError as e:
            log.warning("could not remove a cleaned file of %s: %s", directory, e)


def _mb(n: int) -> str:
    return f"{n / 1_000_000:,.1f} MB"


def _log_summary(thread: int, ltc: LogToClean, job: CleanJob, result: CleanResult, before: int,
                 elapsed_s: float) -> None:
    """Kafka's cleaning summary, on one line."""
    stats = result.stats
    after = sum(g.size for g in result.groups)
    elapsed = max(elapsed_s, 1e-9)
    reduction = 100 * (1 - after / before) if before else 0.0
    fewer = 100 * (1 - stats.messages_written / stats.messages_read) if stats.messages_read else 0.0
    summary_log.info(
        "Log cleaner thread %d cleaned log %s-%d (dirty section = [%d, %d]): %s of log processed "
        "in %.1f seconds (%.1f MB/sec); indexed %s in %.1f seconds, buffer utilization %.1f%%; "
        "start size %s (%d messages), end size %s (%d messages); %.1f%% size reduction "
        "(%.1f%% fewer messages)",
        thread, job.topic, job.partition, ltc.first_dirty_offset, result.end_offset,
        _mb(stats.bytes_read), elapsed, stats.bytes_read / 1_000_000 / elapsed,
        _mb(stats.map_bytes_read), stats.map_seconds, 100 * stats.buffer_utilization,
        _mb(before), stats.messages_read, _mb(after), stats.messages_written, reduction, fewer)

