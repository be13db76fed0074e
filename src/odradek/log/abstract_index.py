"""What the offset index and the time index share: a file of fixed-size big-endian entries
with an in-memory copy for binary search.

Kafka memory-maps and preallocates its index files; odradek keeps the entries in two
``array`` columns and appends new entries to the file in batches (on flush, roll, close or
every ``_WRITE_BATCH`` entries), so the append path costs no syscall per entry. Indexes of
segments past the recovery point are rebuilt after a crash, so entries that never reached
the file are never missed. Like Kafka's ``LazyIndex``, the file is read on first use, so start-up does not read the indexes of segments nobody
looks at. No file descriptor is held between uses (Kafka closes its index files once they
are mapped): a broker with 10,000 partitions would otherwise hold three descriptors per
segment.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

_WRITE_BATCH = 512  # entries buffered before they are written out


class IndexCorruptError(Exception):
    """An index file fails its sanity check; the segment rebuilds it from the log."""


class AbstractIndex:
    """Entries ``(key, value)``: keys strictly increasing, values non-decreasing."""

    entry: struct.Struct  # set by subclasses
    key_type = "i"
    value_type = "i"

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(max_index_size // self.entry.size, 1)
        self._loaded = False
        self._keys = array(self.key_type)
        self._values = array(self.value_type)
        self._pending = bytearray()
        self._file_size = 0

    # -- subclasses: bulk decode of the file (an entry is ``entry.pack(key, value)``)

    def _decode(self, data: bytes) -> tuple[array, array]:
        raise NotImplementedError

    # -- loading

    def _open(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    def load(self) -> None:
        """Read the entries (creating the file if there is none yet), if not done already."""
        if not self._loaded:
            self._ensure_loaded()

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        fd = self._open()
        try:
            size = os.fstat(fd).st_size
            usable = size - size % self.entry.size  # a torn last entry is dropped
            if usable:
                self._keys, self._values = self._decode(os.pread(fd, usable, 0))
            if usable != size:
                os.ftruncate(fd, usable)
        finally:
            os.close(fd)
        self._file_size = usable
        self._loaded = True

    @property
    def keys(self) -> array:
        if not self._loaded:
            self._ensure_loaded()
        return self._keys

    @property
    def values(self) -> array:
        if not self._loaded:
            self._ensure_loaded()
        return self._values

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def is_full(self) -> bool:
        return len(self.keys) >= self.max_entries

    def _append(self, key: int, value: int) -> None:
        if not self._loaded:
            self._ensure_loaded()
        self._keys.append(key)
        self._values.append(value)
        self._pending += self.entry.pack(key, value)
        if len(self._pending) >= _WRITE_BATCH * self.entry.size:
            self._write_pending()

    def _write_pending(self, fd: int = -1) -> None:
        if not self._pending:
            return
        own = fd < 0
        if own:
            fd = self._open()
        try:
            _pwrite_all(fd, self._pending, self._file_size)
        finally:
            if own:
                os.close(fd)
        self._file_size += len(self._pending)
        self._pending.clear()

    @staticmethod
    def _floor(column: array, target: int) -> int:
        """Index of the last entry whose ``column`` value is <= target, or -1."""
        return bisect.bisect_right(column, target) - 1

    def _truncate_entries(self, count: int) -> None:
        """Keep the first ``count`` entries."""
        self._ensure_loaded()
        if count >= len(self._keys):
            return
        self._write_pending()
        del self._keys[count:]
        del self._values[count:]
        self._file_size = count * self.entry.size
        os.truncate(self.path, self._file_size)

    def _last_raw(self) -> tuple[int, int] | None:
        """The last entry as stored, reading only the file's tail if it is not loaded, so
        start-up checks and retention need not load whole indexes."""
        tail = self._tail(1)[1]
        return tail[-1] if tail else None

    def _sane_tail(self) -> list[tuple[int, int]]:
        """The last two entries (fewer if there are not), for a sanity check:
        IndexCorruptError if the file is not whole entries (Kafka's check: a torn or padded
        file lies about the rest too) or if their keys do not increase (one step beyond
        Kafka's: a zeroed or preallocated tail, whose last entry would otherwise be trusted)."""
        size, tail = self._tail(2)
        if size % self.entry.size:
            raise IndexCorruptError(f"{self.path}: its size {size} is no multiple of the entry "
                                    f"size {self.entry.size}")
        if len(tail) == 2 and tail[1][0] <= tail[0][0]:
            raise IndexCorruptError(f"{self.path}: its last two entries {tail} do not increase")
        return tail

    def _tail(self, count: int) -> tuple[int, list[tuple[int, int]]]:
        """(the file's size, its last ``count`` whole entries); loaded entries are what is
        stored."""
        if self._loaded:
            n = len(self._keys)
            return self._file_size, [(self._keys[i], self._values[i]) for i in range(max(n - count, 0), n)]
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return 0, []
        try:
            size = os.fstat(fd).st_size
            usable = size - size % self.entry.size
            start = max(usable - count * self.entry.size, 0)
            raw = os.pread(fd, usable - start, start) if usable else b""
        finally:
            os.close(fd)
        return size, list(self.entry.iter_unpack(raw))

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._pending.clear()
        self._keys = array(self.key_type)
        self._values = array(self.value_type)
        self._file_size = 0
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        self._loaded = True

    def flush(self) -> None:
        """Write buffered entries and fsync the file."""
        if self._loaded:
            fd = self._open()
            try:
                self._write_pending(fd)
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        """Write buffered entries and forget the loaded ones (read again on next use)."""
        if self._loaded:
            self._write_pending()
            self._loaded = False
            self._keys = array(self.key_type)
            self._values = array(self.value_type)

    def rename(self, path: Path) -> None:
        os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        """Unlink the file."""
        self._loaded = False
        self._pending.clear()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def _pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written
