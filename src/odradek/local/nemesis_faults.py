"""The partition nemesis's faults, after Jepsen's Kafka analysis: one class per kind, made
just before it is injected (that is when it picks its victims), with ``inject`` and
``heal``. ``FAULTS`` is the table the runner (local/nemesis.py) cycles through; a new kind
is one more class in it.

| kind | fault | healed by |
|---|---|---|
| ``zombie`` | the broker leading the most partitions cut off from every ZooKeeper node and the other brokers (clients still reach it) | removing the cuts |
| ``controller`` | the controller isolated from every host, the client too | removing the cuts |
| ``zk-cut`` | every ZooKeeper node cut off from every broker | removing the cuts |
| ``minority`` | one broker against the other brokers and ZooKeeper (the client sees both) | removing the cuts |
| ``bridge`` | two brokers (one the busiest leader) that cannot see each other, both seeing the third and ZooKeeper | removing the cuts |
| ``loss`` | 25% of the packets every broker sends dropped | removing the loss tables |
| ``zk-kill`` | one ZooKeeper node killed (an ensemble of 3 or more only) | restarting it |
| ``zk-majority`` | a majority of the ZooKeeper nodes killed (3 or more only) | restarting them |
| ``pause-partition`` | a leader SIGSTOPped and isolated | removing the cuts, then SIGCONT |

Each is held past ``zookeeper.session.timeout.ms`` (``loss`` a while longer).
"""

from __future__ import annotations

import random
import signal
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, TypeVar

from kazoo.exceptions import KazooException

from odradek.local.cluster_state import ClusterState

if TYPE_CHECKING:
    from odradek.local.lab import Lab

__all__ = ["FAULTS", "FAULT_KINDS", "LabFault", "LabTarget"]

_T = TypeVar("_T")


@dataclass
class LabTarget:
    """What a fault acts on: the lab and its hosts by role, the topic whose leaders it may
    pick, the run's random draws, and where failed ZooKeeper reads are told."""

    lab: Lab
    rng: random.Random
    topic: str
    partitions: int
    log: Callable[[str], None]

    @property
    def zk_hosts(self) -> list[str]:
        return sorted(h.name for h in self.lab.hosts.values() if h.role == "zookeeper")

    @property
    def broker_hosts(self) -> list[str]:
        return sorted(h.name for h in self.lab.hosts.values() if h.role == "broker")

    def busiest_leader(self) -> str:
        """The host of the broker leading the most partitions of the topic (a tie, or no
        answer from ZooKeeper: a random one)."""
        states = self._read(lambda s: s.partition_states(self.topic, self.partitions)) or {}
        counts = Counter(s.leader for s in states.values() if s is not None and s.leader >= 0)
        if not counts:
            return self.rng.choice(self.broker_hosts)
        most = max(counts.values())
        leader = self.rng.choice(sorted(b for b, c in counts.items() if c == most))
        return self.lab.host_of_broker(leader).name

    def controller_host(self) -> str | None:
        """The host of the active controller, if ZooKeeper names one."""
        controller = self._read(lambda s: s.controller())
        return None if controller is None else self.lab.host_of_broker(controller).name

    def _read(self, read: Callable[[ClusterState], _T]) -> _T | None:
        """A read through the management leg; None while ZooKeeper does not answer."""
        try:
            return read(self.lab.cluster.state())
        except KazooException as e:  # e.g. the ensemble lost its quorum: asked again later
            self.log(f"ZooKeeper read failed: {e!r}")
            return None


class LabFault:
    """One fault: its victims are chosen when it is made, ``description`` says what it does."""

    kind: ClassVar[str]

    def __init__(self, target: LabTarget) -> None:
        self.target = target
        self.description = ""

    @classmethod
    def unavailable(cls, target: LabTarget) -> str | None:
        """Why the target's lab cannot have this fault (None: it can)."""
        return None

    def held_s(self, past_session_s: float, hold_s: float) -> float:
        """How long the fault lasts: past the session timeout (``past_session_s``); ``hold_s``
        is how long a fault that needs no session expiry lasts."""
        return past_session_s

    def inject(self) -> None:
        raise NotImplementedError

    def heal(self) -> None:
        self.target.lab.heal()


