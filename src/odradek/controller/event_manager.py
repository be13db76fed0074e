"""ControllerEventManager: one asyncio task draining one queue of controller events."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from kazoo.exceptions import ConnectionLoss, SessionExpiredError

from odradek import tasks
from odradek.controller.controller_state import state_of
from odradek.controller.events import ControllerEvent
from odradek.histogram import Histogram
from odradek.zk.client import ZkConnectionError

log = logging.getLogger(__name__)

__all__ = ["ControllerEventManager"]

CLOSE_TIMEOUT_S = 10


class ControllerEventManager:
    """Events are processed strictly one at a time, in the order they were put.  An event
    that raises is logged and dropped; the next one is processed as usual.

    An event that will never be processed is preempted instead (Kafka's
    ControllerEventManager): the events ``clear_and_put`` drops, those still queued when the
    manager closes, the one in progress if closing has to cancel it, and any put after close.
    """

    def __init__(self, process: Callable[[ControllerEvent], Awaitable[None]]) -> None:
        self._process = process
        self._queue: asyncio.Queue[ControllerEvent | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.current: ControllerEvent | None = None
        # ControllerStats: each kind of event's processing times (milliseconds), by timer name.
        self.rate_and_time: dict[str, Histogram] = {}

    def start(self) -> None:
        self._task = tasks.start(self._run(), "controller-event-thread")

    def put(self, event: ControllerEvent) -> None:
        if self._closed:
            event.preempt()
            return
        self._queue.put_nowait(event)

    def clear_and_put(self, event: ControllerEvent) -> None:
        """Drop and preempt the queued events (they were for a controller state that no
        longer exists), then queue ``event``."""
        self._preempt_queued()
        self._queue.put_nowait(event)

    @property
    def queue_size(self) -> int:
        return self._queue.qsize()

    async def close(self) -> None:
        """Let the event in progress finish (for at most CLOSE_TIMEOUT_S), preempt the rest."""
        self._closed = True
        self._preempt_queued()
        if self._task is None:
            return
        self._queue.put_nowait(None)
        try:
            await asyncio.wait_for(self._task, timeout=CLOSE_TIMEOUT_S)
        except (TimeoutError, asyncio.CancelledError):
            self._task.cancel()
        self._task = None

    def _preempt_queued(self) -> None:
        while not self._queue.empty():
            dropped = self._queue.get_nowait()
            if dropped is not None:
                dropped.preempt()

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            if event is None:
                return
            self.current = event
            started = time.monotonic()
            try:
                await self._process(event)
            except asyncio.CancelledError:
                event.preempt()
                raise
            except (SessionExpiredError, ConnectionLoss, ZkConnectionError) as e:
                # The session listener queues Expire / RegisterBrokerAndReelect; nothing to retry here.
                log.warning("Controller event %s interrupted by the ZooKeeper session: %r", event.name, e)
            except Exception:
                log.exception("Error processing controller event %s", event.name)
            finally:
                self.current = None
            elapsed = time.monotonic() - started
            timer = state_of(event).timer
            if timer:
                histogram = self.rate_and_time.get(timer)
                if histogram is None:
                    histogram = self.rate_and_time[timer] = Histogram()
                histogram.update(elapsed * 1000)
            if elapsed > 1:
                log.info("Processed controller event %s in %.0f ms", event.name, elapsed * 1000)
