"""ControllerEventManager: one asyncio task draining one queue of controller events."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from kazoo.exceptions import ConnectionLoss, SessionExpiredError

from odradek import tasks
from odradek.controller.events import ControllerEvent
from odradek.zk.client import ZkConnectionError

log = logging.getLogger(__name__)

__all__ = ["ControllerEventManager"]


class ControllerEventManager:
    """Events are processed strictly one at a time, in the order they were put.  An event
    that raises is logged and dropped; the next one is processed as usual."""

    def __init__(self, process: Callable[[ControllerEvent], Awaitable[None]]) -> None:
        self._process = process
        self._queue: asyncio.Queue[ControllerEvent | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self.current: ControllerEvent | None = None

    def start(self) -> None:
        self._task = tasks.start(self._run(), "controller-event-thread")

    def put(self, event: ControllerEvent) -> None:
        self._queue.put_nowait(event)

    def clear_and_put(self, event: ControllerEvent) -> None:
        """Drop queued events (they were for a controller state that no longer exists)."""
        while not self._queue.empty():
            self._queue.get_nowait()
        self._queue.put_nowait(event)

    @property
    def queue_size(self) -> int:
        return self._queue.qsize()

    async def close(self) -> None:
        if self._task is None:
            return
        self._queue.put_nowait(None)
        try:
            await asyncio.wait_for(self._task, timeout=10)
        except (TimeoutError, asyncio.CancelledError):
            self._task.cancel()
        self._task = None

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
                raise
            except (SessionExpiredError, ConnectionLoss, ZkConnectionError) as e:
                # The session listener queues Expire / RegisterBrokerAndReelect; nothing to retry here.
                log.warning("Controller event %s interrupted by the ZooKeeper session: %r", event.name, e)
            except Exception:
                log.exception("Error processing controller event %s", event.name)
            finally:
                self.current = None
            elapsed = time.monotonic() - started
            if elapsed > 1:
                log.info("Processed controller event %s in %.0f ms", event.name, elapsed * 1000)
