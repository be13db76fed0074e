"""The nemesis's fault table against a lab that records what it is told: each kind's victims,
description, inject and heal, and the kinds a small lab cannot have."""

from __future__ import annotations

import random
import signal
from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss

from odradek.local.nemesis_faults import FAULT_KINDS, FAULTS, LabTarget
from odradek.zk.zk_data import LeaderAndIsr

ZK = ["zk1", "zk2", "zk3"]
BROKERS = ["broker0", "broker1", "broker2"]
LEADERS = {0: 1, 1: 1, 2: 0, 3: 2, 4: 1, 5: -1}  # broker 1 leads the most partitions


class RecordingLab:
    """The calls a fault makes on a lab, in order; ZooKeeper's answers are given."""

    def __init__(self, zookeepers: int = 3, controller: int | None = 2, zk_down: bool = False,
                 disk_mb: int = 512) -> None:
        names = [(h, "zookeeper") for h in ZK[:zookeepers]] + [(h, "broker") for h in BROKERS]
        self.hosts = {name: SimpleNamespace(name=name, role=role) for name, role in names}
        self.calls: list[tuple[Any, ...]] = []
        self.cluster = SimpleNamespace(state=lambda: self)
        self._controller = controller
        self._zk_down = zk_down
        self.disk_mb = disk_mb

    # ZooKeeper's answers (ClusterState's reads)
    def partition_states(self, topic: str, partitions: int) -> dict[int, LeaderAndIsr]:
        if self._zk_down:
            raise ConnectionLoss()
        return {p: LeaderAndIsr(leader, 1, (0, 1, 2), 1) for p, leader in LEADERS.items()}

    def controller(self) -> int | None:
        return self._controller

    def host_of_broker(self, broker_id: int) -> SimpleNamespace:
        return self.hosts[f"broker{broker_id}"]

    # the lab's faults
    def fill_disk(self, host: str) -> int:
        self.calls.append(("fill_disk", host))
        return self.disk_mb << 20

    def __getattr__(self, name: str) -> Any:
        if name not in {"partition", "isolate", "loss", "kill", "restart", "signal", "heal", "clock"}:
            raise AttributeError(name)
        return lambda *args, **kwargs: self.calls.append((name, *args, *kwargs.values()))


def made(kind: str, lab: RecordingLab, log: list[str] | None = None) -> Any:
    target = LabTarget(lab, random.Random(3), "t", len(LEADERS), (log if log is not None else []).append)  # type: ignore[arg-type]
    return FAULTS[kind](target)


