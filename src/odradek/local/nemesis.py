"""The partition nemesis: faults injected one at a time into an ``odradek lab`` while the
nemesis workload (``local/nemesis_workload.py``) runs on the lab's ``client`` host; each fault
is held, healed, and followed by a wait for every partition's ISR to be full again. Then the
workload stops, the runner reads every partition to its end over the management leg, reads
the replicas' log files, and ``local/checker.py`` judges the history.

The fault catalog (``FAULT_KINDS``), after Jepsen's Kafka analysis:

- ``zombie``: the broker leading the most partitions cut off from every ZooKeeper node and
  the other brokers, clients still reaching it, past the session timeout;
- ``controller``: the controller isolated from every host, the client too;
- ``zk-cut``: every ZooKeeper node cut off from every broker past the session timeout;
- ``minority``: one broker against the other brokers and ZooKeeper (the client sees both);
- ``bridge``: two brokers (one of them the busiest leader) that cannot see each other, both
  seeing the third and ZooKeeper;
- ``loss``: 25% of the packets every broker sends dropped;
- ``zk-kill``: one ZooKeeper node killed, then restarted (an ensemble of 3 or more only);
- ``zk-majority``: a majority of the ZooKeeper nodes killed, then restarted (3 or more only);
- ``pause-partition``: a leader SIGSTOPped and isolated past the session timeout, healed, then
  SIGCONTinued.

Times are wall-clock (``time.time()``), the clock the workload stamps its history with.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from kazoo.exceptions import KazooException, NoNodeError

from odradek.local.checker import Verdict, check, parse_history, unavailability
from odradek.local.durability import read_to_the_end

__all__ = ["FAULT_KINDS", "FaultRecord", "NemesisReport", "NemesisRun", "summarize"]

FAULT_KINDS = ("zombie", "controller", "zk-cut", "minority", "bridge", "loss", "zk-kill", "zk-majority",
               "pause-partition")
_ZK_ENSEMBLE_KINDS = {"zk-kill", "zk-majority"}


@dataclass
class FaultRecord:
    kind: str
    description: str
    started: float
    healed: float = 0.0
    isr_full: float | None = None  # None: the ISRs were not full again in time
    unavailability_s: dict[int, float] = field(default_factory=dict)  # per partition

    @property
    def heal_to_isr_s(self) -> float | None:
        return None if self.isr_full is None else self.isr_full - self.healed

    @property
    def worst_unavailability_s(self) -> float:
        return max(self.unavailability_s.values(), default=0.0)


@dataclass
class NemesisReport:
    acks: str
    faults: list[FaultRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # fault kinds this lab cannot have, and why
    verdict: Verdict = field(default_factory=Verdict)
    brokers_alive: dict[str, bool] = field(default_factory=dict)
    workload_exit: int | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """No lost or duplicated write, no anomaly, every broker alive, ISRs full after every
        fault, the workload stopped cleanly."""
        return (self.verdict.ok and all(self.brokers_alive.values()) and self.workload_exit == 0
                and all(f.isr_full is not None for f in self.faults))

    def table(self) -> str:
        """A Markdown table per fault kind, then the totals."""
        rows = ["| fault | count | unavailability p50 (s) | unavailability max (s) | heal→full ISR p50 (s) "
                "| heal→full ISR max (s) | ISR not full in time |", "|---|---|---|---|---|---|---|"]
        for kind in FAULT_KINDS:
            of_kind = [f for f in self.faults if f.kind == kind]
            if not of_kind:
                continue
            unavailable = [f.worst_unavailability_s for f in of_kind]
            to_isr = [f.heal_to_isr_s for f in of_kind if f.heal_to_isr_s is not None]
            rows.append(f"| {kind} | {len(of_kind)} | {statistics.median(unavailable):.1f} | {max(unavailable):.1f} "
                        f"| {_median(to_isr)} | {_max(to_isr)} | {len(of_kind) - len(to_isr)} |")
        v = self.verdict
        alive = sum(self.brokers_alive.values())
        rows += ["", "| faults | sent | acknowledged | lost | duplicated | anomalies | brokers alive |",
                 "|---|---|---|---|---|---|---|",
                 f"| {len(self.faults)} | {v.sends} | {v.acknowledged} | {len(v.lost)} | {len(v.duplicated)} "
                 f"| {v.anomalies} | {alive}/{len(self.brokers_alive)} |"]
        return "\n".join(rows)


def _median(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "-"


def _max(values: Sequence[float]) -> str:
    return f"{max(values):.1f}" if values else "-"


class NemesisRun:
    """``faults`` faults against ``lab`` (an ``odradek.local.lab.Lab`` that is up), cycling
    through ``kinds``, targets chosen with ``seed``; the history and the workload's log go to
    ``workdir``."""

    def __init__(self, lab: Any, workdir: str | os.PathLike[str], *, faults: int = len(FAULT_KINDS),
                 kinds: Sequence[str] = FAULT_KINDS, seed: int | None = None, acks: str = "all",
                 topic: str = "nemesis", partitions: int = 6, rate: int = 200, hold_s: float = 2.0,
                 past_session_s: float = 2.0, isr_timeout_s: float = 120.0, log: Callable[[str], None] | None = None) -> None:
        unknown = set(kinds) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)} (known: {', '.join(FAULT_KINDS)})")
        self.lab = lab
        self.workdir = Path(workdir)
        self.target_faults = faults
        self.kinds = list(kinds)
        self.rng = random.Random(seed)
        self.acks = acks
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.hold_s = hold_s  # how long a fault that needs no session expiry lasts
        self.past_session_s = past_session_s  # a fault is held this long (plus up to 1 s) past the session timeout
        self.isr_timeout_s = isr_timeout_s
        self.log = log if log is not None else logging.getLogger(__name__).info
        self.session_timeout_s = int(lab.cluster.overrides.get("zookeeper.session.timeout.ms", "6000")) / 1000
        self.report = NemesisReport(acks=acks)
        hosts = lab.hosts.values()
        self.zk_hosts = sorted(h.name for h in hosts if h.role == "zookeeper")
        self.broker_hosts = sorted(h.name for h in hosts if h.role == "broker")

    # ------------------------------------------------------------------ the run

    def run(self) -> NemesisReport:
        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        history_path = self.workdir / "history.jsonl"
        history_path.unlink(missing_ok=True)
        kinds = [k for k in self.kinds if self._possible(k)]
        workload = self._start_workload(history_path)
        try:
            self._wait_first_acks(history_path, workload)
            self._wait_isr_full(self.isr_timeout_s)
            for n in range(self.target_faults if kinds else 0):
                record = self._inject(kinds[n % len(kinds)], n + 1)
                self.report.faults.append(record)
        finally:
            self.lab.heal()
            for host in self.broker_hosts:  # a fault cut short must not leave a broker stopped
                self.lab.signal(host, signal.SIGCONT)
            self.report.workload_exit = self._stop_workload(workload)
        self._wait_isr_full(self.isr_timeout_s)
        history = parse_history(history_path.read_text(encoding="utf-8").splitlines())
        for record in self.report.faults:
            end = record.isr_full if record.isr_full is not None else record.healed
            record.unavailability_s = unavailability(history.acks, record.started, end, self.partitions)
        final, ends = self._read_final()
        verdict = check(history, final, ends, self._replica_logs())
        for _ in range(50):  # followers may still be writing what is below the HW: looked at again
            if not verdict.divergent:
                break
            time.sleep(0.2)
            verdict.divergent = check(history, final, ends, self._replica_logs()).divergent
        self.report.verdict = verdict
        self.report.brokers_alive = {host: _alive(self.lab.pid(host)) for host in self.broker_hosts}
        self.report.duration_s = time.monotonic() - started
        return self.report

    def _possible(self, kind: str) -> bool:
        if kind in _ZK_ENSEMBLE_KINDS and len(self.zk_hosts) < 3:
            self.report.skipped.append(f"{kind}: needs a ZooKeeper ensemble of 3 or more (this lab has "
                                       f"{len(self.zk_hosts)})")
            return False
        return True

    def _start_workload(self, history_path: Path) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "odradek.local.nemesis_workload", "--bootstrap", self.lab.bootstrap_servers,
                "--topic", self.topic, "--partitions", str(self.partitions), "--acks", self.acks,
                "--rate", str(self.rate), "--history", str(history_path)]
        with open(self.workdir / "workload.log", "ab") as out:
            return self.lab.popen("client", argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def _wait_first_acks(self, history_path: Path, workload: subprocess.Popen[bytes], count: int = 100,
                         timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if workload.poll() is not None:
                raise RuntimeError(f"the workload exited ({workload.returncode}) before its first acks; "
                                   f"see {self.workdir / 'workload.log'}")
            if history_path.exists() and history_path.read_text(encoding="utf-8").count('"type": "ack"') >= count:
                return
            time.sleep(0.2)
        raise TimeoutError(f"fewer than {count} acks after {timeout_s:.0f}s; see {self.workdir / 'workload.log'}")

    def _stop_workload(self, workload: subprocess.Popen[bytes]) -> int | None:
        workload.send_signal(signal.SIGTERM)
        try:
            return workload.wait(150)
        except subprocess.TimeoutExpired:
            self.log("the workload did not stop within 150s of SIGTERM: killed")
            workload.kill()
            workload.wait(10)
            return None

    # ------------------------------------------------------------------ faults

    def _inject(self, kind: str, n: int) -> FaultRecord:
        past_session = self.session_timeout_s + self.past_session_s + self.rng.random()
        lab = self.lab
        record = FaultRecord(kind, "", time.time())
        if kind == "zombie":
            leader = self._busiest_leader()
            others = [h for h in self.broker_hosts if h != leader]
            record.description = f"{leader} cut off from ZooKeeper and {', '.join(others)}"
            self._begin(record, n)
            lab.partition([leader], self.zk_hosts + others)
            time.sleep(past_session)
        elif kind == "controller":
            controller = self._controller_host() or self.rng.choice(self.broker_hosts)
            record.description = f"controller {controller} isolated"
            self._begin(record, n)
            lab.isolate(controller)
            time.sleep(past_session)
        elif kind == "zk-cut":
            record.description = f"{', '.join(self.zk_hosts)} cut off from every broker"
            self._begin(record, n)
            lab.partition(self.zk_hosts, self.broker_hosts)
            time.sleep(past_session)
        elif kind == "minority":
            lone = self.rng.choice(self.broker_hosts)
            record.description = f"{lone} alone against the other brokers and ZooKeeper"
            self._begin(record, n)
            lab.partition([lone], [h for h in self.broker_hosts if h != lone] + self.zk_hosts)
            time.sleep(past_session)
        elif kind == "bridge":
            # One side leads partitions: between two followers of a third leader a bridge cuts nothing used.
            a = self._busiest_leader()
            b = self.rng.choice([h for h in self.broker_hosts if h != a])
            record.description = f"{a} and {b} cannot see each other, both see the rest"
            self._begin(record, n)
            lab.partition([a], [b])
            time.sleep(past_session)
        elif kind == "loss":
            record.description = "25% packet loss on every broker"
            self._begin(record, n)
            for host in self.broker_hosts:
                lab.loss(host, 25)
            time.sleep(self.hold_s + past_session)
        elif kind in _ZK_ENSEMBLE_KINDS:
            count = 1 if kind == "zk-kill" else len(self.zk_hosts) // 2 + 1
            victims = self.rng.sample(self.zk_hosts, count)
            record.description = f"ZooKeeper {', '.join(victims)} killed, then restarted"
            self._begin(record, n)
            for host in victims:
                lab.kill(host)
            time.sleep(past_session)
            for host in victims:
                lab.restart(host)
        elif kind == "pause-partition":
            leader = self._busiest_leader()
            record.description = f"leader {leader} SIGSTOPped and isolated"
            self._begin(record, n)
            lab.signal(leader, signal.SIGSTOP)
            lab.isolate(leader)
            time.sleep(past_session)
            lab.heal()
            lab.signal(leader, signal.SIGCONT)
        lab.heal()
        record.healed = time.time()
        if self._wait_isr_full(self.isr_timeout_s):
            record.isr_full = time.time()
            self.log(f"fault {n} healed; ISRs full after {record.heal_to_isr_s:.1f}s")
        else:
            self.log(f"fault {n}: ISRs not full {self.isr_timeout_s:.0f}s after the heal")
        return record

    def _begin(self, record: FaultRecord, n: int) -> None:
        record.started = time.time()
        self.log(f"fault {n} ({record.kind}): {record.description}")

    def _zk_read(self, fn: Callable[[Any], Any]) -> Any:
        """A read through the management leg; None while ZooKeeper does not answer."""
        try:
            return fn(self.lab.cluster.zk_client())
        except NoNodeError:
            return None
        except KazooException as e:  # e.g. the ensemble lost its quorum: asked again later
            self.log(f"ZooKeeper read failed: {e!r}")
            return None

    def _states(self) -> dict[int, dict[str, Any]] | None:
        def read(zk: Any) -> dict[int, dict[str, Any]]:
            base = f"/brokers/topics/{self.topic}/partitions"
            return {p: json.loads(zk.get(f"{base}/{p}/state")[0]) for p in range(self.partitions)}
        return self._zk_read(read)

    def _busiest_leader(self) -> str:
        states = self._states() or {}
        counts: dict[int, int] = {}
        for state in states.values():
            if state["leader"] >= 0:
                counts[state["leader"]] = counts.get(state["leader"], 0) + 1
        if not counts:
            return self.rng.choice(self.broker_hosts)
        most = max(counts.values())
        leader = self.rng.choice(sorted(b for b, c in counts.items() if c == most))
        return self.lab.host_of_broker(leader).name

    def _controller_host(self) -> str | None:
        data = self._zk_read(lambda zk: zk.get("/controller")[0])
        return None if data is None else self.lab.host_of_broker(json.loads(data)["brokerid"]).name

    def _isr_full(self) -> bool:
        states = self._states()
        registered = self._zk_read(lambda zk: zk.get_children("/brokers/ids"))
        if states is None or registered is None or len(registered) < len(self.broker_hosts):
            return False
        return all(s["leader"] >= 0 and len(s["isr"]) == len(self.broker_hosts) for s in states.values())

    def _wait_isr_full(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._isr_full():
                return True
            time.sleep(0.2)
        return False

    # ------------------------------------------------------------------ after the run

    def _read_final(self) -> tuple[dict[int, dict[int, str]], dict[int, int]]:
        """Every record of every partition, read to the high watermark over the management leg."""
        try:
            final, ends = read_to_the_end({"bootstrap.servers": self.lab.bootstrap_servers,
                                           "group.id": "nemesis-final"}, self.topic, self.partitions)
        except KafkaException as e:
            raise RuntimeError(f"the final read failed: {e}") from e
        return {p: {o: v.decode() for o, v in records.items()} for p, records in final.items()}, ends

    def _replica_logs(self) -> dict[int, dict[int, bytes]]:
        """Each partition's log bytes on each broker (its segment files in order)."""
        logs: dict[int, dict[int, bytes]] = {p: {} for p in range(self.partitions)}
        for broker_id, broker in self.lab.cluster.brokers.items():
            data = _log_dir(broker.config_path)
            for p in range(self.partitions):
                directory = data / f"{self.topic}-{p}"
                if not directory.is_dir():  # every broker holds every partition (RF 3 on 3 brokers)
                    raise RuntimeError(f"broker {broker_id} has no {directory}: the replica check would be empty")
                logs[p][broker_id] = b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))
        return logs


