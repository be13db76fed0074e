"""DelayedOperation and Purgatory (Kafka's DelayedOperation / DelayedOperationPurgatory):
``try_complete`` decides, ``on_complete`` runs exactly once (satisfied, forced or expired),
and operations are watched under every key they depend on."""

from __future__ import annotations

import asyncio

import pytest

from odradek.broker.purgatory import DelayedOperation, Purgatory


class Waiting(DelayedOperation):
    """Completes once ``ready`` is set; counts its completions."""

    def __init__(self, timeout_ms: int = 60_000, ready: bool = False) -> None:
        super().__init__(timeout_ms)
        self.ready = ready
        self.tries = 0
        self.completions = 0

    def try_complete(self) -> bool:
        self.tries += 1
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        self.completions += 1
        self.future.set_result("expired" if self.expired else "done")


def run(scenario: object) -> None:
    asyncio.run(scenario)  # type: ignore[arg-type]


def test_an_operation_that_can_complete_now_is_not_watched() -> None:
    async def scenario() -> None:
        purgatory = Purgatory()
        op = Waiting(ready=True)
        assert purgatory.try_complete_else_watch(op, ["a", "b"])
        assert op.completed and op.completions == 1 and await op.future == "done"
        assert purgatory.watched() == 0
        assert purgatory.check_and_complete("a") == 0
    run(scenario())


def test_a_watched_operation_completes_once_whichever_key_fires() -> None:
    async def scenario() -> None:
        purgatory = Purgatory()
        op = Waiting()
        assert not purgatory.try_complete_else_watch(op, ["a", "b"])
        assert purgatory.watched() == 2 and not op.future.done()
        # A key whose condition has not changed the outcome: tried, still waiting.
        assert purgatory.check_and_complete("a") == 0 and op.tries == 2
        op.ready = True
        assert purgatory.check_and_complete("b") == 1
        assert op.completions == 1 and await op.future == "done"
        # Still listed under "a", but never tried or completed again.
        assert purgatory.check_and_complete("a") == 0
        assert op.tries == 3 and op.completions == 1
        assert purgatory.watched() == 0
    run(scenario())


def test_operations_under_one_key_are_tried_independently() -> None:
    async def scenario() -> None:
        purgatory = Purgatory()
        first, second = Waiting(), Waiting()
        purgatory.try_complete_else_watch(first, ["k"])
        purgatory.try_complete_else_watch(second, ["k", "other"])
        second.ready = True
        assert purgatory.check_and_complete("k") == 1
        assert (first.completed, second.completed) == (False, True)
        assert purgatory.watched() == 1  # first, under "k"
        assert purgatory.check_and_complete("unknown") == 0
    run(scenario())


def test_expiry_completes_with_expired_set_and_only_once() -> None:
    async def scenario() -> None:
        purgatory = Purgatory()
        op = Waiting(timeout_ms=5)
        purgatory.try_complete_else_watch(op, ["k"])
        assert await asyncio.wait_for(op.future, 5) == "expired"
        assert op.expired and op.completions == 1
        op.ready = True
        assert not op.force_complete()
        assert purgatory.check_and_complete("k") == 0 and op.completions == 1
        purgatory.purge()
        assert purgatory.watched() == 0 and purgatory._watchers == {}
    run(scenario())


def test_completing_cancels_the_expiry() -> None:
    async def scenario() -> None:
        op = Waiting(timeout_ms=5)
        assert op.force_complete()
        assert not op.force_complete()
        assert op._timer.cancelled()  # the expiry will not fire
        assert not op.expired and op.completions == 1
    run(scenario())


def test_a_failing_on_complete_is_surfaced_through_the_future() -> None:
    class Broken(Waiting):
        def on_complete(self) -> None:
            raise RuntimeError("handler bug")

    async def scenario() -> None:
        op = Broken(ready=True)
        assert Purgatory().try_complete_else_watch(op, ["k"])
        with pytest.raises(RuntimeError, match="handler bug"):
            await op.future
    run(scenario())


def test_expired_operations_under_keys_nobody_checks_are_purged_every_interval() -> None:
    async def scenario() -> None:
        purgatory = Purgatory(purge_interval=3)
        expired = [Waiting(timeout_ms=0), Waiting(timeout_ms=0)]
        for i, op in enumerate(expired):
            purgatory.try_complete_else_watch(op, [f"idle-{i}"])
        await asyncio.wait_for(asyncio.gather(*(op.future for op in expired)), 5)
        assert len(purgatory._watchers) == 2  # still listed: nothing checked their keys
        live = Waiting()
        purgatory.try_complete_else_watch(live, ["busy"])  # the third watch purges
        assert list(purgatory._watchers) == ["busy"] and purgatory.watched() == 1
    run(scenario())


def test_checking_many_keys_tries_each_operation_once() -> None:
    async def scenario() -> None:
        purgatory = Purgatory()
        keys = [f"p{i}" for i in range(1000)]
        wide = Waiting()  # a follower's fetch: watches every partition it follows
        narrow = Waiting()
        assert not purgatory.try_complete_else_watch(wide, keys)
        assert not purgatory.try_complete_else_watch(narrow, ["p7"])
        assert purgatory.check_and_complete_all(keys) == 0
        assert (wide.tries, narrow.tries) == (2, 2)  # once when watched, once now: not 1,000 times
        assert purgatory.watched() == 1000 + 1  # still watched under every key
        wide.ready = narrow.ready = True
        assert purgatory.check_and_complete_all(["p7", "p8"]) == 2
        assert (wide.completions, narrow.completions) == (1, 1) and wide.tries == 3
        assert purgatory.watched() == 0
        assert purgatory.check_and_complete_all(keys) == 0 and wide.tries == 3
    run(scenario())
