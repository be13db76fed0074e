"""A background task that dies is reported, with its name and traceback."""

from __future__ import annotations

import asyncio
import logging

import pytest

from odradek import tasks


def test_a_dying_task_is_logged_and_a_cancelled_one_is_not(caplog: pytest.LogCaptureFixture) -> None:
    async def dies() -> None:
        raise RuntimeError("boom")

    async def scenario() -> None:
        dead = tasks.start(dies(), "doomed-loop")
        idle = tasks.start(asyncio.sleep(60), "idle-loop")
        await asyncio.sleep(0)
        idle.cancel()
        for _ in range(3):
            await asyncio.sleep(0)
        assert dead.done() and idle.cancelled()

    with caplog.at_level(logging.ERROR, logger="odradek.tasks"):
        asyncio.run(scenario())
    messages = [(r.getMessage(), r.exc_info) for r in caplog.records]
    assert len(messages) == 1
    assert messages[0][0] == "Background task doomed-loop died"
    assert isinstance(messages[0][1][1], RuntimeError)