class _Partition(LabFault):
    """Two sides of hosts that cannot reach each other."""

    side_a: list[str]
    side_b: list[str]

    def inject(self) -> None:
        self.target.lab.partition(self.side_a, self.side_b)


class Zombie(_Partition):
    kind = "zombie"

    def __init__(self, target: LabTarget) -> None:
        super().__init__(target)
        leader = target.busiest_leader()
        others = [h for h in target.broker_hosts if h != leader]
        self.side_a, self.side_b = [leader], target.zk_hosts + others
        self.description = f"{leader} cut off from ZooKeeper and {', '.join(others)}"


class IsolatedController(LabFault):
    kind = "controller"

    def __init__(self, target: LabTarget) -> None:
        super().__init__(target)
        self.controller = target.controller_host() or target.rng.choice(target.broker_hosts)
        self.description = f"controller {self.controller} isolated"

    def inject(self) -> None:
        self.target.lab.isolate(self.controller)


class ZooKeeperCut(_Partition):
    kind = "zk-cut"

    def __init__(self, target: LabTarget) -> None:
        super().__init__(target)
        self.side_a, self.side_b = target.zk_hosts, target.broker_hosts
        self.description = f"{', '.join(target.zk_hosts)} cut off from every broker"


class Minority(_Partition):
    kind = "minority"

    def __init__(self, target: LabTarget) -> None:
        super().__init__(target)
        lone = target.rng.choice(target.broker_hosts)
        self.side_a, self.side_b = [lone], [h for h in target.broker_hosts if h != lone] + target.zk_hosts
        self.description = f"{lone} alone against the other brokers and ZooKeeper"


class Bridge(_Partition):
    kind = "bridge"

    def __init__(self, target: LabTarget) -> None:
        super().__init__(target)
        # One side leads partitions: between two followers of a third leader a bridge cuts nothing used.
        a = target.busiest_leader()
        b = target.rng.choice([h for h in target.broker_hosts if h != a])
        self.side_a, self.side_b = [a], [b]
        self.description = f"{a} and {b} cannot see each other, both see the rest"


class Loss(LabFault):
    kind = "loss"
    percent = 25

    def __init__(self, target: LabTarget) -> None:
        super().__init__(target)
        self.description = f"{self.percent}% packet loss on every broker"

    def held_s(self, past_session_s: float, hold_s: float) -> float:
        return hold_s + past_session_s

    def inject(self) -> None:
        for host in self.target.broker_hosts:
            self.target.lab.loss(host, self.percent)


class ZooKeeperKill(LabFault):
    """Some ZooKeeper nodes killed, then restarted."""

    kind = "zk-kill"

    def __init__(self, target: LabTarget) -> None:
        super().__init__(target)
        self.victims = target.rng.sample(target.zk_hosts, self.count(len(target.zk_hosts)))
        self.description = f"ZooKeeper {', '.join(self.victims)} killed, then restarted"

    @staticmethod
    def count(members: int) -> int:
        """How many of ``members`` nodes are killed."""
        return 1

    @classmethod
    def unavailable(cls, target: LabTarget) -> str | None:
        members = len(target.zk_hosts)
        return None if members >= 3 else f"needs a ZooKeeper ensemble of 3 or more (this lab has {members})"

    def inject(self) -> None:
        for host in self.victims:
            self.target.lab.kill(host)

    def heal(self) -> None:
        for host in self.victims:
            self.target.lab.restart(host)


class ZooKeeperMajority(ZooKeeperKill):
    kind = "zk-majority"

    @staticmethod
    def count(members: int) -> int:
        return members // 2 + 1


class PausedLeader(LabFault):
    kind = "pause-partition"

    def __init__(self, target: LabTarget) -> None:
        super().__init__(target)
        self.leader = target.busiest_leader()
        self.description = f"leader {self.leader} SIGSTOPped and isolated"

    def inject(self) -> None:
        self.target.lab.signal(self.leader, signal.SIGSTOP)
        self.target.lab.isolate(self.leader)

    def heal(self) -> None:
        super().heal()
        self.target.lab.signal(self.leader, signal.SIGCONT)


FAULTS: dict[str, type[LabFault]] = {fault.kind: fault for fault in (
    Zombie, IsolatedController, ZooKeeperCut, Minority, Bridge, Loss, ZooKeeperKill, ZooKeeperMajority, PausedLeader)}
FAULT_KINDS = tuple(FAULTS)
