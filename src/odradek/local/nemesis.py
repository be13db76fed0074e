"""The partition nemesis: faults injected one at a time into an ``odradek lab`` while the
nemesis workload (``local/nemesis_workload.py``) runs on the lab's ``client`` host; each fault
is held, healed, and followed by a wait for every partition's ISR to be full again. Then the
workload stops, the runner reads every partition to its end over the management leg, reads
the replicas' log files, and ``local/checker.py`` judges the history.

The faults are the table of local/nemesis_faults.py (``FAULTS``; ``FAULT_KINDS`` their names).

Times are wall-clock (``time.time()``), the clock the workload stamps its history with.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaException, TopicPartition

from odradek.local.checker import (
    History,
    Verdict,
    check,
    parse_history,
    poll_order_anomalies,
    unavailability,
)
from odradek.local.final_read import read_to_the_end, settled_replica_logs, wait_stable
from odradek.local.nemesis_faults import FAULT_KINDS, FAULTS, LabTarget
from odradek.local.nemesis_workload import GROUP
from odradek.local.txn_checker import TxnVerdict, check_transactions

if TYPE_CHECKING:
    from odradek.local.lab import Lab

__all__ = ["FAULT_KINDS", "FaultRecord", "NemesisReport", "NemesisRun", "rss_growth", "summarize"]


@dataclass
class FaultRecord:
    kind: str
    description: str
    started: float
    healed: float = 0.0
    isr_full: float | None = None  # None: the ISRs were not full again in time
    unavailability_s: dict[int, float] = field(default_factory=dict)  # per partition
    rss_mb: dict[str, float] = field(default_factory=dict)  # each broker's resident memory once the ISRs are full
    pids: dict[str, int | None] = field(default_factory=dict)  # each broker's process then (a kill restarts it)

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
        """No lost write, no duplicate but a client's re-sends (``Verdict.ok``), no anomaly,
        every broker alive, ISRs full after every fault, the workload stopped cleanly."""
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
        rows += ["", "| faults | sent | acknowledged | lost | duplicated (re-sent by the client) | anomalies | brokers alive |",
                 "|---|---|---|---|---|---|---|",
                 f"| {len(self.faults)} | {v.sends} | {v.acknowledged} | {len(v.lost)} | {len(v.duplicated)} ({len(v.duplicated_resent)}) "
                 f"| {v.anomalies} | {alive}/{len(self.brokers_alive)} |"]
        if v.transactions is not None:
            rows += ["", _transactions_table(v.transactions)]
        growth = rss_growth(self.faults)
        if growth:
            rows += ["", "| broker (its longest-lived process) | RSS first faults (MiB, median) "
                     "| RSS last faults (MiB, median) | growth |",
                     "|---|---|---|---|"]
            rows += [f"| {host} | {first:.0f} | {last:.0f} | {last - first:+.0f} MiB ({(last / first - 1) * 100 if first else 0:+.0f}%) |"
                     for host, (first, last) in growth.items()]
        return "\n".join(rows)


def _transactions_table(t: TxnVerdict) -> str:
    """The transactional roles' counts: what the clients learnt, and each anomaly kind."""
    held = t.held()
    head = ["transactions committed", "aborted", "outcome unknown", "hung (aborted by timeout)", "records read (read_committed)",
            "pipeline transactions committed", "pipeline outputs", *held, "write cycles (G0, permitted)"]
    cells = [t.committed, t.aborted, t.unknown, t.hung, t.reads, t.pipeline_committed, t.pipeline_records,
             *(len(found) for found in held.values()), len(t.write_cycles)]
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
                      "| " + " | ".join(str(c) for c in cells) + " |"])


