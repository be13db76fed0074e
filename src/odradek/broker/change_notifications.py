"""Following a ZooKeeper change-notification path (Kafka's ZkNodeChangeNotificationListener):
the dynamic config manager follows ``/config/changes``, the ACL cache ``/kafka-acl-changes`` and
``/kafka-acl-extended-changes``.

A notification is a sequential child ``<prefix><seq>``; each broker executes every one once,
in sequence order, and deletes executed ones once they are older than CHANGE_EXPIRATION_MS.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from kazoo.exceptions import ConnectionLoss, NoNodeError, SessionExpiredError
from kazoo.protocol.states import WatchedEvent

from odradek import tasks
from odradek.zk.client import KafkaZkClient, ZkConnectionError

log = logging.getLogger(__name__)

__all__ = ["CHANGE_EXPIRATION_MS", "NotificationFollower", "purge_executed", "sequence_number"]

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # ZkNodeChangeNotificationListener's changeExpirationMs
_RETRY_S = 1.0


def sequence_number(name: str, prefix: str) -> int | None:
    """The sequence number of a ``<prefix><seq>`` child, or None for other names."""
    suffix = name[len(prefix):]
    if not name.startswith(prefix) or not suffix.isdigit():
        return None
    return int(suffix)


async def purge_executed(zk: KafkaZkClient, parent: str, names: Iterable[str], now_ms: int) -> None:
    """Delete executed notifications older than CHANGE_EXPIRATION_MS (every broker tries; the
    first one wins).  Names are in creation order, so stop at the first young one."""
    for name in names:
        stat = await zk.exists(f"{parent}/{name}")
        if stat is None:
            continue
        if stat.ctime + CHANGE_EXPIRATION_MS >= now_ms:
            break
        try:
            await zk.delete(f"{parent}/{name}")
        except NoNodeError:
            pass


class NotificationFollower:
    """Runs ``process`` (which reads the notifications, watching their parent with
    ``on_change``) at start, whenever that watch fires and after every new ZooKeeper session
    (which has no watches), and again a second after it fails."""

    def __init__(self, zk: KafkaZkClient, process: Callable[[], Awaitable[None]], name: str, what: str) -> None:
        self.zk = zk
        self.process = process
        self.name = name
        self.what = what
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.zk.add_state_listener(self._on_zk_state)
        self._task = tasks.start(self._run(), self.name)
        self._wakeup.set()

    async def stop(self) -> None:
        task, self._task = self._task, None
        await tasks.cancel_and_wait(task)

    def on_change(self, _event: WatchedEvent) -> None:
        self._wakeup.set()

    def _on_zk_state(self, state: str) -> None:
        if state == "CONNECTED":
            self._wakeup.set()

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self.process()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                level = logging.INFO if isinstance(
                    e, (ZkConnectionError, ConnectionError, SessionExpiredError, ConnectionLoss)) else logging.ERROR
                log.log(level, "processing %s failed (retrying): %r", self.what, e, exc_info=level == logging.ERROR)
                await asyncio.sleep(_RETRY_S)
                self._wakeup.set()
