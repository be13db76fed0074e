"""ProducerIdManager: producer ids for idempotent producers (Kafka's
``kafka.coordinator.transaction.ProducerIdManager``, ZooKeeper mode).

Ids come in blocks claimed from ZooKeeper's ``/latest_producer_id_block``, so every broker
can hand out ids that no other broker hands out.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["ProducerIdBlockSource", "ProducerIdManager"]


class ProducerIdBlockSource(Protocol):
    """Claims the next block of producer ids (the ZooKeeper client does)."""

    async def allocate_producer_id_block(self, broker_id: int) -> tuple[int, int]: ...


class ProducerIdManager:
    def __init__(self, broker_id: int, blocks: ProducerIdBlockSource) -> None:
        self.broker_id = broker_id
        self._blocks = blocks
        self._next = 0
        self._end = -1

    async def next_id(self) -> int:
        """The next unused producer id, claiming a new block when this one is spent."""
        if self._next > self._end:
            self._next, self._end = await self._blocks.allocate_producer_id_block(self.broker_id)
        pid = self._next
        self._next += 1
        return pid
