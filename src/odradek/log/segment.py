"""Kafka's ``LogSegment``: one ``<base offset>.log`` file with its offset and time indexes,
and its transaction index (``.txnindex``: the aborted transactions whose ABORT marker is in
this segment; the file exists only once an entry was appended).

The log file is a plain concatenation of record batches exactly as produced (with offsets
assigned). Reads and writes go through one O_RDWR descriptor with ``pread``/``pwrite``, so
there is no file position to keep in sync and the descriptor can be handed to ``sendfile``.
Work is per batch header: a lookup reads a few KiB from the nearest index entry and walks
headers; nothing here parses records.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from odradek.log.abstract_index import IndexCorruptError, _pwrite_all
from odradek.log.offset_index import OffsetIndex
from odradek.log.time_index import TimeIndex
from odradek.log.transaction_index import TXN_INDEX_SUFFIX, AbortedTxn, TransactionIndex
from odradek.protocol.errors import CorruptMessageError, InvalidRecordError
from odradek.protocol.records import (
    HEADER_SIZE,
    NO_TIMESTAMP,
    RecordBatchHeader,
    check_crc,
    parse_header,
)

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"

_INT32_MAX = 2**31 - 1
_HEADER_CHUNK = 16 * 1024  # bytes read at a time when walking batch headers
_TAIL_BATCHES = 1024  # at most this many recently appended batches remembered per segment
_RECOVERY_CHUNK = 1024 * 1024  # bytes read at a time when checking whole batches

# (position in the appended bytes, batch size, last offset, max timestamp) per batch
BatchInfo = tuple[int, int, int, int]


def filename_prefix(offset: int) -> str:
    """Kafka's 20-digit, zero-padded file name for a base offset."""
    return f"{offset:020d}"


def scan_headers(fd: int, start: int, end: int, chunk: int = _HEADER_CHUNK
                 ) -> Iterator[tuple[int, RecordBatchHeader]]:
    """Yield ``(position, header)`` for the batches in ``[start, end)`` of a file.

    Reads ``chunk`` bytes at a time and parses only headers, so walking past a large batch
    costs one small read. A batch that runs past ``end`` ends the walk, as Kafka's
    FileLogInputStream ends at a partial batch (only a log the broker trusts can hold one:
    recovery truncates it); a malformed header raises CorruptMessageError.
    """
    buf = b""
    buf_start = start
    pos = start
    while pos < end:
        rel = pos - buf_start
        if rel + HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(chunk, end - pos), pos)
            buf_start, rel = pos, 0
        header = parse_header(buf, rel)
        if pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def scan_batches(fd: int, start: int, end: int
                 ) -> Iterator[tuple[int, RecordBatchHeader, memoryview]]:
    """Yield ``(position, header, batch bytes)`` for whole batches, CRC not yet checked."""
    buf = memoryview(b"")
    buf_start = start
    pos = start
    while pos < end:
        rel = pos - buf_start
        if rel + HEADER_SIZE > len(buf):
            buf = memoryview(os.pread(fd, min(_RECOVERY_CHUNK, end - pos), pos))
            buf_start, rel = pos, 0
        header = parse_header(buf, rel)
        size = header.size
        if pos + size > end:
            raise CorruptMessageError(f"batch at position {pos} runs past the end ({end})")
        if rel + size > len(buf):
            buf = memoryview(os.pread(fd, max(size, min(_RECOVERY_CHUNK, end - pos)), pos))
            buf_start, rel = pos, 0
        yield pos, header, buf[rel:rel + size]
        pos += size


