"""The cleaner's offset map: each key's latest offset in the dirty section."""

from __future__ import annotations

__all__ = ["OffsetMap"]


class OffsetMap:
    """Key bytes -> the latest offset seen for it: the role of Kafka's ``SkimpyOffsetMap``.

    Kafka stores 16-byte key hashes in a fixed buffer; here a dict holds the keys
    themselves, bounded by ``capacity`` entries (what ``log.cleaner.dedupe.buffer.size``
    allows). Updating a key already present never fills it.
    """

    __slots__ = ("capacity", "entries", "latest_offset")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.entries: dict[bytes, int] = {}
        self.latest_offset = -1  # the last offset put

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, or -1 when it is not in the map."""
        return self.entries.get(key, -1)

    def put(self, key: bytes, offset: int) -> bool:
        """Map ``key`` to ``offset``; False (nothing changed) when a new key finds it full."""
        entries = self.entries
        if len(entries) >= self.capacity and key not in entries:
            return False
        entries[key] = offset
        self.latest_offset = offset
        return True

    @property
    def utilization(self) -> float:
        return len(self.entries) / self.capacity if self.capacity > 0 else 1.0