def _median(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "-"


def _max(values: Sequence[float]) -> str:
    return f"{max(values):.1f}" if values else "-"


class NemesisRun:
    """``faults`` faults against ``lab`` (an ``odradek.local.lab.Lab`` that is up), cycling
    through ``kinds``, targets chosen with ``seed``; the history and the workload's log go to
    ``workdir``."""

    def __init__(self, lab: Lab, workdir: str | os.PathLike[str], *, faults: int = len(FAULT_KINDS),
                 kinds: Sequence[str] = FAULT_KINDS, seed: int | None = None, acks: str = "all",
                 topic: str = "nemesis", partitions: int = 6, rate: int = 200, hold_s: float = 2.0,
                 past_session_s: float = 2.0, isr_timeout_s: float = 120.0, txn_producers: int = 0,
                 pipelines: int = 0, log: Callable[[str], None] | None = None) -> None:
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
        self.txn_producers = txn_producers  # transactional producers beside the idempotent ones
        self.pipelines = pipelines  # consume-transform-produce members (KIP-447)
        self.log = log if log is not None else logging.getLogger(__name__).info
        self.session_timeout_s = int(lab.cluster.overrides.get("zookeeper.session.timeout.ms", "6000")) / 1000
        self.report = NemesisReport(acks=acks)
        self.target = LabTarget(lab, self.rng, topic, partitions, self.log, transactional=txn_producers > 0)

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
            for host in self.target.broker_hosts:  # a fault cut short must not leave a broker stopped
                self.lab.signal(host, signal.SIGCONT)
            self.report.workload_exit = self._stop_workload(workload)
        self._wait_isr_full(self.isr_timeout_s)
        history = parse_history(history_path.read_text(encoding="utf-8").splitlines())
        for record in self.report.faults:
            end = record.isr_full if record.isr_full is not None else record.healed
            record.unavailability_s = unavailability(history.acks, record.started, end, self.partitions)
        final, ends = self._read_final()
        logs = settled_replica_logs(self.lab.cluster, self.topic, self.partitions, ends, timeout_s=10)
        self.report.verdict = check(history, final, ends, logs)
        if self.txn_producers or self.pipelines:
            self.report.verdict.transactions = self._check_transactions(history, final)
        self.report.brokers_alive = {host: _alive(self.lab.pid(host)) for host in self.target.broker_hosts}
        self.report.duration_s = time.monotonic() - started
        return self.report

    def _possible(self, kind: str) -> bool:
        reason = FAULTS[kind].unavailable(self.target)
        if reason is not None:
            self.report.skipped.append(f"{kind}: {reason}")
        return reason is None

    def _start_workload(self, history_path: Path) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "odradek.local.nemesis_workload", "--bootstrap", self.lab.bootstrap_servers,
                "--topic", self.topic, "--partitions", str(self.partitions), "--acks", self.acks,
                "--rate", str(self.rate), "--history", str(history_path),
                "--txn-producers", str(self.txn_producers), "--pipelines", str(self.pipelines),
                "--seed", str(self.rng.randrange(1 << 30))]
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
        """Make a fault of ``kind``, inject it, hold it, heal it, and wait for full ISRs."""
        past_session = self.session_timeout_s + self.past_session_s + self.rng.random()
        fault = FAULTS[kind](self.target)
        record = FaultRecord(kind, fault.description, time.time())
        self.log(f"fault {n} ({kind}): {fault.description}")
        fault.inject()
        try:
            time.sleep(fault.held_s(past_session, self.hold_s))
        finally:  # a run cut short (a timeout, ^C) still heals what it broke
            fault.heal()
        record.healed = time.time()
        if fault.description != record.description:  # what the fault learnt while it lasted
            record.description = fault.description
            self.log(f"fault {n}: {fault.description}")
        if self._wait_isr_full(self.isr_timeout_s):
            record.isr_full = time.time()
            self.log(f"fault {n} healed; ISRs full after {record.heal_to_isr_s:.1f}s")
        else:
            self.log(f"fault {n}: ISRs not full {self.isr_timeout_s:.0f}s after the heal")
        record.pids = {host: self.lab.pid(host) for host in self.target.broker_hosts}
        record.rss_mb = {host: _rss_mb(pid) for host, pid in record.pids.items()}
        return record

    def _wait_isr_full(self, timeout_s: float) -> bool:
        """Every broker registered and in the ISR of every partition, as ZooKeeper says."""
        brokers = self.lab.cluster.brokers
        return self.lab.cluster.state().wait_isr_full(self.topic, self.partitions, len(brokers), brokers=brokers,
                                                      timeout_s=timeout_s, log=self.log)

    # ------------------------------------------------------------------ after the run

    def _read_final(self) -> tuple[dict[int, dict[int, str]], dict[int, int]]:
        """Every record of every partition, read to the high watermark over the management leg."""
        try:
            final, ends = read_to_the_end({"bootstrap.servers": self.lab.bootstrap_servers,
                                           "group.id": "nemesis-final"}, self.topic, self.partitions)
        except KafkaException as e:
            raise RuntimeError(f"the final read failed: {e}") from e
        return {p: {o: v.decode() for o, v in records.items()} for p, records in final.items()}, ends

    def _check_transactions(self, history: History, final: dict[int, dict[int, str]]) -> TxnVerdict:
        """The transactional checks, once every transaction is complete: the transactional and
        pipeline topics read read_committed to their ends, and the pipeline group's offsets."""
        config = {"bootstrap.servers": self.lab.bootstrap_servers, "group.id": "nemesis-final",
                  "isolation.level": "read_committed"}
        reads, ends = {}, {}
        for suffix, wanted in (("txn", self.txn_producers), ("pipeline", self.pipelines)):
            if not wanted:
                continue
            topic = f"{self.topic}-{suffix}"
            stable = wait_stable(config, topic, self.partitions, timeout_s=90, log=self.log)
            if any(lso != hw for lso, hw in stable.values()):
                raise RuntimeError(f"{topic}: transactions still open 90 s after the run: (LSO, HW) {stable}")
            records, ends[suffix] = read_to_the_end(config, topic, self.partitions, transactional=True)
            reads[suffix] = {p: {o: v.decode() for o, v in r.items()} for p, r in records.items()}
        committed = {}
        if self.pipelines:
            consumer = Consumer({**config, "group.id": f"{GROUP}-pipeline", "log_level": 0})
            try:
                committed = {tp.partition: tp.offset for tp in consumer.committed(
                    [TopicPartition(self.topic, p) for p in range(self.partitions)], timeout=30)}
            finally:
                consumer.close()
        verdict = check_transactions(
            history.txns, [(r.partition, r.offset, r.value) for r in history.txn_reads], reads.get("txn", {}),
            pipeline=history.pipeline, pipeline_input=final,
            pipeline_output=reads.get("pipeline") if self.pipelines else None, pipeline_committed=committed,
            hung=self.target.hung)
        verdict.nonmonotonic_reads, verdict.skipped_reads = poll_order_anomalies(
            history.txn_reads, reads.get("txn", {}), ends.get("txn", {}))
        return verdict


