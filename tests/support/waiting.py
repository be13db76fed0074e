"""Waiting on a condition instead of sleeping: ``wait_until`` in a test's thread,
``wait_until_async`` on an event loop."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

import pytest

__all__ = ["wait_until", "wait_until_async"]

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float = 30.0, interval: float = 0.05,
               message: str = "condition") -> T:
    """Poll ``condition`` until it returns something truthy, and return that; fail the test
    after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval)
    _timed_out(timeout, message, last)


async def wait_until_async(condition: Callable[[], T | Awaitable[T]], timeout: float = 30.0,
                           interval: float = 0.05, message: str = "condition") -> T:
    """wait_until on an event loop: ``condition`` (a function or a coroutine function) is polled
    between ``asyncio.sleep``s, so the tasks that make it true keep running."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        answer = condition()
        last = await answer if inspect.isawaitable(answer) else answer
        if last:
            return last  # type: ignore[return-value]
        await asyncio.sleep(interval)
    _timed_out(timeout, message, last)


def _timed_out(timeout: float, message: str, last: object) -> NoReturn:
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {message} (last value: {last!r})")
