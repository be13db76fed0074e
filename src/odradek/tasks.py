"""Long-lived background tasks that say so when they die.

A broker's loops (fetchers, the AlterPartition sender, the controller's event thread, ...)
run until they are cancelled.  If one ends with an exception instead, asyncio keeps the
exception in the task object and reports nothing while the task is referenced, so the
broker would carry on without, say, ever changing an ISR again.  ``start`` logs that
death at ERROR with the traceback.

``cancel_and_wait`` stops such a task.  Waiting for a cancelled task raises CancelledError,
and a bare ``except CancelledError: pass`` around that wait also swallows a cancellation of
the *waiting* task: a loop that closes a connection while it is itself being cancelled then
carries on, and whoever waits for that loop to end waits forever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

__all__ = ["cancel_and_wait", "start"]

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


async def cancel_and_wait(task: asyncio.Task[Any] | None, *, recancel_after_s: float = 1.0) -> None:
    """Cancel ``task`` and wait until it has finished.  Its own end (cancelled, or an
    exception that :func:`start` has logged) is absorbed; a cancellation of the caller is not.

    A task can swallow a cancellation (Python 3.11's ``asyncio.wait_for`` does when the
    awaited operation completes at the same moment), so it is cancelled again every
    ``recancel_after_s`` until it ends."""
    if task is None or task is asyncio.current_task():
        return
    attempts = 0
    while not task.done():
        if attempts == 1:
            log.warning("Task %s did not end when cancelled; cancelling it again", task.get_name())
        task.cancel()
        attempts += 1
        # asyncio.wait neither raises the task's exception nor passes our cancellation on to it.
        await asyncio.wait({task}, timeout=recancel_after_s)
    if not task.cancelled():
        task.exception()  # retrieved (start() has logged it)
