"""The broker's ZooKeeper session in the state-change log: a lost connection, the session
resumed on another ensemble member (and how long that took), an expiry and the new session.

Kazoo reports SUSPENDED when the connection drops, CONNECTED when it is back (same session:
it moved to another member, or the ensemble regained its quorum in time) and LOST when the
session expired, followed by CONNECTED with a new session."""

from __future__ import annotations

import time
from typing import Protocol

from odradek.state_change_log import StateChangeLogger

__all__ = ["ZkSessionStateLog"]


class ZkSession(Protocol):
    @property
    def session_id(self) -> int: ...

    @property
    def server(self) -> str | None: ...

    @property
    def closed(self) -> bool: ...


class ZkSessionStateLog:
    """A KafkaZkClient state listener writing one state-change line per session event."""

    def __init__(self, broker_id: int, zk: ZkSession) -> None:
        self.logger = StateChangeLogger(broker_id)
        self.zk = zk
        self._session_id = 0
        self._lost_at: float | None = None
        self._was: str | None = None

    def __call__(self, state: str) -> None:
        if state == "SUSPENDED":
            self._lost_at = time.monotonic()
            self._was = self.zk.server
            was = f" (was {self._was})" if self._was else ""
            self.logger.warn(f"ZooKeeper connection lost{was}; reconnecting, session "
                             f"{_hex(self._session_id)} is kept if it returns within the session timeout")
        elif state == "LOST" and self.zk.closed:
            self.logger.info(f"ZooKeeper session {_hex(self._session_id)} closed")
            self._session_id = 0
        elif state == "LOST":
            self.logger.warn(f"ZooKeeper session {_hex(self._session_id)} expired; "
                             "re-registering with a new session")
            self._session_id = 0
        elif state == "CONNECTED":
            self._on_connected()

    def _on_connected(self) -> None:
        session_id, server = self.zk.session_id, self.zk.server
        on = f" on {server}" if server else ""
        if self._session_id == 0:
            self.logger.info(f"ZooKeeper session {_hex(session_id)} established{on}")
        elif session_id == self._session_id:
            took = (f" after {(time.monotonic() - self._lost_at) * 1000:.0f} ms"
                    if self._lost_at is not None else "")
            moved = " (another member)" if server and self._was and server != self._was else ""
            self.logger.info(f"ZooKeeper session {_hex(session_id)} resumed{on}{moved}{took}")
        else:
            self.logger.info(f"ZooKeeper session {_hex(session_id)} established{on} "
                             f"(replacing {_hex(self._session_id)})")
        self._session_id = session_id
        self._lost_at = None


def _hex(session_id: int) -> str:
    return f"0x{session_id:x}"
