"""Fakes for the transaction coordinator's side effects: a settable clock, an in-memory
__transaction_state, a marker sender that records what it was asked, producer ids."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable, Iterator

from odradek.broker.transaction.coordinator import TransactionCoordinator
from odradek.broker.transaction.state_manager import TransactionStateManager
from odradek.broker.transaction.transaction_log import TxnLogValue, decode_key, decode_value
from odradek.broker.transaction.txn_config import TxnConfig
from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import decode_batch, iter_batches, set_base_offset


class Clock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now = now_ms

    def __call__(self) -> int:
        return self.now


class FakeTxnTopic:
    """Partitions as lists of batches; appends succeed unless ``fail_with`` is set, and wait
    for ``release()`` while ``hold`` is set."""

    def __init__(self) -> None:
        self.logs: dict[int, list[bytes]] = {}
        self.fail_with: ErrorCode | None = None
        self.hold = False
        self._held: list[asyncio.Future[None]] = []

    async def append(self, partition: int, batch: bytes) -> ErrorCode:
        if self.hold:
            waiter = asyncio.get_running_loop().create_future()
            self._held.append(waiter)
            await waiter
        if self.fail_with is not None:
            return self.fail_with
        data = bytearray(batch)
        set_base_offset(data, 0, len(self.logs.get(partition, [])))
        self.logs.setdefault(partition, []).append(bytes(data))
        return ErrorCode.none

    def release(self) -> None:
        self.hold = False
        for waiter in self._held:
            if not waiter.done():
                waiter.set_result(None)
        self._held.clear()

    def read(self, partition: int) -> Iterator[bytes]:
        yield from self.logs.get(partition, [])

    def records(self, partition: int = 0) -> list[tuple[str, TxnLogValue | None]]:
        out = []
        for chunk in self.logs.get(partition, []):
            for pos, header in iter_batches(chunk):
                for record in decode_batch(chunk[pos:pos + header.size])[1]:
                    assert record.key is not None
                    out.append((decode_key(record.key), decode_value(record.value)))
        return out


class FakeMarkers:
    """Records each send; answers ``result``; waits while ``gate`` is set and not yet opened."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, bool, int, frozenset[TopicPartition]]] = []
        self.result = True
        self.gate: asyncio.Event | None = None

    async def send_markers(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                           coordinator_epoch: int, partitions: Iterable[TopicPartition]) -> bool:
        self.calls.append((transactional_id, producer_id, producer_epoch, commit, coordinator_epoch,
                           frozenset(partitions)))
        if self.gate is not None:
            await self.gate.wait()
        return self.result


class Harness:
    def __init__(self, config: TxnConfig | None = None, topic: FakeTxnTopic | None = None) -> None:
        self.config = config or TxnConfig(num_partitions=1)
        self.clock = Clock()
        self.topic = topic or FakeTxnTopic()
        self.markers = FakeMarkers()
        self._ids = itertools.count(1000)
        self.manager = TransactionStateManager(self.config, self.topic, self.clock)
        self.coordinator = TransactionCoordinator(self.config, self.manager, self._next_id, self.markers, self.clock)

    async def _next_id(self) -> int:
        return next(self._ids)

    async def elect(self, partition: int = 0, epoch: int = 5) -> None:
        self.coordinator.on_election(partition, epoch)
        await asyncio.gather(*self.manager.loading.values())

    async def settle(self) -> None:
        """Until every marker-and-complete task has finished."""
        while self.coordinator.completions:
            await asyncio.gather(*self.coordinator.completions.values(), return_exceptions=True)