def _rss_mb(pid: int | None) -> float:
    """A process's resident memory (VmRSS, proc(5)) in MiB; 0 if it is not running."""
    try:
        status = Path(f"/proc/{pid}/status").read_text() if pid is not None else ""
    except OSError:
        return 0.0
    kb = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return kb / 1024


def rss_growth(faults: Sequence[FaultRecord], window: int = 100) -> dict[str, tuple[float, float]]:
    """Per broker, the median resident memory (MiB) of its longest-lived process (the one seen
    after the most faults: a kill restarts a broker) over its first ``window`` faults and over
    its last ``window`` (fewer faults: the first and the last half)."""
    growth = {}
    for host in sorted({host for f in faults for host in f.rss_mb}):
        lives: dict[int | None, list[float]] = defaultdict(list)
        for f in faults:
            if host in f.rss_mb:
                lives[f.pids.get(host)].append(f.rss_mb[host])
        samples = max(lives.values(), key=len)
        n = min(window, max(1, len(samples) // 2))
        growth[host] = (statistics.median(samples[:n]), statistics.median(samples[-n:]))
    return growth


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
            "duplicated": len(v.duplicated), "duplicated_resent": len(v.duplicated_resent), "anomalies": v.anomalies, "examples": v.examples(),
            "transactions": None if v.transactions is None else {
                "committed": v.transactions.committed, "aborted": v.transactions.aborted,
                "unknown": v.transactions.unknown, "hung": v.transactions.hung, "reads": v.transactions.reads,
                "pipeline_committed": v.transactions.pipeline_committed,
                "pipeline_records": v.transactions.pipeline_records, "write_cycles": len(v.transactions.write_cycles),
                "anomalies": {kind: len(found) for kind, found in v.transactions.held().items()}},
            "brokers_alive": report.brokers_alive, "workload_exit": report.workload_exit,
            "duration_s": round(report.duration_s, 1),
            "rss_mb_first_last": {host: [round(a, 1), round(b, 1)] for host, (a, b) in rss_growth(report.faults).items()},
            "per_fault": [{"kind": f.kind, "description": f.description,
                           "unavailability_s": {p: round(s, 2) for p, s in f.unavailability_s.items()},
                           "heal_to_isr_s": None if f.heal_to_isr_s is None else round(f.heal_to_isr_s, 2),
                           "rss_mb": {host: round(mb, 1) for host, mb in f.rss_mb.items()}}
                          for f in report.faults]}
