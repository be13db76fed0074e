"""The state-change log: every partition/replica transition and every control request.

Kafka writes these to ``state-change.log``; so do we, one line per transition, prefixed
with who wrote it (``[Controller id=0 epoch=3]`` or ``[Broker id=1]``).  A controller step
over 10,000 partitions writes tens of thousands of lines, so lines go to a buffered file
flushed a fraction of a second later (and at exit) instead of through ``logging`` with a
flush per line.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import time
from pathlib import Path
from typing import IO

__all__ = ["StateChangeLogger", "configure", "flush"]

FLUSH_DELAY_S = 0.2

_file: IO[str] | None = None
_flush_pending = False
_last_second = -1
_stamp = ""
_fallback = logging.getLogger("state.change.logger")


def configure(path: str | Path) -> None:
    """Write state-change lines to ``path`` (appending)."""
    global _file
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if _file is not None:
        _file.close()
    _file = open(path, "a", buffering=1 << 16)  # noqa: SIM115 - lives as long as the process
    atexit.register(flush)


def flush() -> None:
    global _flush_pending
    _flush_pending = False
    if _file is not None and not _file.closed:
        _file.flush()


def _timestamp() -> str:
    global _last_second, _stamp
    now = time.time()
    second = int(now)
    if second != _last_second:
        _last_second = second
        _stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    return f"{_stamp},{int((now - second) * 1000):03d}"


def _write(level: str, line: str) -> None:
    global _flush_pending
    if _file is None:
        _fallback.log(logging.getLevelName(level), line)
        return
    _file.write(f"[{_timestamp()}] {level} {line}\n")
    if not _flush_pending:
        _flush_pending = True
        try:
            asyncio.get_running_loop().call_later(FLUSH_DELAY_S, flush)
        except RuntimeError:  # no loop: write through
            flush()


class StateChangeLogger:
    """Prefixes each line with the writer's identity (controller with epoch, or broker)."""

    def __init__(self, broker_id: int, *, controller_epoch: int | None = None) -> None:
        self.broker_id = broker_id
        self.controller_epoch = controller_epoch
        if controller_epoch is None:
            self._prefix = f"[Broker id={broker_id}] "
        else:
            self._prefix = f"[Controller id={broker_id} epoch={controller_epoch}] "

    def info(self, msg: str) -> None:
        _write("INFO", self._prefix + msg)

    def warn(self, msg: str) -> None:
        _write("WARN", self._prefix + msg)

    def error(self, msg: str) -> None:
        _write("ERROR", self._prefix + msg)