class LogSegment:
    """One segment: its log file, offset index, time index and transaction index."""

    def __init__(self, directory: Path, base_offset: int, *, index_interval_bytes: int,
                 max_index_size: int, now_ms: int, roll_jitter_ms: int = 0,
                 suffix: str = "") -> None:
        prefix = filename_prefix(base_offset)
        self.base_offset = base_offset
        self.log_path = directory / f"{prefix}{LOG_SUFFIX}{suffix}"
        self.index = OffsetIndex(directory / f"{prefix}{INDEX_SUFFIX}{suffix}", base_offset,
                                 max_index_size)
        self.time_index = TimeIndex(directory / f"{prefix}{TIME_INDEX_SUFFIX}{suffix}",
                                    base_offset, max_index_size)
        self.txn_index = TransactionIndex(directory / f"{prefix}{TXN_INDEX_SUFFIX}{suffix}",
                                          base_offset)
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = now_ms
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self._bytes_since_last_index_entry = 0
        # Loaded lazily from the time index / the first batch, as Kafka does.
        self._max_timestamp: tuple[int, int] | None = None
        self._rolling_based_timestamp: int | None = None
        self._next_offset: int | None = None
        # The batches appended since the last offset index entry, as (last offset, position)
        # in two lists, covering the segment from the batch at _tail_base to its end: the
        # tail reads of caught-up followers and consumers find their batch here by bisection
        # instead of walking headers from the index entry.  Appends only; anything else
        # that changes the file clears it.
        self._tail_last: list[int] = []
        self._tail_positions: list[int] = []
        self._tail_base = 0

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"

    # ------------------------------------------------------------------ derived state

    @property
    def next_offset(self) -> int:
        """One past the last offset in this segment (the base offset when empty); in a
        segment the broker trusts with a malformed header (recovery truncates at one), one past
        the batch before it."""
        if self._next_offset is None:
            last = self.base_offset
            start = self.index.last_entry().position
            try:
                for _, header in scan_headers(self.fd, start, self.size):
                    last = header.next_offset
            except (CorruptMessageError, InvalidRecordError) as e:
                log.error("%s: the log ends at a corrupt batch: %s", self.log_path, e)
            self._next_offset = last
        return self._next_offset

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_ts()[0]

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._max_ts()[1]

    def _max_ts(self) -> tuple[int, int]:
        if self._max_timestamp is None:
            entry = self.time_index.last_entry()
            self._max_timestamp = (entry.timestamp, entry.offset)
        return self._max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """Kafka's ``largestTimestamp``: the max record timestamp, else the file's mtime."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else os.fstat(self.fd).st_mtime_ns // 1_000_000

    @property
    def first_batch_timestamp(self) -> int:
        """The first batch's max timestamp (Kafka's ``getFirstBatchTimestamp``), -1 if empty."""
        return self._rolling_timestamp()

    def _rolling_timestamp(self) -> int:
        if self._rolling_based_timestamp is None and self.size >= HEADER_SIZE:
            self._rolling_based_timestamp = parse_header(os.pread(self.fd, HEADER_SIZE, 0)
                                                         ).max_timestamp
        return NO_TIMESTAMP if self._rolling_based_timestamp is None else \
            self._rolling_based_timestamp

    def should_roll(self, *, messages_size: int, max_timestamp: int, max_offset: int,
                    now_ms: int, segment_bytes: int, segment_ms: int) -> bool:
        """Kafka's ``shouldRoll``: full by size or index, old by ``segment.ms``, or the new
        offsets do not fit a 32-bit relative offset."""
        if (self.size > segment_bytes - messages_size or self.index.is_full
                or self.time_index.is_full or max_offset - self.base_offset > _INT32_MAX):
            return True
        if self.size == 0:
            return False
        first = self._rolling_based_timestamp
        if first is None:
            first = self._rolling_timestamp()
        waited = max_timestamp - first if first >= 0 else now_ms - self.created_ms
        return waited > segment_ms - self.roll_jitter_ms

    # ------------------------------------------------------------------ writes

    def append(self, records: bytes | bytearray | memoryview, batches: Sequence[BatchInfo]) -> None:
        """Append whole batches (offsets already assigned) and index them.

        ``batches`` describes each batch in ``records``; an index entry is added at most once
        per ``index.interval.bytes``, pointing at the batch that crosses the interval.
        """
        position = self.size
        if position == 0 and batches:
            self._rolling_based_timestamp = batches[0][3]
            # A segment with data has its index files from the start (as Kafka creates them
            # with the segment), even if tail reads never look an offset up in them.
            self.index.load()
            self.time_index.load()
        _pwrite_all(self.fd, records, position)
        self.size = position + len(records)
        indexed = self._index_batches(position, batches)
        if batches:
            self._next_offset = batches[-1][2] + 1
            self._remember_tail(records, position, batches, indexed)

    def _remember_tail(self, records: bytes | bytearray | memoryview, position: int,
                       batches: Sequence[BatchInfo], indexed: int) -> None:
        tail_last, tail_positions = self._tail_last, self._tail_positions
        if not tail_last:
            rel = batches[0][0]
            self._tail_base = int.from_bytes(records[rel:rel + 8], "big", signed=True)
        for rel, _, last_offset, _ in batches:
            tail_last.append(last_offset)
            tail_positions.append(position + rel)
        # Keep what translate_offset would otherwise walk: from the last indexed batch on.
        drop = bisect_left(tail_positions, indexed) if indexed >= 0 else 0
        if len(tail_last) - drop > _TAIL_BATCHES:
            drop = len(tail_last) - _TAIL_BATCHES
        if drop:
            self._tail_base = tail_last[drop - 1] + 1
            del tail_last[:drop], tail_positions[:drop]

    def forget_tail(self) -> None:
        self._tail_last.clear()
        self._tail_positions.clear()

    def _index_batches(self, position: int, batches: Sequence[BatchInfo]) -> int:
        """Index the batches as the interval says; returns the position of the last batch
        indexed, or -1."""
        max_ts, max_ts_offset = self._max_ts()
        since = self._bytes_since_last_index_entry
        interval = self.index_interval_bytes
        indexed = -1
        for rel, size, last_offset, batch_max_ts in batches:
            if batch_max_ts > max_ts:
                max_ts, max_ts_offset = batch_max_ts, last_offset
            if since > interval:
                indexed = position + rel
                self.index.append(last_offset, indexed)
                self.time_index.maybe_append(max_ts, max_ts_offset)
                since = 0
            since += size
        self._bytes_since_last_index_entry = since
        self._max_timestamp = (max_ts, max_ts_offset)
        return indexed

    def update_txn_index(self, aborted_txn: AbortedTxn) -> None:
        """Record a transaction aborted by a marker in this segment (Kafka's
        ``updateTxnIndex``); the file is created on the first entry."""
        self.txn_index.append(aborted_txn)

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= ``offset`` and the aborted transactions
        whose marker is among them; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        self.forget_tail()
        position, header = found
        self.index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        os.ftruncate(self.fd, position)
        removed = self.size - position
        self.size = position
        self._next_offset = header.base_offset if position else self.base_offset
        self._max_timestamp = None  # back to the time index's last entry, as Kafka does
        self._bytes_since_last_index_entry = 0
        if position == 0:
            self._rolling_based_timestamp = None
        return removed

    def recover(self, on_batch: Callable[[RecordBatchHeader], None] | None = None) -> int:
        """Rebuild both indexes from the log, checking every batch (bounds, magic, CRC,
        offsets); truncate at the first bad batch. Returns the number of bytes removed.
        The transaction index needs the producer state before this segment: the log
        rebuilds it (``Log`` replays the producers, see Kafka's ``LogSegment.recover``)."""
        self.forget_tail()
        self.index.reset()
        self.time_index.reset()
        self._max_timestamp = (NO_TIMESTAMP, self.base_offset)
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None
        file_size = os.fstat(self.fd).st_size
        valid = 0
        expected = self.base_offset
        try:
            for position, header, batch in scan_batches(self.fd, 0, file_size):
                check_crc(batch, 0, header)
                if header.base_offset < expected or header.last_offset - self.base_offset > _INT32_MAX:
                    raise CorruptMessageError(f"batch at {position} has out-of-order offsets")
                if position == 0:
                    self._rolling_based_timestamp = header.max_timestamp
                self._index_batches(0, ((position, header.size, header.last_offset,
                                         header.max_timestamp),))
                if on_batch is not None:
                    on_batch(header)
                expected = header.next_offset
                valid = position + header.size
        except (CorruptMessageError, InvalidRecordError):
            pass
        if valid != file_size:
            os.ftruncate(self.fd, valid)
        self.size = valid
        self._next_offset = expected
        return file_size - valid

    def sanity_check(self) -> None:
        """Raise IndexCorruptError if an index file does not fit this log file."""
        if self.size and not (self.index.path.exists() and self.time_index.path.exists()):
            raise IndexCorruptError(f"index files of {self.log_path} are missing")
        self.index.sanity_check(self.size)
        self.time_index.sanity_check(lambda: self.next_offset, lambda: self.first_batch_timestamp)
        self.txn_index.sanity_check()

    def on_become_inactive(self) -> None:
        """Called at roll: index the final max timestamp so time lookups find it."""
        max_ts, offset = self._max_ts()
        if max_ts >= 0:
            self.time_index.maybe_append(max_ts, offset)
        self.index._write_pending()
        self.time_index._write_pending()

    def flush(self) -> None:
        """fsync the log and its indexes."""
        os.fsync(self.fd)
        self.index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    # ------------------------------------------------------------------ reads

    def translate_offset(self, offset: int, starting_position: int = 0
                         ) -> tuple[int, RecordBatchHeader] | None:
        """The first batch at or after ``starting_position`` whose last offset is >=
        ``offset``: ``(position, header)``, or None if there is none."""
        tail_last = self._tail_last
        if tail_last and offset >= self._tail_base and starting_position <= self._tail_positions[0]:
            i = bisect_left(tail_last, offset)
            if i == len(tail_last):
                return None
            position = self._tail_positions[i]
            return position, parse_header(os.pread(self.fd, HEADER_SIZE, position))
        start = max(self.index.lookup(offset).position, starting_position)
        for position, header in scan_headers(self.fd, start, self.size):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False) -> tuple[int, int] | None:
        """The file region ``(position, size)`` of whole batches from the batch holding
        ``start_offset``, at most ``max_size`` bytes (or the first batch whole, if
        ``min_one_message``) and ending at or before ``max_position``.

        None when no batch in this segment reaches ``start_offset``.
        """
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, header = found
        end_bound = self.size if max_position is None else min(max_position, self.size)
        limit = max(max_size, header.size) if min_one_message else max_size
        limit = min(limit, end_bound - position)
        if limit < header.size:
            return position, 0
        return position, self._boundary_at_or_below(position, position + limit,
                                                     end_bound) - position

    def _boundary_at_or_below(self, start: int, limit: int, end_bound: int) -> int:
        """The last batch boundary in ``[start, limit]`` (limit <= end_bound)."""
        if limit == end_bound:
            return limit  # segment end or a max position: already a boundary
        position = max(start, self.index.lookup_position(limit))
        for batch_position, header in scan_headers(self.fd, position, end_bound):
            if batch_position + header.size > limit:
                return batch_position
        return end_bound

    def read_bytes(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def find_batch_by_timestamp(self, timestamp: int, starting_offset: int
                                ) -> tuple[int, RecordBatchHeader] | None:
        """The first batch with ``max_timestamp >= timestamp`` and a last offset >=
        ``starting_offset``, found through the time index then the offset index."""
        from_time = self.time_index.lookup(timestamp).offset
        position = self.index.lookup(max(from_time, starting_offset)).position
        for batch_position, header in scan_headers(self.fd, position, self.size):
            if header.max_timestamp >= timestamp and header.last_offset >= starting_offset:
                return batch_position, header
        return None

    def iter_headers(self, start_offset: int | None = None) -> Iterator[RecordBatchHeader]:
        """Batch headers from the batch holding ``start_offset`` (or the start) to the end."""
        position = 0
        if start_offset is not None:
            found = self.translate_offset(start_offset)
            if found is None:
                return
            position = found[0]
        for _, header in scan_headers(self.fd, position, self.size, chunk=256 * 1024):
            yield header

    # ------------------------------------------------------------------ files

    def close(self) -> None:
        """Index the final max timestamp (as Kafka's close does) and release descriptors."""
        if self.fd < 0:
            return
        max_ts, offset = self._max_ts()
        if max_ts >= 0:
            self.time_index.maybe_append(max_ts, offset)
        self.index.close()
        self.time_index.close()
        self.txn_index.close()
        os.close(self.fd)
        self.fd = -1

    def close_handlers(self) -> None:
        """Release the descriptor and write nothing (its directory failed)."""
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1

    def add_suffix(self, suffix: str) -> None:
        """Rename all files to end in ``suffix`` (open descriptors stay valid)."""
        self.change_suffix("", suffix)

    def change_suffix(self, old_suffix: str, new_suffix: str) -> None:
        """Rename all files (log, offset, time and transaction indexes; a ``.txnindex``
        not yet created only changes its path) from ending in ``old_suffix`` to
        ``new_suffix`` (either may be empty; the log file goes last, so a crash never leaves
        it renamed without its indexes). Open descriptors stay valid."""
        def renamed(path: Path) -> Path:
            stem = path.name[:len(path.name) - len(old_suffix)] if old_suffix else path.name
            return path.with_name(stem + new_suffix)

        for idx in (self.index, self.time_index, self.txn_index):
            if idx.path.exists():
                idx.rename(renamed(idx.path))
            else:
                idx.path = renamed(idx.path)
        target = renamed(self.log_path)
        os.rename(self.log_path, target)
        self.log_path = target

    @property
    def last_modified_ms(self) -> int:
        """The log file's modification time (Kafka's ``lastModified``)."""
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    def update_directory(self, directory: Path) -> None:
        """Follow a rename of the partition directory (descriptors stay valid)."""
        self.log_path = directory / self.log_path.name
        self.index.path = directory / self.index.path.name
        self.time_index.path = directory / self.time_index.path.name
        self.txn_index.path = directory / self.txn_index.path.name

    def delete(self) -> None:
        """Close descriptors and unlink all files."""
        self.index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        try:
            os.unlink(self.log_path)
        except FileNotFoundError:
            pass
