"""Runs one :class:`~odradek.log.cleaner.job.CleanJob` over segment files: the I/O around
:class:`~odradek.log.cleaner.cleaning.Cleaning` (Kafka's ``LogCleaner.Cleaner``).

Meant for a cleaner process started by the broker: :func:`clean` reads the job's segment
files (``[0, size)`` of each, with ``pread``), writes each group of cleaned segments as
``<base>.log.cleaned`` with its ``.index.cleaned`` and ``.timeindex.cleaned`` (and
``.txnindex.cleaned`` when it keeps ABORT markers of transactions with data left, as
Kafka's ``cleanedIndex``), fsyncs them,
gives the log file the mtime of the last segment it replaces (Kafka's
``cleaned.lastModified = modified``, so retention and tombstone expiry see the data's age,
not the cleaning's) and returns the :class:`~odradek.log.cleaner.job.CleanResult`. It
changes nothing else: swapping the files in is the broker's job.

Reads and writes are throttled to ``log.cleaner.io.max.bytes.per.second`` like Kafka's
``Throttler``. Nothing here imports the broker, and the imports are the log layer's own, so
a spawned process starts quickly.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from odradek.log.cleaner.cleaning import Cleaning
from odradek.log.cleaner.job import CLEANED_SUFFIX, CleanJob, CleanResult, SegmentRef
from odradek.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    filename_prefix,
)
from odradek.log.transaction_index import TXN_INDEX_SUFFIX, TransactionIndex
from odradek.protocol.errors import CorruptMessageError
from odradek.protocol.records import HEADER_SIZE, LOG_OVERHEAD

__all__ = ["Throttler", "clean", "remove_cleaned"]

READ_CHUNK_BYTES = 4 * 1024 * 1024  # bytes read at a time (whole batches are processed)
_BATCH_LENGTH = struct.Struct(">i")  # at byte 8 of a batch


class Throttler:
    """Kafka's ``kafka.utils.Throttler``: once a check interval has passed, sleep as long
    as needed to bring the rate observed over it down to ``rate`` (bytes per second)."""

    def __init__(self, rate: float, *, check_interval_s: float = 0.3,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = rate
        self.check_interval_s = check_interval_s
        self._clock = clock
        self._sleep = sleep
        self._period_start = clock()
        self._observed = 0.0

    def maybe_throttle(self, observed: float) -> None:
        if self.rate == float("inf"):
            return
        self._observed += observed
        elapsed = self._clock() - self._period_start
        if elapsed > self.check_interval_s and self._observed > 0:
            if self._observed / elapsed > self.rate:
                pause = self._observed / self.rate - elapsed
                if pause > 0:
                    self._sleep(pause)
            self._period_start = self._clock()
            self._observed = 0.0


def clean(job: CleanJob, *, clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep,
          read_chunk_bytes: int = READ_CHUNK_BYTES) -> CleanResult:
    """Clean ``job``'s segments into ``.cleaned`` files in its directory (see the module
    docstring). Raises CorruptMessageError for a segment that is not whole batches."""
    throttler = Throttler(job.io_max_bytes_per_second, clock=clock, sleep=sleep)
    cleaning = Cleaning(job)
    started = clock()
    for segment in cleaning.dirty_segments:
        full = False
        for data, end in _read_batches(segment, read_chunk_bytes, throttler):
            full = cleaning.map(data, end)
            if full:
                break
        if full:
            break
    mapped = clock()
    sizes: dict[int, int] = {}
    try:
        for group in cleaning.groups:
            sizes[group[0].base_offset] = _write_group(job, cleaning, group, read_chunk_bytes,
                                                       throttler)
    except BaseException:
        for base in sizes:  # no half cleaning left behind for the broker to find
            remove_cleaned(Path(job.directory), base)
        raise
    return cleaning.result(sizes, map_seconds=mapped - started, clean_seconds=clock() - mapped)


def _write_group(job: CleanJob, cleaning: Cleaning, group: tuple[SegmentRef, ...],
                 read_chunk_bytes: int, throttler: Throttler) -> int:
    """Write the cleaned segment replacing ``group``; returns its size."""
    directory = Path(job.directory)
    base = group[0].base_offset
    remove_cleaned(directory, base)  # an earlier cleaning's leftovers
    cleaned = LogSegment(directory, base, index_interval_bytes=job.index_interval_bytes,
                         max_index_size=job.max_index_bytes, now_ms=job.now_ms,
                         suffix=CLEANED_SUFFIX)
    # The aborted transactions whose ABORT markers this group keeps with data (Kafka's
    # cleanedIndex); the file exists only when there is one.
    txn_index = TransactionIndex(
        directory / f"{filename_prefix(base)}{TXN_INDEX_SUFFIX}{CLEANED_SUFFIX}", base)
    try:
        cleaned.index.reset()  # creates both index files, so all three exist even when empty
        cleaned.time_index.reset()
        for segment in group:
            for data, end in _read_batches(segment, read_chunk_bytes, throttler):
                out = cleaning.clean(segment, data, end)
                if out.batches:
                    cleaned.append(out.data, out.batches)
                    throttler.maybe_throttle(len(out.data))
                for aborted in out.aborted:
                    txn_index.append(aborted)
        cleaned.on_become_inactive()
        cleaned.flush()
        txn_index.flush()
        size = cleaned.size
        cleaned.close()
        txn_index.close()
    except BaseException:
        cleaned.delete()
        txn_index.path.unlink(missing_ok=True)
        raise
    mtime_ns = group[-1].last_modified_ms * 1_000_000
    os.utime(cleaned.log_path, ns=(mtime_ns, mtime_ns))
    return size


def remove_cleaned(directory: Path, base: int) -> None:
    """Remove the ``.cleaned`` files of the segment at ``base`` (a cleaning that failed, was
    abandoned or left by a killed cleaner)."""
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        (directory / f"{filename_prefix(base)}{suffix}{CLEANED_SUFFIX}").unlink(missing_ok=True)


def _read_batches(segment: SegmentRef, chunk_bytes: int, throttler: Throttler
                  ) -> Iterator[tuple[bytes, int]]:
    """``(data, end)`` chunks of ``segment``'s log file whose ``data[:end]`` is whole
    batches, in order, covering ``[0, segment.size)``."""
    fd = os.open(segment.log_path, os.O_RDONLY)
    try:
        pos = 0
        size = segment.size
        while pos < size:
            data = os.pread(fd, min(chunk_bytes, size - pos), pos)
            end = _whole_batches(data)
            if end == 0:  # one batch larger than a chunk: read it whole
                if len(data) < HEADER_SIZE:
                    raise CorruptMessageError(f"{segment.log_path}: truncated batch at {pos}")
                need = _BATCH_LENGTH.unpack_from(data, 8)[0] + LOG_OVERHEAD
                if pos + need > size:
                    raise CorruptMessageError(f"{segment.log_path}: batch at {pos} runs past "
                                              f"the end ({size})")
                data = os.pread(fd, need, pos)
                end = len(data)
            throttler.maybe_throttle(end)
            yield data, end
            pos += end
    finally:
        os.close(fd)


def _whole_batches(data: bytes) -> int:
    """How many leading bytes of ``data`` are whole batches (by their length fields)."""
    pos = 0
    end = len(data)
    unpack = _BATCH_LENGTH.unpack_from
    while end - pos >= LOG_OVERHEAD:
        size = unpack(data, pos + 8)[0] + LOG_OVERHEAD
        if size < HEADER_SIZE:  # not a batch: let the parser say why
            return pos if pos else end
        if pos + size > end:
            break
        pos += size
    return pos
