"""Delayed operations (Kafka's DelayedOperation and purgatory).

An operation that cannot complete now (an acks=all produce waiting for the high watermark,
a fetch waiting for ``min_bytes``) is parked under the partitions it depends on.  Whoever
changes a partition's high watermark or log end offset calls ``check_and_complete`` for it;
each operation completes exactly once: satisfied, or expired after its timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable
from typing import Any

from odradek.protocol.errors import ErrorCode

__all__ = ["DelayedOperation", "DelayedPartitionsOperation", "Purgatory"]


class DelayedOperation:
    """Subclasses implement ``try_complete`` (return True once satisfied and call
    ``force_complete``) and ``on_complete`` (set ``future``'s result)."""

    def __init__(self, timeout_ms: int) -> None:
        loop = asyncio.get_running_loop()
        self.future: asyncio.Future[Any] = loop.create_future()
        self.completed = False
        self.expired = False
        self._timer = loop.call_later(max(timeout_ms, 0) / 1000, self._expire)

    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_complete(self) -> None:
        raise NotImplementedError

    def force_complete(self) -> bool:
        """Complete now; False if it already was (so ``on_complete`` runs exactly once)."""
        if self.completed:
            return False
        self.completed = True
        self._timer.cancel()
        try:
            self.on_complete()
        except Exception as e:  # surface handler bugs through the awaiting request
            if not self.future.done():
                self.future.set_exception(e)
        return True

    def _expire(self) -> None:
        if not self.completed:
            self.expired = True
            self.force_complete()


class DelayedPartitionsOperation(DelayedOperation):
    """An operation over partitions (``results`` by partition, ``pending`` the ones still
    waiting), answered with ``results``: those still pending at the timeout answer
    REQUEST_TIMED_OUT. Subclasses set both and implement ``try_complete``."""

    results: dict[Any, Any]
    pending: set[Any]

    def on_complete(self) -> None:
        for key in self.pending:
            self.results[key].error = ErrorCode.request_timed_out
        self.future.set_result(self.results)


class Purgatory:
    """Operations watched under keys.  Every ``purge_interval`` watched operations, the
    completed ones are dropped (Kafka's ``*.purgatory.purge.interval.requests``): one that
    expired under a key nobody checks again would otherwise stay listed forever."""

    def __init__(self, purge_interval: int = 1000) -> None:
        self._watchers: dict[Hashable, list[DelayedOperation]] = {}
        self.purge_interval = purge_interval
        self._watched_since_purge = 0

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if it can be, else watch it under ``keys``."""
        if op.try_complete():
            return True
        for key in keys:
            self._watchers.setdefault(key, []).append(op)
        self._watched_since_purge += 1
        if self._watched_since_purge >= self.purge_interval:
            self.purge()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Try the operations watching ``key``; returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        done = 0
        remaining = []
        for op in ops:
            if op.completed:
                continue
            if op.try_complete():
                done += 1
            else:
                remaining.append(op)
        self._rewatch(key, remaining)
        return done

    def check_and_complete_all(self, keys: Iterable[Hashable]) -> int:
        """Try the operations watching any of ``keys``, each once: an operation watching many
        of them (a follower's fetch over the thousands of partitions it follows from here) is
        not tried again for every key, which made waking it after a LeaderAndIsr for thousands
        of partitions cost their number squared.  The same outcome as ``check_and_complete``
        for each key in turn, since nothing an operation reads changes between the tries.
        Returns how many completed."""
        outcome: dict[int, bool] = {}  # id(op) -> whether it completed when tried
        done = 0
        for key in keys:
            ops = self._watchers.get(key)
            if not ops:
                continue
            remaining = []
            for op in ops:
                if op.completed:
                    continue
                completed = outcome.get(id(op))
                if completed is None:
                    completed = outcome[id(op)] = op.try_complete()
                    done += completed
                if not completed:
                    remaining.append(op)
            self._rewatch(key, remaining)
        return done

    def _rewatch(self, key: Hashable, remaining: list[DelayedOperation]) -> None:
        """Keep ``remaining`` (the operations still waiting) under ``key``, or drop the key."""
        if remaining:
            self._watchers[key] = remaining
        else:
            del self._watchers[key]

    def watched(self) -> int:
        return sum(1 for ops in self._watchers.values() for op in ops if not op.completed)

    def purge(self) -> None:
        """Drop completed operations (those that expired are still listed until now)."""
        self._watched_since_purge = 0
        for key in list(self._watchers):
            live = [op for op in self._watchers[key] if not op.completed]
            if live:
                self._watchers[key] = live
            else:
                del self._watchers[key]
