"""The durability run's fault table against a cluster that records what it is told: each
kind's victim, what it does, how long it holds, and how it heals."""

from __future__ import annotations

import random
import signal
from typing import Any

import pytest

from odradek.broker.transaction.transaction_state import coordinator_partition
from odradek.local.durability_faults import DURABILITY_FAULTS, TRANSACTIONAL_FAULTS, BrokerTarget


class RecordingCluster:
    """Three brokers; ZooKeeper names leaders of "t" (broker 2 leads p0 and p2), the
    controller (1) and the coordinator of "t-txn" (0), unless told it has none."""

    def __init__(self, named: bool = True, start_times_out: bool = False) -> None:
        self.brokers = {0: None, 1: None, 2: None}
        self.overrides = {"zookeeper.session.timeout.ms": "4000", "transaction.state.log.num.partitions": "50"}
        self.calls: list[tuple[Any, ...]] = []
        self.named = named
        self.start_times_out = start_times_out

    def state(self) -> RecordingCluster:
        return self

    def leader(self, topic: str, partition: int) -> int | None:
        if not self.named:
            return None
        if topic == "__transaction_state":
            return 0 if partition == coordinator_partition("t-txn", 50) else None
        return {0: 2, 1: None, 2: 2}[partition]

    def controller(self) -> int | None:
        return 1 if self.named else None

    def kill_broker(self, broker_id: int) -> None:
        self.calls.append(("kill", broker_id))

    def start_broker(self, broker_id: int, timeout_s: float) -> None:
        self.calls.append(("start", broker_id))
        if self.start_times_out:
            raise TimeoutError

    def signal_broker(self, broker_id: int, sig: int) -> None:
        self.calls.append(("signal", broker_id, sig))


def target(cluster: RecordingCluster, log: list[str] | None = None) -> BrokerTarget:
    return BrokerTarget(cluster, random.Random(5), "t", 3, "t-txn", (log if log is not None else []).append)  # type: ignore[arg-type]


def fault_of(kind: str, cluster: RecordingCluster, log: list[str] | None = None) -> Any:
    [fault] = [f for f in TRANSACTIONAL_FAULTS if f.kind == kind]
    return fault(target(cluster, log))


def test_the_tables_keep_their_order() -> None:
    assert [f.kind for f in DURABILITY_FAULTS] == ["kill-leader", "kill-controller", "kill-any", "pause"]
    assert [f.kind for f in TRANSACTIONAL_FAULTS] == [f.kind for f in DURABILITY_FAULTS] + ["kill-coordinator"]


@pytest.mark.parametrize(("kind", "victim"), [("kill-leader", 2), ("kill-controller", 1), ("kill-coordinator", 0)])
def test_kills_aim_at_what_zookeeper_names_and_restart_it(kind: str, victim: int) -> None:
    cluster = RecordingCluster()
    fault = fault_of(kind, cluster)
    assert fault.victim == victim
    assert (fault.description, fault.action) == (f"{kind} broker {victim}", f"SIGKILL broker {victim} ({kind})")
    fault.inject()
    assert 0 <= fault.held_s() < 3
    fault.heal()
    assert cluster.calls == [("kill", victim), ("start", victim)]


def test_a_victim_zookeeper_does_not_name_is_any_broker() -> None:
    assert all(fault_of(kind, RecordingCluster(named=False)).victim in {0, 1, 2}
               for kind in ("kill-leader", "kill-controller", "kill-coordinator"))


def test_a_pause_lasts_past_the_session_timeout() -> None:
    cluster = RecordingCluster()
    fault = fault_of("pause", cluster)
    assert fault.action == f"SIGSTOP broker {fault.victim} past the session timeout"
    fault.inject()
    assert 6 <= fault.held_s() < 8  # 4 s session + 2 + up to 2
    fault.heal()
    assert cluster.calls == [("signal", fault.victim, signal.SIGSTOP), ("signal", fault.victim, signal.SIGCONT)]


def test_a_broker_that_does_not_come_back_has_every_broker_log_its_stacks() -> None:
    cluster = RecordingCluster(start_times_out=True)
    told: list[str] = []
    fault = fault_of("kill-any", cluster, told)
    with pytest.raises(TimeoutError):
        fault.heal()
    assert told == ["broker did not come back (brokers log their task stacks: SIGUSR1)"]
    assert cluster.calls[1:] == [("signal", b, signal.SIGUSR1) for b in (0, 1, 2)]
