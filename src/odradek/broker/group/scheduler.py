"""Timers for the coordinator (heartbeat expiry, rebalance delays and timeouts), behind a
small interface so the membership logic can run on a fake clock in tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

__all__ = ["AsyncioScheduler", "Scheduler", "TimerHandle"]


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` after ``delay_ms`` unless the returned handle is cancelled first."""
        ...


class AsyncioScheduler:
    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, callback)
