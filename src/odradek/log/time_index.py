"""Kafka's ``TimeIndex``: a sparse map from timestamp to offset in a segment.

File format (``<base offset>.timeindex``): 12-byte entries, timestamp int64 + relative
offset int32, big-endian. An entry ``(t, o)`` says that ``t`` is the largest timestamp in
the segment up to the batch ending at offset ``o``. Entries are added only when that maximum
grows, so a search for the first record at or after time ``T`` may start at the offset of
the last entry with ``t <= T``.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable
from dataclasses import dataclass

from odradek.log.abstract_index import AbstractIndex, IndexCorruptError
from odradek.protocol.records import NO_TIMESTAMP


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    """Timestamps (int64) and relative offsets, binary-searched in memory."""

    entry = struct.Struct(">qi")
    key_type = "q"

    def _decode(self, data: bytes) -> tuple[array, array]:
        keys, values = array("q"), array("i")
        for timestamp, relative in self.entry.iter_unpack(data):
            keys.append(timestamp)
            values.append(relative)
        return keys, values

    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(NO_TIMESTAMP, base offset)`` when empty."""
        last = self._last_raw()
        if last is None:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(last[0], self.base_offset + last[1])

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add ``(timestamp, offset)`` if the timestamp is larger than the last entry's."""
        keys = self.keys
        if keys:
            if timestamp <= keys[-1]:
                return
            if offset - self.base_offset < self.values[-1]:
                raise ValueError(f"offset {offset} is smaller than the last time-indexed offset "
                                 f"in {self.path}")
        self._append(timestamp, offset - self.base_offset)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or ``(NO_TIMESTAMP, base)``."""
        keys = self.keys
        i = self._floor(keys, target_timestamp)
        if i < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(keys[i], self.base_offset + self.values[i])

    def truncate_to(self, offset: int) -> None:
        """Remove every entry for offsets >= ``offset`` (offsets are non-decreasing)."""
        self._truncate_entries(self._floor(self.values, offset - self.base_offset - 1) + 1)

    def sanity_check(self, next_offset: Callable[[], int], first_batch_timestamp: Callable[[], int]) -> None:
        """Kafka's O(1) check (whole entries, the last one inside the segment) and further
        steps, each asked only when there is an entry: the last two increase (see
        ``_sane_tail``); the last lies before the segment's end (``next_offset``: an entry past
        it would make every later entry, an append's or the one written at close, fail;
        fuzz/log_recovery.py found it); and its timestamp, the segment's largest, is not below
        the first batch's (a zeroed index would date the segment to 1970: retention would
        delete it, ListOffsets by timestamp would pass over it)."""
        tail = self._sane_tail()
        if not tail:
            return
        last = tail[-1]
        if last[1] < 0:
            raise IndexCorruptError(f"{self.path}: last entry {last} lies before the segment")
        if self.base_offset + last[1] >= next_offset():
            raise IndexCorruptError(f"{self.path}: last entry {last} lies past the segment's end")
        if last[0] < first_batch_timestamp():
            raise IndexCorruptError(f"{self.path}: last entry {last} is older than the segment's "
                                    "first batch")
