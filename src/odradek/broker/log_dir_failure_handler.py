"""Kafka's ``LogDirFailureHandler``: what the broker does when a log directory fails.

The :class:`~odradek.log.log_dir_failure_channel.LogDirFailureChannel` hears of a failed
directory from whatever met the I/O error, on any thread; this handler takes it from there on
the event loop, one directory at a time: the replica manager stops serving the directory's
partitions (under its state-change lock, as Kafka's replicaStateChangeLock), then the
controller is told through a ``/log_dir_event_notification/log_dir_event_<n>`` znode, and it
moves leadership away.  A broker left with no healthy directory halts, as Kafka's does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from odradek import tasks

if TYPE_CHECKING:
    from odradek.broker.replica_manager import ReplicaManager
    from odradek.log.log_dir_failure_channel import LogDirFailureChannel

log = logging.getLogger(__name__)

__all__ = ["LogDirFailureHandler"]

_NOTIFY_BACKOFF_S = 1.0


class LogDirFailureHandler:
    def __init__(self, channel: LogDirFailureChannel, replica_manager: ReplicaManager,
                 notify_controller: Callable[[], Awaitable[None]], halt: Callable[[str], None]) -> None:
        self.channel = channel
        self.replica_manager = replica_manager
        self.notify_controller = notify_controller
        self.halt = halt
        self._queue: asyncio.Queue[Path] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Handle every directory reported from now on, and those reported before (at start-up)."""
        self._loop = asyncio.get_running_loop()
        self.channel.listener = self._reported
        for log_dir in self.channel.offline_log_dirs:
            self._queue.put_nowait(log_dir)
        self._task = tasks.start(self._run(), "log-dir-failure-handler")

    async def shutdown(self) -> None:
        self.channel.listener = None
        await tasks.cancel_and_wait(self._task)
        self._task = None

    def _reported(self, log_dir: Path) -> None:
        """The channel's listener: called on whichever thread met the error."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._queue.put_nowait, log_dir)

    async def _run(self) -> None:
        while True:
            log_dir = await self._queue.get()
            async with self.replica_manager.state_change_lock:
                self.replica_manager.handle_log_dir_failure(log_dir)
            if not self.replica_manager.log_manager.live_log_dirs:
                self.halt(f"Shutdown broker because all log dirs in "
                          f"{', '.join(map(str, self.replica_manager.log_manager.log_dirs))} have failed")
                return
            await self._notify()

    async def _notify(self) -> None:
        """Tell the controller (retried until ZooKeeper takes it: the controller must learn
        which replicas are offline, or leadership stays on them)."""
        while True:
            try:
                await self.notify_controller()
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("Could not write the log dir event notification: %r; retrying", e)
                await asyncio.sleep(_NOTIFY_BACKOFF_S)