def _log_dir(config_path: Path) -> Path:
    """The first of a broker's ``log.dirs``."""
    for line in config_path.read_text().splitlines():
        if line.startswith("log.dirs="):
            return Path(line.split("=", 1)[1].split(",")[0])
    return config_path.parent / "data"


def _alive(pid: int | None) -> bool:
    """A process that exists and is not a zombie."""
    if pid is None:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def summarize(report: NemesisReport) -> Mapping[str, object]:
    """The report's figures as plain data (for JSON)."""
    v = report.verdict
    return {"acks": report.acks, "faults": len(report.faults), "skipped": report.skipped, "sent": v.sends,
            "acknowledged": v.acknowledged, "acknowledged_without_offset": v.acknowledged_without_offset,
            "polls": v.polls, "commits": v.commits, "client_errors": v.errors, "lost": len(v.lost),
            "duplicated": len(v.duplicated), "anomalies": v.anomalies, "examples": v.examples(),
            "brokers_alive": report.brokers_alive, "workload_exit": report.workload_exit,
            "duration_s": round(report.duration_s, 1),
            "per_fault": [{"kind": f.kind, "description": f.description,
                           "unavailability_s": {p: round(s, 2) for p, s in f.unavailability_s.items()},
                           "heal_to_isr_s": None if f.heal_to_isr_s is None else round(f.heal_to_isr_s, 2)}
                          for f in report.faults]}
