"""What the offset index and the time index share: a file of fixed-size big-endian entries
with an in-memory copy for binary search.

Kafka memory-maps and preallocates its index files; odradek keeps the entries in two
``array`` columns and appends new entries to the file in batches (on flush, roll, close or
every ``_WRITE_BATCH`` entries), so the append path costs no syscall per entry. Indexes of
segments past the recovery point are rebuilt after a crash, so entries that never reached
the file are never missed. Like Kafka's ``LazyIndex``, the file is opened and read on first
use, so start-up does not read the indexes of segments nobody looks at.
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
        self._fd = -1
        self._keys = array(self.key_type)
        self._values = array(self.value_type)
        self._pending = bytearray()
        self._file_size = 0

    # -- subclasses: bulk decode of the file, encode of one entry

    def _decode(self, data: bytes) -> tuple[array, array]:
        raise NotImplementedError

    def _encode(self, key: int, value: int) -> bytes:
        raise NotImplementedError

    # -- loading

    def _ensure_open(self) -> None:
        if self._fd >= 0:
            return
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        size = os.fstat(self._fd).st_size
        usable = size - size % self.entry.size  # a torn last entry is dropped
        if usable:
            self._keys, self._values = self._decode(os.pread(self._fd, usable, 0))
        if usable != size:
            os.ftruncate(self._fd, usable)
        self._file_size = usable

    @property
    def keys(self) -> array:
        if self._fd < 0:
            self._ensure_open()
        return self._keys

    @property
    def values(self) -> array:
        if self._fd < 0:
            self._ensure_open()
        return self._values

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def is_full(self) -> bool:
        return len(self.keys) >= self.max_entries

    def _append(self, key: int, value: int) -> None:
        if self._fd < 0:
            self._ensure_open()
        self._keys.append(key)
        self._values.append(value)
        self._pending += self._encode(key, value)
        if len(self._pending) >= _WRITE_BATCH * self.entry.size:
            self._write_pending()

    def _write_pending(self) -> None:
        if self._pending:
            _pwrite_all(self._fd, self._pending, self._file_size)
            self._file_size += len(self._pending)
            self._pending.clear()

    @staticmethod
    def _floor(column: array, target: int) -> int:
        """Index of the last entry whose ``column`` value is <= target, or -1."""
        return bisect.bisect_right(column, target) - 1

    def _truncate_entries(self, count: int) -> None:
        """Keep the first ``count`` entries."""
        self._ensure_open()
        if count >= len(self._keys):
            return
        self._write_pending()
        del self._keys[count:]
        del self._values[count:]
        self._file_size = count * self.entry.size
        os.ftruncate(self._fd, self._file_size)

    def _last_raw(self) -> tuple[int, int] | None:
        """The last entry as stored, reading only the file's tail if it is not loaded, so
        start-up checks and retention need not load whole indexes."""
        if self._fd >= 0:
            return (self._keys[-1], self._values[-1]) if self._keys else None
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            size -= size % self.entry.size
            raw = os.pread(fd, self.entry.size, size - self.entry.size) if size else b""
        finally:
            os.close(fd)
        return self.entry.unpack(raw) if raw else None

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._ensure_open()
        self._pending.clear()
        self._keys = array(self.key_type)
        self._values = array(self.value_type)
        self._file_size = 0
        os.ftruncate(self._fd, 0)

    def flush(self) -> None:
        """Write buffered entries and fsync the file."""
        if self._fd >= 0:
            self._write_pending()
            os.fsync(self._fd)

    def close(self) -> None:
        """Write buffered entries and release the file descriptor (reopened on next use)."""
        if self._fd >= 0:
            self._write_pending()
            os.close(self._fd)
            self._fd = -1
            self._keys = array(self.key_type)
            self._values = array(self.value_type)

    def rename(self, path: Path) -> None:
        os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        """Close and unlink the file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
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
