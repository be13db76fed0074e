"""Long-lived background tasks that say so when they die.

A broker's loops (fetchers, the AlterPartition sender, the controller's event thread, ...)
run until they are cancelled.  If one ends with an exception instead, asyncio keeps the
exception in the task object and reports nothing while the task is referenced, so the
broker would carry on without, say, ever changing an ISR again.  ``start`` logs that
death at ERROR with the traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

__all__ = ["start"]

T = TypeVar("T")


def start(coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
    """``create_task`` on the running loop, logging an exception that ends the task."""
    task = asyncio.get_running_loop().create_task(coro, name=name)
    task.add_done_callback(_report)
    return task


def _report(task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        log.error("Background task %s died", task.get_name(), exc_info=error)
