"""Fakes for the group coordinator's side effects: a manual clock for its timers and an
in-memory __consumer_offsets."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

from odradek.broker.group.coordinator import GroupCoordinator
from odradek.broker.group.group_config import GroupConfig
from odradek.broker.group.group_metadata_manager import GroupMetadataManager
from odradek.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import iter_batches, set_base_offset

T = TypeVar("T")


class FakeTimer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A scheduler and a clock: nothing happens until ``advance``."""

    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now = now_ms
        self._queue: list[tuple[int, int, FakeTimer, Callable[[], None]]] = []
        self._seq = itertools.count()

    def __call__(self) -> int:
        return self.now

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer()
        heapq.heappush(self._queue, (self.now + max(delay_ms, 0), next(self._seq), timer, callback))
        return timer

    def advance(self, ms: int) -> None:
        until = self.now + ms
        while self._queue and self._queue[0][0] <= until:
            due, _, timer, callback = heapq.heappop(self._queue)
            self.now = due
            if not timer.cancelled:
                callback()
        self.now = until

    def pending(self) -> int:
        return sum(1 for _, _, t, _ in self._queue if not t.cancelled)


class FakeOffsetsTopic:
    """Partitions as lists of batches; appends succeed unless ``fail_with`` is set, and wait
    for ``release`` while ``hold`` is set (a replication that has not happened yet)."""

    def __init__(self) -> None:
        self.logs: dict[int, list[bytes]] = {}
        self.next_offsets: dict[int, int] = {}
        self.fail_with: ErrorCode | None = None
        self.transactional_appends: list[tuple[int, int]] = []  # (partition, base offset)
        self.hold = False
        self._held: list[asyncio.Future[None]] = []

    async def append(self, partition: int, batch: bytes, *, wait_for_replication: bool,
                     transactional: bool = False) -> tuple[ErrorCode, int]:
        if self.fail_with is not None:
            return self.fail_with, -1
        base = self.next_offsets.get(partition, 0)
        if transactional:
            self.transactional_appends.append((partition, base))
        data = bytearray(batch)
        (_, header), = iter_batches(data)
        set_base_offset(data, 0, base)
        self.logs.setdefault(partition, []).append(bytes(data))
        self.next_offsets[partition] = base + header.last_offset_delta + 1
        if wait_for_replication and self.hold:
            waiter = asyncio.get_running_loop().create_future()
            self._held.append(waiter)
            await waiter
        return ErrorCode.none, base

    def append_marker(self, partition: int, producer_id: int, commit: bool, producer_epoch: int = 0) -> None:
        """A transaction marker, as WriteTxnMarkers appends it."""
        marker = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        base = self.next_offsets.get(partition, 0)
        self.logs.setdefault(partition, []).append(build_end_txn_marker_batch(
            marker, producer_id=producer_id, producer_epoch=producer_epoch, coordinator_epoch=0, timestamp=0,
            base_offset=base))
        self.next_offsets[partition] = base + 1

    def release(self) -> None:
        for waiter in self._held:
            waiter.set_result(None)
        self._held.clear()

    def read(self, partition: int) -> Iterator[bytes]:
        yield from list(self.logs.get(partition, []))


def make_coordinator(topic: FakeOffsetsTopic | None = None, clock: ManualClock | None = None,
                     **config: Any) -> tuple[GroupCoordinator, FakeOffsetsTopic, ManualClock]:
    settings = {"offsets_topic_num_partitions": 1, "initial_rebalance_delay_ms": 0,
                "min_session_timeout_ms": 100, **config}
    topic = topic or FakeOffsetsTopic()
    clock = clock or ManualClock()
    group_config = GroupConfig(**settings)
    manager = GroupMetadataManager(group_config, topic, now_ms=clock)
    return GroupCoordinator(group_config, manager, clock, now_ms=clock), topic, clock


async def settle() -> None:
    """Let every runnable task run (appends, their continuations)."""
    for _ in range(20):
        await asyncio.sleep(0)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)
