"""ControllerEventManager: one task, one queue, events strictly one at a time."""

from __future__ import annotations

import asyncio
import logging

import pytest
from fakes import run

from odradek.controller.event_manager import ControllerEventManager
from odradek.controller.events import (
    BrokerChange,
    BrokerModifications,
    ControllerEvent,
    Expire,
    PartitionModifications,
    TopicChange,
)


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
        await manager.close()  # drains what was queued before it
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
        await manager.close()
        assert manager.current is None

    run(main())
    # The event in progress finishes; the queued ones are gone; the new one runs.
    assert seen == ["BrokerChange", "Expire"]


def test_close_without_start_is_a_no_op() -> None:
    async def process(event: ControllerEvent) -> None:
        raise AssertionError("not expected")

    async def main() -> None:
        manager = ControllerEventManager(process)
        manager.put(BrokerChange())
        await manager.close()
        assert manager.queue_size == 1

    run(main())
