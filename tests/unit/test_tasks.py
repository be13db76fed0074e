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


def test_cancel_and_wait_passes_on_a_cancellation_of_the_caller() -> None:
    """A loop that stops a helper task while it is itself cancelled must end, not carry on
    (the controller's request sender did, and whoever closed it waited forever)."""

    async def slow_to_stop() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.05)  # cleanup that takes a moment

    async def loop(helper: asyncio.Task[None], rounds: list[int]) -> None:
        while True:
            rounds.append(1)
            await tasks.cancel_and_wait(helper)
            await asyncio.sleep(0.01)

    async def scenario() -> list[int]:
        helper = asyncio.get_running_loop().create_task(slow_to_stop())
        await asyncio.sleep(0)
        rounds: list[int] = []
        looping = asyncio.get_running_loop().create_task(loop(helper, rounds))
        await asyncio.sleep(0.01)  # the loop now waits for the helper's cleanup
        looping.cancel()
        await asyncio.wait_for(asyncio.wait([looping]), 2)
        assert looping.cancelled()
        await asyncio.wait_for(asyncio.wait([helper]), 2)  # (its cleanup still runs)
        assert helper.cancelled()
        return rounds

    assert asyncio.run(scenario()) == [1]


def test_cancel_and_wait_absorbs_the_tasks_own_end() -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    async def scenario() -> tuple[bool, bool]:
        failed = asyncio.get_running_loop().create_task(fails())
        idle = asyncio.get_running_loop().create_task(asyncio.sleep(60))
        await asyncio.sleep(0)
        await tasks.cancel_and_wait(failed)
        await tasks.cancel_and_wait(idle)
        await tasks.cancel_and_wait(None)
        return failed.done(), idle.cancelled()

    assert asyncio.run(scenario()) == (True, True)


def test_a_connection_closed_by_a_cancelled_task_lets_that_task_end() -> None:
    """BrokerConnection.close inside a task being cancelled: the task ends cancelled and the
    socket is closed."""
    from odradek.net.client import BrokerConnection

    async def scenario() -> tuple[bool, bool, bool]:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = BrokerConnection("127.0.0.1", port, "test")
        await conn.connect(timeout_s=5)
        carried_on = []

        async def closer() -> None:
            await conn.close()
            carried_on.append(True)

        task = asyncio.get_running_loop().create_task(closer())
        await asyncio.sleep(0)  # closer now waits for the connection's read task
        task.cancel()
        await asyncio.wait_for(asyncio.wait([task]), 5)
        server.close()
        await server.wait_closed()
        return task.cancelled(), bool(carried_on), conn.connected

    cancelled, carried_on, connected = asyncio.run(scenario())
    assert cancelled and not carried_on and not connected


def test_cancel_and_wait_cancels_again_a_task_that_swallowed_the_cancellation() -> None:
    async def stubborn(swallowed: list[int]) -> None:
        while True:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                if not swallowed:
                    swallowed.append(1)  # as asyncio.wait_for may in Python 3.11
                    continue
                raise

    async def scenario() -> tuple[bool, list[int]]:
        swallowed: list[int] = []
        task = asyncio.get_running_loop().create_task(stubborn(swallowed))
        await asyncio.sleep(0)
        await asyncio.wait_for(tasks.cancel_and_wait(task, recancel_after_s=0.05), 5)
        return task.cancelled(), swallowed

    assert asyncio.run(scenario()) == (True, [1])
