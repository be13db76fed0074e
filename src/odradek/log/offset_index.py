"""Kafka's ``OffsetIndex``: a sparse map from offset to byte position in a segment.

File format (``<base offset>.index``): 8-byte entries, relative offset int32 + position
int32, big-endian, both strictly increasing. One entry per ``index.interval.bytes`` of log
data; an entry ``(offset, position)`` says the batch holding ``offset`` as its last offset
starts at ``position`` or later, so a lookup scans forward from the floor entry.
"""

from __future__ import annotations

import struct
import sys
from array import array
from dataclasses import dataclass

from odradek.log.abstract_index import AbstractIndex, IndexCorruptError


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    """Relative offsets and positions, binary-searched in memory."""

    entry = struct.Struct(">ii")

    def _decode(self, data: bytes) -> tuple[array, array]:
        flat = array("i")
        flat.frombytes(data)
        if sys.byteorder == "little":
            flat.byteswap()
        return flat[0::2], flat[1::2]

    @property
    def last_offset(self) -> int:
        """The largest indexed offset, or the base offset when empty."""
        return self.last_entry().offset

    def last_entry(self) -> OffsetPosition:
        last = self._last_raw()
        if last is None:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + last[0], last[1])

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets must increase (Kafka's InvalidOffsetException otherwise)."""
        keys = self.keys
        relative = offset - self.base_offset
        if keys and relative <= keys[-1]:
            raise ValueError(f"offset {offset} is not larger than the last indexed offset "
                             f"{self.base_offset + keys[-1]} in {self.path}")
        self._append(relative, position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target (or the segment start)."""
        keys = self.keys
        i = self._floor(keys, target_offset - self.base_offset)
        if i < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + keys[i], self.values[i])

    def lookup_position(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0 if none): a batch boundary."""
        i = self._floor(self.values, position)
        return self.values[i] if i >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Remove every entry for offsets >= ``offset``."""
        keys = self.keys
        self._truncate_entries(self._floor(keys, offset - self.base_offset - 1) + 1)

    def sanity_check(self, log_size: int) -> None:
        """Kafka's O(1) check: the file holds whole entries and the last one lies inside the
        segment and its log file; and the last two increase (see ``_sane_tail``)."""
        tail = self._sane_tail()
        last = tail[-1] if tail else None
        # (A negative position too: reads would pread before the file's start, EINVAL, and
        # take the whole log directory offline; fuzz/log_recovery.py found it.)
        if last is not None and (last[0] < 0 or not 0 <= last[1] < max(log_size, 1)):
            raise IndexCorruptError(f"{self.path}: last entry {last} lies outside the segment "
                                    f"(log size {log_size})")
