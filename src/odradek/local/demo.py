"""What the demo (``odradek demo``) does to its local cluster: run ``odradek topics``
against it, read partition states from ZooKeeper, wait for conditions, and fail a broker
over. Each operation returns what happened; the narration is the command's
(``odradek.cli.demo``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.assignment import assign_replicas_to_brokers
from odradek.local.cluster import LocalCluster

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
    while not condition():
        if time.monotonic() - start > timeout_s:
            raise TimeoutError
        time.sleep(interval_s)
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

    def state(self, topic: str, partition: int) -> dict[str, Any] | None:
        """The partition's leader-and-ISR state in ZooKeeper, or None before it is written."""
        zk = self.cluster.zk_client()
        path = f"/brokers/topics/{topic}/partitions/{partition}/state"
        return json.loads(zk.get(path)[0]) if zk.exists(path) else None

    def online(self, topic: str, partitions: int) -> bool:
        """Every partition of ``topic`` has a leader."""
        return all((s := self.state(topic, p)) is not None and s["leader"] >= 0 for p in range(partitions))

    def leaders(self, topic: str, partitions: int) -> dict[int, int]:
        """The leader of each partition of ``topic`` (all must have a state)."""
        return {p: self.state(topic, p)["leader"] for p in range(partitions)}  # type: ignore[index]

    def in_every_isr(self, broker_id: int, topic: str, partitions: int) -> bool:
        """``broker_id`` is in the ISR of every partition of ``topic``."""
        return all(broker_id in (self.state(topic, p) or {}).get("isr", []) for p in range(partitions))

    def topic_exists(self, topic: str) -> bool:
        """``/brokers/topics/<topic>`` exists (the controller removes it when deletion ends)."""
        return self.cluster.zk_client().exists(f"/brokers/topics/{topic}") is not None

    def registered(self, broker_id: int) -> bool:
        """``/brokers/ids/<broker_id>`` exists."""
        return self.cluster.zk_client().exists(f"/brokers/ids/{broker_id}") is not None

    def kill_and_await_new_leaders(self, victim: int, topic: str, partitions: int) -> float:
        """SIGKILL ``victim`` and wait until its ZooKeeper session has expired (up to 60 s)
        and every partition of ``topic`` has a leader other than it (up to 90 s after the
        kill); the seconds since the kill."""
        self.cluster.kill_broker(victim)
        start = time.monotonic()
        while self.registered(victim) and time.monotonic() - start < 60:
            time.sleep(0.1)
        while time.monotonic() - start < 90 and not all(
                (s := self.state(topic, p)) is not None and s["leader"] not in (victim, -1)
                for p in range(partitions)):
            time.sleep(0.1)
        return time.monotonic() - start
