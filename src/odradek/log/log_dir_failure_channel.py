"""Kafka's ``LogDirFailureChannel``: where an I/O error in a log directory is reported.

Any code that meets an ``OSError`` while reading or writing a log directory (a log's append,
read or flush, a checkpoint, a segment roll) reports the directory here once and raises
KAFKA_STORAGE_ERROR to its caller.  The first report of a directory is passed on to the
listener (the broker's ``LogDirFailureHandler``), which takes the directory offline: its
partitions stop being served, the controller is told, and leadership moves elsewhere.

Reports may come from worker threads (checkpoint writes run there), so the set of offline
directories is guarded by a lock and the listener must be safe to call from any thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["LogDirFailureChannel"]


class LogDirFailureChannel:
    """The offline log directories of one broker, and who hears of a new one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[Path, str] = {}
        self.listener: Callable[[Path], None] | None = None

    def maybe_add_offline_log_dir(self, log_dir: Path, message: str, error: BaseException | None = None) -> bool:
        """Report ``log_dir`` as failed; True the first time (the listener then hears of it)."""
        with self._lock:
            if log_dir in self._offline:
                return False
            self._offline[log_dir] = message
        log.error("%s%s", message, f": {error}" if error is not None else "")
        if self.listener is not None:
            self.listener(log_dir)
        return True

    def is_offline(self, log_dir: Path) -> bool:
        return log_dir in self._offline

    @property
    def offline_log_dirs(self) -> dict[Path, str]:
        """Each offline directory and the message of its first failure."""
        with self._lock:
            return dict(self._offline)
