"""Kafka's ``LogCleaner`` on the broker's side: the cleaner threads and the swap.

:class:`LogCleaner` runs ``log.cleaner.threads`` asyncio tasks, each with its own cleaner
process (see ``worker``). Each asks the :class:`~odradek.log.cleaner.manager.LogCleanerManager`
for the filthiest log, describes the part to clean as a
:class:`~odradek.log.cleaner.job.CleanJob`, waits for the process, and on the event loop
swaps the cleaned segments in (if the log still has the segments the job read), advances
the checkpoint and writes one line to ``log-cleaner.log``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path

from odradek import tasks
from odradek.common import now_ms
from odradek.config import CleanerConfig
from odradek.log.cleaner.cleaner import remove_cleaned
from odradek.log.cleaner.job import CleanJob, CleanResult, SegmentRef
from odradek.log.cleaner.manager import CLEANER_OFFSET_CHECKPOINT, LogCleanerManager, LogToClean
from odradek.log.cleaner.record_scanner import uses_compiled_scanner
from odradek.log.cleaner.worker import CleanerError, CleanerProcess
from odradek.log.log import Log
from odradek.log.segment import LogSegment

log = logging.getLogger(__name__)
# Kafka's log4j sends kafka.log.LogCleaner to log-cleaner.log: one summary line per cleaning.
summary_log = logging.getLogger("odradek.log_cleaner")

__all__ = ["LogCleaner"]


class LogCleaner:
    """Runs the cleaner threads (tasks with a process each) over a log manager's logs."""

    def __init__(self, config: CleanerConfig, log_dirs: list[Path], logs: Callable[[], list[Log]],
                 get_log: Callable[[str, int], Log | None], time_ms: Callable[[], int] = now_ms) -> None:
        self.config = config
        self.manager = LogCleanerManager(log_dirs, logs, time_ms)
        self._get_log = get_log
        self._time_ms = time_ms
        self._threads: list[tuple[asyncio.Task[None], CleanerProcess]] = []
        self._wake = asyncio.Event()
        self.last_run_ms = time_ms()  # when a cleaner thread last looked for work (time-since-last-run-ms)

    async def startup(self) -> None:
        self.manager.load_checkpoints()
        if uses_compiled_scanner():  # the cleaner processes, started from here, decide alike
            log.info("Cleaner: records are scanned by the compiled scanner (odradek.log.cleaner.native)")
        else:
            log.info("Cleaner: records are scanned in Python (the compiled scanner is not built: scripts/bootstrap)")
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
            self.last_run_ms = self._time_ms()
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