def inject_and_heal(kind: str, lab: RecordingLab) -> tuple[str, list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    fault = made(kind, lab)
    injected, healed = inject_and_heal_made(fault, lab)
    return fault.description, injected, healed


def inject_and_heal_made(fault: Any, lab: RecordingLab) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The lab's calls of ``fault.inject()``, then of ``fault.heal()``."""
    lab.calls = []
    fault.inject()
    injected, lab.calls = lab.calls, []
    fault.heal()
    return injected, lab.calls


def test_the_table_keeps_the_catalog_order() -> None:
    assert FAULT_KINDS == ("zombie", "controller", "zk-cut", "minority", "bridge", "loss", "zk-kill", "zk-majority",
                           "pause-partition", "kill", "clock-jump", "clock-rate", "disk-full", "hung-txn")


def test_network_faults_cut_the_right_hosts_and_heal_the_lab() -> None:
    lab = RecordingLab()
    assert inject_and_heal("zombie", lab) == (
        "broker1 cut off from ZooKeeper and broker0, broker2",
        [("partition", ["broker1"], [*ZK, "broker0", "broker2"])], [("heal",)])
    assert inject_and_heal("controller", lab) == ("controller broker2 isolated", [("isolate", "broker2")], [("heal",)])
    assert inject_and_heal("zk-cut", lab) == (
        "zk1, zk2, zk3 cut off from every broker", [("partition", ZK, BROKERS)], [("heal",)])
    _, [(call, lone, rest)], healed = inject_and_heal("minority", lab)
    assert call == "partition" and len(lone) == 1 and sorted(lone + rest) == sorted(BROKERS + ZK) and healed == [("heal",)]
    _, [(call, a, b)], _ = inject_and_heal("bridge", lab)
    assert call == "partition" and a == ["broker1"] and len(b) == 1 and b[0] in {"broker0", "broker2"}
    description, injected, healed = inject_and_heal("loss", lab)
    assert description == "25% packet loss on every broker"
    assert injected == [("loss", b, 25) for b in BROKERS] and healed == [("heal",)]


def test_a_controller_zookeeper_does_not_name_is_a_random_broker() -> None:
    assert made("controller", RecordingLab(controller=None)).controller in BROKERS


def test_process_faults_heal_what_they_did() -> None:
    lab = RecordingLab()
    description, injected, healed = inject_and_heal("zk-kill", lab)
    [(_, victim)] = injected
    assert injected == [("kill", victim)] and healed == [("restart", victim)] and victim in ZK
    assert description == f"ZooKeeper {victim} killed, then restarted"
    _, injected, healed = inject_and_heal("zk-majority", lab)
    assert len(injected) == 2 and healed == [("restart", call[1]) for call in injected]
    description, injected, healed = inject_and_heal("kill", lab)
    [(_, victim)] = injected
    assert injected == [("kill", victim)] and healed == [("restart", victim, 120)] and victim in {"broker1", "broker2"}
    assert description == f"{victim} SIGKILLed, then restarted"
    assert inject_and_heal("pause-partition", lab) == (
        "leader broker1 SIGSTOPped and isolated",
        [("signal", "broker1", signal.SIGSTOP), ("isolate", "broker1")],
        [("heal",), ("signal", "broker1", signal.SIGCONT)])


def test_clock_faults_skew_a_broker_and_heal_the_lab() -> None:
    lab = RecordingLab()
    description, [(call, host, offset)], healed = inject_and_heal("clock-jump", lab)
    assert call == "clock" and host in {"broker1", "broker2"} and healed == [("heal",)]  # busiest leader or controller
    assert abs(offset) in {30_000, 600_000, 3_600_000, 21_600_000}
    assert description == f"{host}'s clock stepped {'forward' if offset > 0 else 'back'} " + (
        f"{abs(offset) // 3_600_000} h" if abs(offset) >= 3_600_000 else f"{abs(offset) // 1000} s")
    description, [(call, host, offset, rate)], healed = inject_and_heal("clock-rate", lab)
    assert (call, host, offset, healed) == ("clock", "broker1", 0, [("heal",)]) and rate in {4.0, 0.25}
    assert description in {"broker1's clock running 4 times as fast", "broker1's clock running a quarter as fast"}


@pytest.mark.parametrize("offline", [True, False])
def test_a_full_disk_is_freed_and_its_broker_restarted(offline: bool) -> None:
    lab = RecordingLab()
    fault = made("disk-full", lab)
    fault._offline = lambda: offline  # the broker's DescribeLogDirs answer for its small disk
    fault.offline_wait_s = 0.3
    description, injected, healed = (fault.description, *inject_and_heal_made(fault, lab))
    assert description == "broker1's second log directory filled"  # the busiest leader
    assert injected == [("fill_disk", "broker1")] and healed == [("heal",), ("restart", "broker1", 120)]
    assert fault.description.startswith("broker1's second log directory filled (512 MiB written); the directory ")
    assert ("went offline after" in fault.description) is offline
    assert ("was still online 0.3 s later" in fault.description) is not offline


def test_a_killed_broker_that_exits_at_its_restart_is_restarted_again() -> None:
    lab = RecordingLab()
    told: list[str] = []
    fault = made("kill", lab, told)
    failures = iter([RuntimeError("broker 2 exited with code 1:\nError: could not connect to ZooKeeper")])

    def restart(host: str, timeout_s: float) -> None:
        lab.calls.append(("restart", host))
        if (failure := next(failures, None)) is not None:
            raise failure

    lab.restart = restart  # type: ignore[method-assign]
    fault.heal()
    assert lab.calls == [("restart", fault.host)] * 2
    assert told == [f"{fault.host} did not come back (attempt 1): broker 2 exited with code 1:"]


def test_holding_past_the_session_timeout_and_loss_longer() -> None:
    lab = RecordingLab()
    assert made("zombie", lab).held_s(5.0, 2.0) == 5.0
    assert made("loss", lab).held_s(5.0, 2.0) == 7.0


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_what_each_kind_needs_of_the_lab_and_the_workload(kind: str) -> None:
    target = LabTarget(RecordingLab(zookeepers=1), random.Random(1), "t", 6, print)  # type: ignore[arg-type]
    reason = FAULTS[kind].unavailable(target)
    if kind in {"zk-kill", "zk-majority"}:
        assert reason == "needs a ZooKeeper ensemble of 3 or more (this lab has 1)"
    elif kind == "disk-full":
        assert reason is None
        target.lab.disk_mb = 0
        assert FAULTS[kind].unavailable(target) == "needs a lab whose brokers have small disks (disk_mb > 0)"
    elif kind == "hung-txn":
        assert reason == "needs the workload's transactional producers"
        target.transactional = True
        assert FAULTS[kind].unavailable(target) is None
    else:
        assert reason is None


def test_a_hung_transaction_is_held_past_its_timeout() -> None:
    fault = made("hung-txn", RecordingLab())
    assert fault.held_s(5.0, 2.0) == 9.0  # 4 s of transaction timeout, then past the session timeout
    assert fault.id == "h0" and len(fault.partitions) == 3
    assert fault.description == f"a producer SIGSTOPped in transaction h0 (partitions {fault.partitions}) past its 4000 ms timeout"


def test_without_zookeeper_the_busiest_leader_is_a_random_broker_and_the_failure_is_told() -> None:
    told: list[str] = []
    fault = made("zombie", RecordingLab(zk_down=True), told)
    assert fault.description.split()[0] in BROKERS
    assert told and told[0].startswith("ZooKeeper read failed: ConnectionLoss")
