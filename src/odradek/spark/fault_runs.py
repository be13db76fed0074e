"""Exactly-once fault runs, from outside the Spark driver: write the input, start the driver
program (spark/fault_driver.py), inject each run's fault while its task is paused, and count
the output by row id. Shared by tests/spark and bench/spark_exactly_once.py.

A fault is timed by the sink's pause hook (sink_faults.PAUSE_TASKS_PROPERTY): the first attempt
of a chosen task stops once part of its rows are on the brokers and writes its process id in
the run's marker file. The fault strikes then (``inject``), the task is released (if it still
lives), and once the run is over the fault heals (``heal``) before the next run pauses.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.local.cluster import LocalCluster
from odradek.local.cluster_state import poll_until
from odradek.local.final_read import read_to_the_end
from odradek.spark.fault_pipeline import (
    BatchWrite,
    PipelineRun,
    commit_marker,
    done_path,
    input_value,
    output_value,
)
from odradek.spark.sink_faults import release_path
from odradek.spark.sink_state_topic import stable_end
from odradek.spark.standalone import executor_of

__all__ = [
    "DriverFailed",
    "DriverProcess",
    "Fault",
    "KillBroker",
    "KillExecutor",
    "OutputCount",
    "committed_output",
    "drive",
    "kill_driver_in_commit",
    "produce_input",
    "strike",
]

TRANSACTION_STATE_TOPIC = "__transaction_state"
WAIT_S = 600.0  # a driver program's whole life, by default
_POLL_S = 0.1


class DriverFailed(RuntimeError):
    """The driver program exited with an error, or a run did not go as its fault needs."""


class Fault(Protocol):
    """A fault struck while a run's task is paused, healed once the run is over."""

    def inject(self, paused_pid: int) -> None: ...

    def heal(self) -> None: ...


class KillExecutor:
    """SIGKILL the executor JVM that runs the paused task (standalone cluster). Its Python
    workers die with it (PySpark's daemon hangs up on them when the JVM's pipe closes); the
    master starts a new executor on the worker by itself, so nothing heals."""

    def __init__(self) -> None:
        self.executor_pid: int | None = None

    def inject(self, paused_pid: int) -> None:
        self.executor_pid = executor_of(paused_pid)
        os.kill(self.executor_pid, signal.SIGKILL)
        if not poll_until(lambda: not _alive(paused_pid), 30.0, interval_s=_POLL_S):
            raise DriverFailed(f"the paused task's Python worker {paused_pid} outlived its executor")

    def heal(self) -> None:
        pass


class KillBroker:
    """SIGKILL a broker while the task is paused: the active controller (``controller``), or
    else the leader of the sink's lowest partition led by another broker. After the run,
    restart it and wait until ``topics`` (name: partitions, the sink among them; plus the
    transaction log, if there is one) have all the cluster's brokers in their ISR again (their
    RF is the broker count), so the next fault finds a whole cluster."""

    def __init__(self, cluster: LocalCluster, sink: str, topics: Mapping[str, int], *,
                 controller: bool = False) -> None:
        self.cluster = cluster
        self.sink = sink
        self.topics = dict(topics)
        self.controller = controller
        self.victim: int | None = None

    def inject(self, paused_pid: int) -> None:
        state = self.cluster.state()
        active = state.controller()
        if self.controller:
            self.victim = active
        else:
            leaders = (state.leader(self.sink, p) for p in range(self.topics[self.sink]))
            self.victim = next((b for b in leaders if b is not None and b != active), None)
        if self.victim is None:
            raise DriverFailed(f"no broker to kill: controller {active}, sink {self.sink}")
        self.cluster.kill_broker(self.victim)

    def heal(self) -> None:
        if self.victim is None:
            return
        self.cluster.start_broker(self.victim, timeout_s=120)
        state = self.cluster.state()
        topics = dict(self.topics)
        if state.topic_exists(TRANSACTION_STATE_TOPIC):
            topics[TRANSACTION_STATE_TOPIC] = int(
                self.cluster.overrides.get("transaction.state.log.num.partitions", "50"))
        replicas = len(self.cluster.brokers)
        for topic, partitions in topics.items():
            if not state.wait_isr_full(topic, partitions, replicas, timeout_s=120):
                raise DriverFailed(f"{topic}: ISR not full 120 s after broker {self.victim} restarted")


