"""Waiting on a condition instead of sleeping."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

__all__ = ["wait_until"]


def wait_until(condition: Callable[[], object], timeout: float = 30.0, interval: float = 0.05,
               message: str = "condition") -> object:
    """Poll ``condition`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {message} (last value: {last!r})")
