"""What the demo (``odradek demo``) does to its local cluster: run ``odradek topics``
against it, read partition states from ZooKeeper (through local/cluster_state.py), wait for
conditions, and fail a broker over. Each operation returns what happened; the narration is the command's
(``odradek.cli.demo``)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from odradek.assignment import assign_replicas_to_brokers
from odradek.local.cluster import LocalCluster
from odradek.local.cluster_state import poll_until

__all__ = ["CommandRun", "DemoCluster", "placement_example", "wait_for"]


@dataclass(frozen=True, slots=True)
class CommandRun:
    """One ``odradek topics`` run: the command as a user would type it, and what it did."""

    shown: str
    stdout: str
    stderr: str
    returncode: int


def wait_for(condition: Callable[[], object], timeout_s: float = 60.0, interval_s: float = 0.1) -> float:
    """Poll ``condition`` until it is true; the seconds that took. TimeoutError after ``timeout_s``."""
    start = time.monotonic()
    if not poll_until(condition, timeout_s, interval_s=interval_s):
        raise TimeoutError
    return time.monotonic() - start


def placement_example() -> dict[int, list[int]]:
    """Kafka's placement of 3 partitions with 3 replicas on brokers 0, 1, 2 when its random
    draws give start index 1 and replica shift 2."""
    return assign_replicas_to_brokers([0, 1, 2], 3, 3, rng=_FixedDraws(1, 2))


class _FixedDraws:
    """Stands in for ``random.Random``: hands out the given draws in order."""

    def __init__(self, *draws: int) -> None:
        self._draws = list(draws)

    def randrange(self, _n: int) -> int:
        return self._draws.pop(0)


class DemoCluster:
    """The demo's view of a started local cluster."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    def topics(self, *args: str) -> CommandRun:
        """Run ``odradek topics --zookeeper <the cluster's> ARGS`` in a subprocess."""
        result = subprocess.run([sys.executable, "-m", "odradek", "topics", "--zookeeper",
                                 self.cluster.zookeeper_connect, *args], capture_output=True, text=True)
        return CommandRun("odradek topics --zookeeper $ZK " + " ".join(args), result.stdout, result.stderr,
                          result.returncode)

    def online(self, topic: str, partitions: int) -> bool:
        """Every partition of ``topic`` has a leader."""
        state = self.cluster.state()
        return all(state.leader(topic, p) is not None for p in range(partitions))

    def leaders(self, topic: str, partitions: int) -> dict[int, int]:
        """The leader of each partition of ``topic`` that has a state (-1: none)."""
        states = self.cluster.state().partition_states(topic, partitions)
        return {p: s.leader for p, s in states.items() if s is not None}

    def in_every_isr(self, broker_id: int, topic: str, partitions: int) -> bool:
        """``broker_id`` is in the ISR of every partition of ``topic``."""
        return all(s is not None and broker_id in s.isr
                   for s in self.cluster.state().partition_states(topic, partitions).values())

    def topic_exists(self, topic: str) -> bool:
        """The topic is in ZooKeeper (the controller removes it when deletion ends)."""
        return self.cluster.state().topic_exists(topic)

    def kill_and_await_new_leaders(self, victim: int, topic: str, partitions: int) -> float:
        """SIGKILL ``victim`` and wait until its ZooKeeper session has expired (up to 60 s)
        and every partition of ``topic`` has a leader other than it (up to 90 s after the
        kill); the seconds since the kill."""
        state = self.cluster.state()
        self.cluster.kill_broker(victim)
        start = time.monotonic()
        poll_until(lambda: victim not in state.registered_brokers(), 60, interval_s=0.1)
        poll_until(lambda: all(state.leader(topic, p) not in (victim, None) for p in range(partitions)),
                   90 - (time.monotonic() - start), interval_s=0.1)
        return time.monotonic() - start
