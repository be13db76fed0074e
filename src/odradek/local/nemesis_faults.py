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
| ``kill`` | the busiest leader or the controller SIGKILLed | restarting it |
| ``clock-jump`` | a broker's wall clock stepped forward or back by seconds to hours (the busiest leader, or the controller) | stepping it back to the system's |
| ``clock-rate`` | a broker's wall clock running 4 times as fast, or a quarter as fast | stepping it back to the system's |
| ``disk-full`` | the busiest leader's second log directory (a tmpfs) filled: its next write there fails with ENOSPC and the broker takes the directory offline (labs with small disks only) | freeing the disk, then restarting the broker (Kafka brings an offline directory back only at a restart) |
| ``hung-txn`` | a transactional producer (local/hung_txn.py) SIGSTOPped mid-transaction past its ``transaction.timeout.ms`` (workloads with transactional producers only) | SIGCONT; its commit must be refused, the coordinator having aborted it |

Each is held past ``zookeeper.session.timeout.ms`` (``loss`` a while longer, ``hung-txn`` past
its transaction timeout too).
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, TypeVar

from confluent_kafka import Consumer, KafkaException, TopicPartition
from kazoo.exceptions import KazooException

from odradek.admin.client import AdminClientError
from odradek.admin.log_dirs import LogDirsAdmin, LogDirsCommandError
from odradek.local.cluster_state import ClusterState, poll_until
from odradek.local.lab import disk_dir
from odradek.local.txn_checker import Txn, TxnRecord
from odradek.protocol.errors import ErrorCode, KafkaError

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
    transactional: bool = False  # the workload writes <topic>-txn
    hung: list[Txn] = field(default_factory=list)  # the hung-txn faults' transactions, for the checker

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


class BrokerKill(LabFault):
    """A broker SIGKILLed (no shutdown of any kind, its page cache kept: a process crash),
    then restarted on its log."""

    kind = "kill"

    def __init__(self, target: LabTarget) -> None:
        super().__init__(target)
        self.host = target.rng.choice([target.busiest_leader(), target.controller_host() or target.busiest_leader()])
        self.description = f"{self.host} SIGKILLed, then restarted"

    def inject(self) -> None:
        self.target.lab.kill(self.host)

    def heal(self) -> None:
        _restart_until_up(self.target, self.host)


def _restart_until_up(target: LabTarget, host: str) -> None:
    """Restart broker ``host``, as a supervisor would, until it stays up: a broker that cannot
    reach ZooKeeper within its connection timeout exits (as Kafka's does), which happens while
    an ensemble just restarted by an earlier fault still elects its leader."""
    for attempt in range(1, 4):
        try:
            target.lab.restart(host, timeout_s=120)
            return
        except (RuntimeError, TimeoutError) as e:
            if attempt == 3:
                raise
            target.log(f"{host} did not come back (attempt {attempt}): {str(e).splitlines()[0]}")


class DiskFull(LabFault):
    """A broker's second log directory full (lab.fill_disk): the broker takes it offline at its
    next write there, and the controller moves the leadership of its partitions there to the
    other replicas; the broker serves on from its first directory. Healed by freeing the disk
    and restarting the broker, which recovers the directory's logs (a batch cut short by the
    full disk is truncated) and catches up."""

    kind = "disk-full"
    offline_wait_s = 10.0  # how long inject waits to see the directory offline

    def __init__(self, target: LabTarget) -> None:
        super().__init__(target)
        self.host = target.busiest_leader()
        self.description = f"{self.host}'s second log directory filled"

    @classmethod
    def unavailable(cls, target: LabTarget) -> str | None:
        return None if target.lab.disk_mb else "needs a lab whose brokers have small disks (disk_mb > 0)"

    def inject(self) -> None:
        lab = self.target.lab
        written = lab.fill_disk(self.host)
        filled = time.monotonic()
        offline = poll_until(self._offline, self.offline_wait_s, interval_s=0.1)
        self.description += f" ({written >> 20} MiB written); the directory " + (
            f"went offline after {time.monotonic() - filled:.1f} s" if offline else
            f"was still online {self.offline_wait_s:g} s later")

    def _offline(self) -> bool:
        """Whether the broker answers DescribeLogDirs with KAFKA_STORAGE_ERROR for its small disk."""
        lab = self.target.lab
        broker_id = lab.broker_id(self.host)
        disk = str(disk_dir(lab.dir / self.host))
        try:
            described = asyncio.run(LogDirsAdmin(lab.bootstrap_servers).describe_log_dirs([broker_id]))
        except (AdminClientError, KafkaError, LogDirsCommandError, OSError, asyncio.TimeoutError):
            return False
        return any(d.path == disk and d.error == ErrorCode.kafka_storage_error for d in described[broker_id])

    def heal(self) -> None:
        super().heal()  # frees the disk
        _restart_until_up(self.target, self.host)


