"""ControllerEventManager: one task, one queue, events strictly one at a time; events that
will not be processed are preempted (their callers hear NOT_CONTROLLER)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from fakes import run

from odradek.controller import event_manager
from odradek.controller.event_manager import ControllerEventManager
from odradek.controller.events import (
    AlterPartitionReceived,
    BrokerChange,
    BrokerModifications,
    ControlledShutdown,
    ControllerEvent,
    ControllerRequestEvent,
    Expire,
    PartitionModifications,
    PreferredReplicaLeaderElection,
    TopicChange,
)
from odradek.protocol.errors import ErrorCode


def request_events() -> list[ControllerRequestEvent]:
    """One of each event a request handler waits on, each with a fresh reply future."""
    loop = asyncio.get_running_loop()
    return [
        ControlledShutdown(1, 10, loop.create_future()),
        AlterPartitionReceived(1, 10, {("id", 0): (3, (1, 2), 7)}, loop.create_future()),
        PreferredReplicaLeaderElection(frozenset({("t", 0)}), loop.create_future()),
    ]


def answers(events: list[ControllerRequestEvent]) -> list[object]:
    return [e.reply.result() if e.reply is not None and e.reply.done() else None for e in events]


# A dropped ControlledShutdown is answered as Kafka answers it (ControllerMovedException:
# STALE_CONTROLLER_EPOCH), the other requests NOT_CONTROLLER.
NOT_CONTROLLER_ANSWERS = [(ErrorCode.stale_controller_epoch, []), (ErrorCode.not_controller, {}),
                          (ErrorCode.not_controller, {})]


def test_events_are_processed_in_order_one_at_a_time() -> None:
    seen: list[ControllerEvent] = []
    running = 0
    overlap = False

    async def process(event: ControllerEvent) -> None:
        nonlocal running, overlap
        running += 1
        overlap = overlap or running > 1
        await asyncio.sleep(0)  # yield: another event must not start meanwhile
        seen.append(event)
        running -= 1

    async def main() -> None:
        manager = ControllerEventManager(process)
        manager.start()
        events = [BrokerModifications(i) for i in range(20)]
        for e in events:
            manager.put(e)
        while len(seen) < len(events):
            await asyncio.sleep(0)
        await manager.close()
        assert seen == events

    run(main())
    assert not overlap


def test_an_exception_in_one_event_does_not_stop_the_next(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []

    async def process(event: ControllerEvent) -> None:
        if isinstance(event, TopicChange):
            raise RuntimeError("boom")
        seen.append(event.name)

    async def main() -> None:
        manager = ControllerEventManager(process)
        manager.start()
        manager.put(BrokerChange())
        manager.put(TopicChange())
        manager.put(PartitionModifications("t"))
        while len(seen) < 2:
            await asyncio.sleep(0)
        await manager.close()

    with caplog.at_level(logging.ERROR, logger="odradek.controller.event_manager"):
        run(main())
    assert seen == ["BrokerChange", "PartitionModifications"]
    assert any("TopicChange" in r.getMessage() and r.exc_info for r in caplog.records)


def test_clear_and_put_drops_queued_events() -> None:
    seen: list[str] = []

    async def main() -> None:
        gate = asyncio.Event()
        started = asyncio.Event()

        async def process(event: ControllerEvent) -> None:
            if isinstance(event, BrokerChange):
                started.set()
                await gate.wait()
            seen.append(event.name)

        manager = ControllerEventManager(process)
        manager.start()
        manager.put(BrokerChange())
        await started.wait()
        assert isinstance(manager.current, BrokerChange)
        manager.put(TopicChange())
        manager.put(PartitionModifications("t"))
        assert manager.queue_size == 2
        manager.clear_and_put(Expire())
        assert manager.queue_size == 1
        gate.set()
        while len(seen) < 2:
            await asyncio.sleep(0)
        await manager.close()
        assert manager.current is None

    run(main())
    # The event in progress finishes; the queued ones are gone; the new one runs.
    assert seen == ["BrokerChange", "Expire"]


class BusyManager:
    """A started manager whose first event (a BrokerChange) is held until ``gate`` is set,
    with one of each waiting request event queued behind it."""

    def __init__(self) -> None:
        self.processed: list[str] = []
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.manager = ControllerEventManager(self._process)
        self.queued: list[ControllerRequestEvent] = []

    async def _process(self, event: ControllerEvent) -> None:
        if isinstance(event, BrokerChange):
            self.started.set()
            await self.gate.wait()
        self.processed.append(event.name)

    async def start(self) -> ControllerEventManager:
        self.manager.start()
        self.manager.put(BrokerChange())
        await self.started.wait()
        self.queued = request_events()
        for e in self.queued:
            self.manager.put(e)
        return self.manager


def test_clear_and_put_answers_the_dropped_requests_with_not_controller() -> None:
    """A session expiry drops the queue; callers waiting on a dropped ControlledShutdown,
    AlterPartition or ElectLeaders must hear that the controller moved, not wait forever."""
    busy = BusyManager()

    async def main() -> None:
        manager = await busy.start()
        manager.clear_and_put(Expire())
        # Answered at once, while the event in progress is still running.
        assert answers(busy.queued) == NOT_CONTROLLER_ANSWERS
        busy.gate.set()
        while len(busy.processed) < 2:
            await asyncio.sleep(0)
        await manager.close()

    run(main())
    assert busy.processed == ["BrokerChange", "Expire"]


def test_close_answers_queued_requests_and_later_puts_with_not_controller() -> None:
    busy = BusyManager()

    async def main() -> None:
        manager = await busy.start()
        closing = asyncio.ensure_future(manager.close())
        await asyncio.sleep(0)
        assert answers(busy.queued) == NOT_CONTROLLER_ANSWERS
        busy.gate.set()  # the event in progress finishes normally
        await closing
        late = request_events()
        for e in late:
            manager.put(e)
        assert answers(late) == NOT_CONTROLLER_ANSWERS
        assert manager.queue_size == 0

    run(main())
    assert busy.processed == ["BrokerChange"]


def test_close_that_cancels_the_event_in_progress_answers_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(event_manager, "CLOSE_TIMEOUT_S", 0.05)

    async def main() -> None:
        started = asyncio.Event()

        async def process(event: ControllerEvent) -> None:
            started.set()
            await asyncio.Event().wait()  # never finishes on its own

        manager = ControllerEventManager(process)
        manager.start()
        stuck = request_events()[0]
        manager.put(stuck)
        await started.wait()
        await manager.close()
        assert stuck.reply is not None and stuck.reply.result() == (ErrorCode.stale_controller_epoch, [])

    run(main())


def test_an_answered_request_is_not_answered_again() -> None:
    async def main() -> None:
        event = request_events()[0]
        event.answer(ErrorCode.none, [])
        event.preempt()
        assert answers([event]) == [(ErrorCode.none, [])]

    run(main())


def test_close_without_start_preempts_what_was_queued() -> None:
    async def process(event: ControllerEvent) -> None:
        raise AssertionError("not expected")

    async def main() -> None:
        manager = ControllerEventManager(process)
        queued = request_events()
        manager.put(BrokerChange())
        for e in queued:
            manager.put(e)
        await manager.close()
        assert manager.queue_size == 0
        assert answers(queued) == NOT_CONTROLLER_ANSWERS

    run(main())
