"""The pid and liveness of a server process that an object starts and stops (a broker of a
local cluster, an embedded ZooKeeper)."""

from __future__ import annotations

import subprocess

__all__ = ["ChildProcess"]


class ChildProcess:
    """For a class that holds its server's process in ``process`` (None before the first start)."""

    process: subprocess.Popen[bytes] | None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None