class ClockJump(LabFault):
    """A broker's wall clock (record timestamps, retention and rolling, transaction and
    session expiry, ISR lag) stepped by seconds to hours, forward or back; its monotonic clocks
    run on, as under a real step (broker/clock_skew.py)."""

    kind = "clock-jump"
    steps_ms = (30_000, 600_000, 3_600_000, 6 * 3_600_000)

    def __init__(self, target: LabTarget) -> None:
        super().__init__(target)
        self.host = target.rng.choice([target.busiest_leader(), target.controller_host() or target.busiest_leader()])
        self.offset_ms = target.rng.choice(self.steps_ms) * target.rng.choice((1, -1))
        self.description = f"{self.host}'s clock stepped {_duration(self.offset_ms)}"

    def inject(self) -> None:
        self.target.lab.clock(self.host, self.offset_ms)


class ClockRate(LabFault):
    """A broker's wall clock running fast or slow (then stepped back to the system's)."""

    kind = "clock-rate"

    def __init__(self, target: LabTarget) -> None:
        super().__init__(target)
        self.host = target.busiest_leader()
        self.rate = target.rng.choice((4.0, 0.25))
        self.description = f"{self.host}'s clock running {'4 times as fast' if self.rate > 1 else 'a quarter as fast'}"

    def inject(self) -> None:
        self.target.lab.clock(self.host, 0, self.rate)


def _duration(ms: int) -> str:
    sign = "forward" if ms > 0 else "back"
    seconds = abs(ms) // 1000
    return f"{sign} {seconds // 3600} h" if seconds >= 3600 else f"{sign} {seconds} s"


class HungTransaction(LabFault):
    """A transaction left open by a stopped producer: the coordinator must abort it once its
    timeout passes (KIP-98), and the producer, continued, must not commit it."""

    kind = "hung-txn"
    timeout_ms = 4000

    def __init__(self, target: LabTarget) -> None:
        super().__init__(target)
        self.id = f"h{len(target.hung)}"
        self.partitions = sorted(target.rng.sample(range(target.partitions), min(3, target.partitions)))
        self.records: list[list[object]] = []
        self.process: subprocess.Popen[str] | None = None
        self.description = (f"a producer SIGSTOPped in transaction {self.id} (partitions {self.partitions}) "
                            f"past its {self.timeout_ms} ms timeout")

    @classmethod
    def unavailable(cls, target: LabTarget) -> str | None:
        return None if target.transactional else "needs the workload's transactional producers"

    def held_s(self, past_session_s: float, hold_s: float) -> float:
        return self.timeout_ms / 1000 + past_session_s

    def inject(self) -> None:
        lab = self.target.lab
        self.process = lab.popen("client", [
            sys.executable, "-m", "odradek.local.hung_txn", "--bootstrap", lab.bootstrap_servers,
            "--topic", f"{self.target.topic}-txn", "--id", self.id, "--timeout-ms", str(self.timeout_ms),
            "--partitions", ",".join(map(str, self.partitions))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # its records delivered, the transaction open
        if not line.startswith("open "):
            self.target.log(f"{self.id}: the producer did not open its transaction (exit {self.process.poll()})")
            return
        self.records = json.loads(line[len("open "):])
        self.process.send_signal(signal.SIGSTOP)

    def heal(self) -> None:
        process = self.process
        if process is None or not self.records:
            if process is not None:
                process.kill()
                process.wait(10)
            return
        if not poll_until(self._completed, 60, interval_s=1.0):  # the coordinator checks every 10 s (Kafka's default)
            self.target.log(f"{self.id}: the transaction still holds the LSO 60 s after the hold")
        process.send_signal(signal.SIGCONT)
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write("commit\n")
            process.stdin.flush()
            answer = process.stdout.readline().strip()
            process.wait(60)
        except (OSError, subprocess.TimeoutExpired) as e:
            answer = f"no answer: {e!r}"
            process.kill()
            process.wait(10)
        # What the client learnt: a refused commit leaves the transaction aborted (by the
        # coordinator's timeout), a commit that went through is one the checker holds.
        outcome = "committed" if answer == "outcome committed" else "aborted" if answer.startswith(
            "outcome refused") else "unknown"
        self.description += f"; after SIGCONT: {answer}"
        self.target.hung.append(Txn(self.id, outcome, tuple(TxnRecord(str(v), int(p), o) for v, p, o in self.records), ()))

    def _completed(self) -> bool:
        """Every partition's last stable offset past this transaction's record: the
        coordinator has ended it (or something else has)."""
        consumer = Consumer({"bootstrap.servers": self.target.lab.bootstrap_servers, "group.id": "nemesis-lso",
                             "isolation.level": "read_committed", "log_level": 0})
        try:
            return all(consumer.get_watermark_offsets(TopicPartition(f"{self.target.topic}-txn", int(p)), timeout=10)[1]
                       > int(o) for _, p, o in self.records if o is not None)
        except KafkaException:
            return False
        finally:
            consumer.close()


FAULTS: dict[str, type[LabFault]] = {fault.kind: fault for fault in (
    Zombie, IsolatedController, ZooKeeperCut, Minority, Bridge, Loss, ZooKeeperKill, ZooKeeperMajority, PausedLeader,
    BrokerKill, ClockJump, ClockRate, DiskFull, HungTransaction)}
FAULT_KINDS = tuple(FAULTS)
