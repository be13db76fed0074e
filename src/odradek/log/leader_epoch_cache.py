"""Kafka's ``LeaderEpochFileCache``: which offset each leader epoch started at.

Entries ``(epoch, start_offset)`` are kept with both columns strictly increasing, mirrored
to the partition's ``leader-epoch-checkpoint`` on every change. Followers ask the leader
for the end offset of their latest epoch (OffsetForLeaderEpoch) and truncate to it instead
of to their high watermark, which is what closes the divergence cases of KIP-101/KIP-279.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from odradek.log.checkpoints import LeaderEpochCheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    """The epoch -> start offset map of one partition, backed by its checkpoint file."""

    def __init__(self, checkpoint: LeaderEpochCheckpointFile,
                 log_end_offset: Callable[[], int]) -> None:
        self.checkpoint = checkpoint
        self._log_end_offset = log_end_offset
        self._entries: list[EpochEntry] = []
        # A checkpoint that cannot be read: the log rebuilds the entries from its batches'
        # leader epochs (Log.open), rather than the broker refusing to start.
        self.unreadable = False
        try:
            for epoch, offset in checkpoint.read():
                self._assign(EpochEntry(epoch, offset))
        except ValueError as e:  # CorruptCheckpointError, or a negative epoch or offset
            log.warning("%s: %s; rebuilding the leader epochs from the log", checkpoint.path, e)
            self._entries.clear()
            self.unreadable = True

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``; entries that would break the
        ordering (a later epoch, or a start offset at or past this one) are dropped."""
        if self._assign(EpochEntry(epoch, start_offset)):
            self._flush()

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid leader epoch entry {entry}")
        if self._entries:
            last = self._entries[-1]
            if entry.epoch == last.epoch and entry.start_offset >= last.start_offset:
                return False  # already known: the common case on every append
        removed = []
        while self._entries and (self._entries[-1].epoch >= entry.epoch
                                 or self._entries[-1].start_offset >= entry.start_offset):
            removed.append(self._entries.pop())
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            log.warning("new epoch entry %s caused truncation of conflicting entries %s",
                        entry, removed)
        self._entries.append(entry)
        return True

    def end_offset_for(self, requested_epoch: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch answer: ``(epoch, end_offset)``.

        The latest epoch ends at the log end offset. An older epoch ends where the next
        known epoch starts, reported with the largest known epoch <= the requested one. An
        epoch older than every entry (its data was deleted) reports the first entry's start
        offset. Unknown or newer epochs give ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)``.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            return requested_epoch, self._log_end_offset()
        floor: EpochEntry | None = None
        for entry in self._entries:
            if entry.epoch > requested_epoch:
                if floor is None:
                    return requested_epoch, entry.start_offset
                return floor.epoch, entry.start_offset
            floor = entry
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset`` (None before the first entry)."""
        result = None
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            result = entry.epoch
        return result

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was truncated there)."""
        if end_offset >= 0 and self._entries and self._entries[-1].start_offset >= end_offset:
            while self._entries and self._entries[-1].start_offset >= end_offset:
                self._entries.pop()
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before ``start_offset``; the last of them is kept, moved to
        start at ``start_offset`` (so ``truncate_from_start(6)`` keeps an entry at 6)."""
        removed = 0
        while removed < len(self._entries) and self._entries[removed].start_offset <= start_offset:
            removed += 1
        if removed:
            kept = EpochEntry(self._entries[removed - 1].epoch, start_offset)
            self._entries[:removed] = [kept]
            self._flush()

    def clear_and_flush(self) -> None:
        self._entries.clear()
        self._flush()

    def _flush(self) -> None:
        self.checkpoint.write((e.epoch, e.start_offset) for e in self._entries)