def _alive(pid: int) -> bool:
    """``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@dataclass(frozen=True)
class OutputCount:
    """A run's output against its ``rows_in`` input ids (0 to rows_in - 1): rows read, ids read
    more than once (each extra copy counts), ids never read, and rows that are no input id's."""

    rows_in: int
    rows_out: int
    duplicates: int
    missing: int
    unexpected: int

    @classmethod
    def of(cls, rows_in: int, values: Iterable[bytes], *, transformed: bool = True) -> OutputCount:
        counts = Counter(values)
        expected = {(output_value if transformed else input_value)(i) for i in range(rows_in)}
        return cls(
            rows_in=rows_in,
            rows_out=sum(counts.values()),
            duplicates=sum(n - 1 for v, n in counts.items() if v in expected),
            missing=len(expected - counts.keys()),
            unexpected=sum(n for v, n in counts.items() if v not in expected),
        )

    @property
    def exactly_once(self) -> bool:
        return self.duplicates == self.missing == self.unexpected == 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def produce_input(bootstrap: str, topic: str, rows: int, partitions: int) -> None:
    """Rows ``row-0`` to ``row-<rows - 1>``, round-robin over the partitions, all acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "queue.buffering.max.messages": max(rows, 100_000)})
    for i in range(rows):
        producer.produce(topic, input_value(i), partition=i % partitions)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise TimeoutError(f"{topic}: input rows still unacknowledged after 120 s")


def committed_output(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Every value of ``topic`` a read_committed consumer reads, once every transaction on its
    partitions is complete (a commit returns before its markers are written)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for p in range(partitions):
        stable_end(admin, TopicPartition(topic, p))
    read, _ = read_to_the_end({"bootstrap.servers": bootstrap, "group.id": f"fault-run-{uuid.uuid4().hex}",
                               "isolation.level": "read_committed"}, topic, partitions, transactional=True)
    return [value for records in read.values() for value in records.values()]


class DriverProcess:
    """A Spark driver program in its own process group, its output in ``directory``/driver.log:
    ``python <program> SPEC.json RESULT.json``; by default spark/fault_driver.py. The waits
    below give up ``timeout_s`` after the start."""

    def __init__(self, directory: str | os.PathLike[str], spec: Mapping[str, Any],
                 program: Sequence[str] = ("-m", "odradek.spark.fault_driver"), *,
                 timeout_s: float = WAIT_S) -> None:
        self.deadline = time.monotonic() + timeout_s
        self.timeout_s = timeout_s
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.result_file = self.directory / "result.json"
        self.log = self.directory / "driver.log"
        spec_file = self.directory / "spec.json"
        spec_file.write_text(json.dumps(spec))
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, *program, str(spec_file), str(self.result_file)],
                cwd=self.directory, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def failure(self, what: str) -> DriverFailed:
        return DriverFailed(f"{what}; the driver's log ends:\n{self.log.read_text()[-6000:]}")

    def wait_for(self, path: Path, what: str, *, unless: Path | None = None) -> None:
        """Until ``path`` exists; fail if the driver exits first, ``unless`` appears first,
        or the deadline passes."""
        while not path.exists():
            if unless is not None and unless.exists():
                raise self.failure(f"{what}: the run ended first")
            if self.process.poll() is not None:
                raise self.failure(f"{what}: the driver exited with {self.process.returncode} first")
            if time.monotonic() > self.deadline:
                raise self.failure(f"{what}: not within {self.timeout_s:.0f} s of the driver's start")
            time.sleep(_POLL_S)

    def result(self) -> dict[str, Any]:
        """The driver's result, once it has exited (DriverFailed unless it exited with 0)."""
        try:
            code = self.process.wait(max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise self.failure(f"the driver still ran {self.timeout_s:.0f} s after its start") from None
        if code != 0:
            raise self.failure(f"the driver exited with {code}")
        return json.loads(self.result_file.read_text())

    def stop(self) -> None:
        """SIGKILL the driver's process group if it still runs."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def strike(driver: DriverProcess, runs: Sequence[PipelineRun], faults: Mapping[str, Fault]) -> None:
    """For each of ``runs`` (in the driver's order) with a fault in ``faults``: wait until its
    task pauses, inject the fault, release the task, and heal once the run is over."""
    for run in runs:
        fault = faults.get(run.name)
        if fault is None:
            continue
        marker, done = Path(run.marker), done_path(run.marker)
        driver.wait_for(marker, f"run {run.name}: its task's pause", unless=done)
        try:
            fault.inject(int(marker.read_text()))
            release_path(marker).touch()
            driver.wait_for(done, f"run {run.name}: its end")
        finally:
            fault.heal()


def drive(directory: str | os.PathLike[str], master: str, runs: Sequence[PipelineRun], *,
          faults: Mapping[str, Fault] | None = None, batch_writes: Sequence[BatchWrite] = (),
          executors: int = 0, timeout_s: float = WAIT_S) -> dict[str, dict[str, Any]]:
    """Run ``batch_writes``, then ``runs`` in order, on one fault_driver.py program on
    ``master`` (``executors``: how many to wait for on a cluster), striking ``faults[run.name]``
    while that run's task is paused (the run needs a ``pause``); ``timeout_s`` for all of it.
    Each run's result by name (fault_pipeline.run_pipeline)."""
    driver = DriverProcess(directory, {
        "master": master, "executors": executors,
        "batch_writes": [asdict(w) for w in batch_writes],
        "runs": [run.to_json() for run in runs],
    }, timeout_s=timeout_s)
    try:
        strike(driver, runs, faults or {})
        return driver.result()["runs"]
    finally:
        driver.stop()


def kill_driver_in_commit(directory: str | os.PathLike[str], master: str, run: PipelineRun, *,
                          timeout_s: float = WAIT_S, between: Callable[[], object] | None = None
                          ) -> dict[str, Any]:
    """The driver killed between the sink's writes and the checkpoint commit, then the query
    started again from its checkpoint: ``run`` on a driver program whose commit of the first
    micro-batch pauses (``pause_commit``: its tasks' rows written, and with exactlyOnce
    committed), SIGKILLed there with its process group; then ``run`` without the pause on a new
    driver program (after ``between``, if given: a test looks at the output and the checkpoint
    there). The restarted run's result (fault_pipeline.run_pipeline)."""
    directory = Path(directory)

    def driver(name: str, pause_commit: bool) -> DriverProcess:
        spec = {"master": master, "runs": [replace(run, pause_commit=pause_commit).to_json()]}
        return DriverProcess(directory / name, spec, timeout_s=timeout_s)

    killed = driver("killed", True)
    marker = commit_marker(run.marker)
    try:
        killed.wait_for(marker, f"run {run.name}: the commit's pause", unless=done_path(run.marker))
        paused = int(marker.read_text())
    finally:
        killed.stop()
    try:  # the pausing process, should Spark have started it outside the driver's group
        os.kill(paused, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if between is not None:
        between()
    restarted = driver("restarted", False)
    try:
        return restarted.result()["runs"][run.name]
    finally:
        restarted.stop()
