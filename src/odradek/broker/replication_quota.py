"""ReplicationQuotaManager: replication throttles (Kafka's ReplicationQuotaManager, KIP-73).

Two per broker: the leader's (bytes it sends to followers of throttled partitions, bounded by
``leader.replication.throttled.rate``) and the follower's (bytes it fetches for throttled
partitions, ``follower.replication.throttled.rate``).  A partition is throttled on this broker
when its topic's ``leader|follower.replication.throttled.replicas`` lists ``partition:broker``
with this broker's id, or is ``*``.  Only replicas outside the ISR are held back (a replica in
the ISR must keep up), but every throttled byte counts towards the rate, as in Kafka.

The rate is measured over ``replication.quota.window.num`` windows of
``replication.quota.window.size.seconds``: bytes in the live windows divided by the time since
the oldest of them started (at least one window).  Kafka divides by at least all but one
window, which lets a throttled replica start with a burst of ~10 s worth of bytes; this
manager allows one window's worth.  ``allowance()`` is what may be sent now without going over.

``active`` is the one check the fetch path makes when nothing is throttled: False unless some
partition is throttled and the rate is finite.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping

__all__ = ["ALL_REPLICAS", "UNBOUNDED", "ReplicationQuotaManager", "throttled_partitions"]

UNBOUNDED = 2**63 - 1  # Kafka's default rate: Long.MaxValue, no throttle
ALL_REPLICAS = "*"


def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions a ``*.replication.throttled.replicas`` value throttles on ``broker_id``:
    None for ``*`` (all of them)."""
    if value.strip() == ALL_REPLICAS:
        return None
    partitions = set()
    for entry in value.split(","):
        partition, sep, broker = entry.strip().partition(":")
        if sep and broker.strip().isdigit() and int(broker) == broker_id and partition.strip().isdigit():
            partitions.add(int(partition))
    return frozenset(partitions)


class ReplicationQuotaManager:
    """One direction's throttle on this broker (leader or follower)."""

    def __init__(self, broker_id: int, replicas_config: str, window_num: int = 11, window_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.broker_id = broker_id
        self.replicas_config = replicas_config  # the topic config naming this direction's replicas
        self.window_num = window_num
        self.window_s = window_s
        self._clock = clock
        self.bound = UNBOUNDED
        self._throttled: dict[str, frozenset[int] | None] = {}  # topic -> partitions (None: all)
        self._windows: deque[list[float]] = deque()  # [start, bytes], oldest first
        self.active = False

    def update_bound(self, bytes_per_s: int) -> None:
        self.bound = bytes_per_s
        self._refresh()

    def update_topic(self, topic: str, overrides: Mapping[str, str]) -> None:
        """A topic's config was applied: its throttled partitions on this broker, if any."""
        value = overrides.get(self.replicas_config, "")
        partitions = throttled_partitions(value, self.broker_id) if value.strip() else frozenset()
        if partitions is None or partitions:
            self._throttled[topic] = partitions
        else:
            self._throttled.pop(topic, None)
        self._refresh()

    def _refresh(self) -> None:
        self.active = bool(self._throttled) and self.bound < UNBOUNDED

    def is_throttled(self, topic: str, partition: int) -> bool:
        if topic not in self._throttled:
            return False
        partitions = self._throttled[topic]
        return partitions is None or partition in partitions

    def _expire(self, now: float) -> None:
        horizon = now - self.window_num * self.window_s
        while self._windows and self._windows[0][0] + self.window_s <= horizon:
            self._windows.popleft()

    def record(self, size: int) -> None:
        """Bytes of throttled partitions sent (leader) or fetched (follower)."""
        now = self._clock()
        self._expire(now)
        if not self._windows or now >= self._windows[-1][0] + self.window_s:
            self._windows.append([now, 0.0])
        self._windows[-1][1] += size

    def allowance(self) -> int:
        """Bytes that may go now with the rate staying within the bound (<= 0: none)."""
        if self.bound >= UNBOUNDED:
            return UNBOUNDED
        now = self._clock()
        self._expire(now)
        if not self._windows:
            return int(self.bound * self.window_s)
        elapsed = max(now - self._windows[0][0], self.window_s)
        total = sum(w[1] for w in self._windows)
        return int(self.bound * elapsed - total)

    def is_quota_exceeded(self) -> bool:
        return self.allowance() <= 0

    def delay_s(self) -> float:
        """How long until some bytes may go again (0 if they may now)."""
        missing = -self.allowance()
        return 0.0 if missing < 0 else (missing + 1) / self.bound if self.bound else self.window_s
