"""The durability run's faults (local/durability.py): one class per kind, made just before it
is injected (that is when it picks its broker), with ``inject`` and ``heal``.

| kind | victim | fault | healed by |
|---|---|---|---|
| ``kill-leader`` | a partition leader of the topic | SIGKILL | a restart within 3 s |
| ``kill-controller`` | the active controller | SIGKILL | a restart within 3 s |
| ``kill-any`` | any broker | SIGKILL | a restart within 3 s |
| ``pause`` | any broker | SIGSTOP past the session timeout | SIGCONT |
| ``kill-coordinator`` | the transactional id's coordinator (transactional runs) | SIGKILL | a restart within 3 s |

A victim that ZooKeeper cannot name (no leader, no controller) is any broker.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from odradek.broker.transaction.transaction_state import coordinator_partition
from odradek.local.cluster import LocalCluster

__all__ = ["DURABILITY_FAULTS", "TRANSACTIONAL_FAULTS", "BrokerFault", "BrokerTarget"]


@dataclass
class BrokerTarget:
    """What a fault acts on: the cluster, the topic whose leaders it may pick, the
    transactional id whose coordinator it may pick, the run's random draws and its log."""

    cluster: LocalCluster
    rng: random.Random
    topic: str
    partitions: int
    transactional_id: str
    log: Callable[[str], None]

    @property
    def session_timeout_s(self) -> float:
        return int(self.cluster.overrides.get("zookeeper.session.timeout.ms", "6000")) / 1000

    def dump_task_stacks(self, why: str) -> None:
        """Say ``why``, and have every broker log its asyncio tasks' stacks."""
        self.log(f"{why} (brokers log their task stacks: SIGUSR1)")
        for broker_id in self.cluster.brokers:
            self.cluster.signal_broker(broker_id, signal.SIGUSR1)


class BrokerFault:
    """One fault on one broker: ``victim``, chosen when the fault is made; ``action`` says
    what is done to it, ``description`` is the fault as the report lists it."""

    kind: ClassVar[str]

    def __init__(self, target: BrokerTarget) -> None:
        self.target = target
        victim = self.pick(target)
        self.victim = victim if victim is not None else target.rng.choice(list(target.cluster.brokers))

    def pick(self, target: BrokerTarget) -> int | None:
        """The broker this kind of fault aims at (None: any)."""
        return None

    @property
    def description(self) -> str:
        return f"{self.kind} broker {self.victim}"

    @property
    def action(self) -> str:
        raise NotImplementedError

    def inject(self) -> None:
        raise NotImplementedError

    def held_s(self) -> float:
        """How long the fault lasts (a random draw)."""
        raise NotImplementedError

    def heal(self) -> None:
        raise NotImplementedError


class KillBroker(BrokerFault):
    kind = "kill-any"

    @property
    def action(self) -> str:
        return f"SIGKILL broker {self.victim} ({self.kind})"

    def inject(self) -> None:
        self.target.cluster.kill_broker(self.victim)

    def held_s(self) -> float:
        return self.target.rng.random() * 3

    def heal(self) -> None:
        try:
            self.target.cluster.start_broker(self.victim, timeout_s=120)
        except TimeoutError:
            self.target.dump_task_stacks("broker did not come back")
            time.sleep(1)  # the stacks are written before the run fails
            raise


class KillLeader(KillBroker):
    kind = "kill-leader"

    def pick(self, target: BrokerTarget) -> int | None:
        state = target.cluster.state()
        leaders = [b for p in range(target.partitions) if (b := state.leader(target.topic, p)) is not None]
        return target.rng.choice(leaders) if leaders else None


class KillController(KillBroker):
    kind = "kill-controller"

    def pick(self, target: BrokerTarget) -> int | None:
        return target.cluster.state().controller()


class KillCoordinator(KillBroker):
    """The leader of the transactional id's ``__transaction_state`` partition."""

    kind = "kill-coordinator"

    def pick(self, target: BrokerTarget) -> int | None:
        count = int(target.cluster.overrides.get("transaction.state.log.num.partitions", "50"))
        partition = coordinator_partition(target.transactional_id, count)
        return target.cluster.state().leader("__transaction_state", partition)


class PauseBroker(BrokerFault):
    kind = "pause"

    @property
    def action(self) -> str:
        return f"SIGSTOP broker {self.victim} past the session timeout"

    def inject(self) -> None:
        self.target.cluster.signal_broker(self.victim, signal.SIGSTOP)

    def held_s(self) -> float:
        return self.target.session_timeout_s + 2 + self.target.rng.random() * 2

    def heal(self) -> None:
        self.target.cluster.signal_broker(self.victim, signal.SIGCONT)


DURABILITY_FAULTS: tuple[type[BrokerFault], ...] = (KillLeader, KillController, KillBroker, PauseBroker)
TRANSACTIONAL_FAULTS = (*DURABILITY_FAULTS, KillCoordinator)
