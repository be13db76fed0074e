"""A broker's wall clock under test (the nemesis's clock faults, local/nemesis_faults.py).

With ``ODRADEK_TEST_CLOCK=<file>`` in its environment, a broker reads the file every 100 ms:
``{"offset_ms": N, "rate": R}``. Its wall clock (``common.now_ms``: record timestamps,
retention and rolling, transaction and session expiry, ISR lag) is then the system's plus N,
plus (R - 1) times the real time since the file last changed: a step of N, then a clock running
R times as fast. A missing or unreadable file is no skew. Without the variable nothing runs.
Like a real clock step, it leaves the monotonic clocks (intervals, the event loop's timers)
alone.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from odradek.common import set_clock_skew_ms

__all__ = ["ENVIRONMENT_VARIABLE", "SkewedClock", "start_from_environment"]

log = logging.getLogger(__name__)

ENVIRONMENT_VARIABLE = "ODRADEK_TEST_CLOCK"
_INTERVAL_S = 0.1


class SkewedClock:
    """The skew read from ``path``; ``tick()`` applies it (the thread calls it every 100 ms)."""

    def __init__(self, path: Path, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._monotonic = monotonic
        self._seen: tuple[int, int, int] | None = None  # the file's (inode, mtime_ns, size) last read
        self._offset_ms = 0
        self._rate = 1.0
        self._since = monotonic()

    def tick(self) -> int:
        """Read the file if it changed, apply the skew, and return it (ms)."""
        try:
            stat = self.path.stat()
            seen = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        except OSError:
            seen = None
        if seen != self._seen:
            self._seen = seen
            self._offset_ms, self._rate = self._read() if seen is not None else (0, 1.0)
            self._since = self._monotonic()
            log.warning("Clock skew (test): wall clock offset %+d ms, rate %.2f", self._offset_ms, self._rate)
        skew = self._offset_ms + int((self._rate - 1.0) * (self._monotonic() - self._since) * 1000)
        set_clock_skew_ms(skew)
        return skew

    def _read(self) -> tuple[int, float]:
        try:
            spec = json.loads(self.path.read_text())
            return int(spec.get("offset_ms", 0)), float(spec.get("rate", 1.0))
        except (OSError, ValueError, TypeError, AttributeError) as e:
            log.warning("Clock skew (test): %s unreadable (%s): no skew", self.path, e)
            return 0, 1.0

    def run(self) -> None:
        while True:
            self.tick()
            time.sleep(_INTERVAL_S)


def start_from_environment() -> SkewedClock | None:
    """Start the clock's thread if ``ODRADEK_TEST_CLOCK`` names a file."""
    path = os.environ.get(ENVIRONMENT_VARIABLE)
    if not path:
        return None
    clock = SkewedClock(Path(path))
    clock.tick()
    threading.Thread(target=clock.run, name="test-clock", daemon=True).start()
    return clock
