"""A Kafka cluster migrated to odradek by rolling restart, and back: one ZooKeeper, brokers of
both kinds, the workload running throughout.

``MixedCluster`` is a ``KafkaRefCluster`` whose brokers each run Apache Kafka 3.9 or odradek
(``kinds``) on the same ``server.properties`` and log directory, so a broker replaced by the
other kind keeps its ``broker.id``, its listener and every file the other wrote (segments,
indexes, producer snapshots, checkpoints, ``meta.properties``, ``partition.metadata``). Both
speak 2.8's inter-broker protocol (``MIGRATION_SETTINGS``).

``MigrationRun`` is a durability run (local/durability.py: an acks=all idempotent producer with
unique record ids, a reader, the checker's verdict at the end) whose faults are the steps of a
plan: each replaces one broker (controlled shutdown, start as the other kind) and waits until
every ISR is full again, of the workload's topic and of ``__consumer_offsets``, timing it.
Meanwhile a consumer group reads the topic and commits its positions; after every step the
group's committed offsets may not be behind the last commit made before it, and at the end
they must be exactly the last ones committed. Used by tests/integration/test_migration.py
(one round trip) and bench/migration_runner.py (longer, with more rounds).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from odradek.local.cluster import BrokerProcess, LocalCluster
from odradek.local.cluster_state import poll_until
from odradek.local.durability import DurabilityReport, DurabilityRun
from odradek.perf.kafka_ref import KafkaRefCluster

__all__ = ["KINDS", "MIGRATION_SETTINGS", "GroupReader", "MigrationReport", "MigrationRun", "MigrationStep", "MixedCluster",
           "round_trip_plan"]

KINDS = ("kafka", "odradek")

# What every broker of a mixed cluster runs with: Kafka 2.8's inter-broker protocol and message
# format (odradek's), RF 3 with two in-sync replicas for acks=all.
MIGRATION_SETTINGS = {
    "inter.broker.protocol.version": "2.8",
    "log.message.format.version": "2.8",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
}

OFFSETS_TOPIC = "__consumer_offsets"


class MixedCluster(KafkaRefCluster):
    """A ``KafkaRefCluster`` whose broker ``b`` runs ``kinds[b]`` ("kafka", the default, or
    "odradek"); :meth:`replace_broker` switches one broker to the other kind."""

    def __init__(self, directory: str | os.PathLike[str], num_brokers: int = 3, *,
                 kinds: Mapping[int, str] | None = None, **kwargs: object) -> None:
        super().__init__(directory, num_brokers, **kwargs)  # type: ignore[arg-type]
        self.kinds = {broker_id: "kafka" for broker_id in self.brokers}
        for broker_id, kind in (kinds or {}).items():
            self._check_kind(kind)
            self.kinds[broker_id] = kind

    @staticmethod
    def _check_kind(kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"a broker is one of {', '.join(KINDS)}, not {kind!r}")

    def broker_command(self, broker: BrokerProcess) -> list[str]:
        if self.kinds[broker.broker_id] == "odradek":
            return LocalCluster.broker_command(self, broker)
        return super().broker_command(broker)

    def kind_of(self, broker_id: int | None) -> str:
        """``broker_id``'s kind, "none" for no broker (no controller)."""
        return "none" if broker_id is None else self.kinds[broker_id]

    def replace_broker(self, broker_id: int, kind: str) -> tuple[float, float]:
        """Stop the broker (controlled shutdown) and start it as ``kind`` on the same
        configuration and log directory; (seconds to stop, seconds from its start until it is
        registered and knows the cluster)."""
        self._check_kind(kind)
        started = time.monotonic()
        self.stop_broker(broker_id, timeout_s=60)
        stopped = time.monotonic()
        self.kinds[broker_id] = kind
        self.start_broker(broker_id)
        return stopped - started, time.monotonic() - stopped

    def describe(self) -> str:
        kinds = ", ".join(f"{b}: {k}" for b, k in sorted(self.kinds.items()))
        return f"mixed cluster ({kinds}), Kafka {self.kafka_version} with inter.broker.protocol.version 2.8"

    def cluster_json(self) -> dict[str, object]:
        return {**super().cluster_json(), "kinds": {str(b): k for b, k in self.kinds.items()}}


def round_trip_plan(broker_ids: Sequence[int], rounds: int = 1) -> list[tuple[int, str]]:
    """Every broker to odradek one at a time, then every one back to Kafka; ``rounds`` times."""
    there = [(b, "odradek") for b in broker_ids]
    back = [(b, "kafka") for b in broker_ids]
    return (there + back) * rounds


@dataclass
class MigrationStep:
    """One broker replaced: how long it took, and the cluster right after."""

    broker_id: int
    before: str
    after: str
    stop_s: float  # the controlled shutdown
    registered_s: float  # from its start until registered and serving Metadata
    isr_full_s: float | None  # from its start until every ISR is full (None: not within the timeout)
    controller: str  # "<id> (<kind>)" once the ISRs are full
    acknowledged: int  # records acknowledged while the step lasted
    # the group's committed offsets were not behind the last commit before it (None: not fetched)
    group_offsets_kept: bool | None

    @property
    def description(self) -> str:
        return f"broker {self.broker_id}: {self.before} -> {self.after}"


@dataclass
class MigrationReport:
    """The run's steps and the durability report (the checker's verdict) of the whole run."""

    steps: list[MigrationStep] = field(default_factory=list)
    durability: DurabilityReport = field(default_factory=DurabilityReport)
    group_commits: int = 0
    group_commit_errors: int = 0
    group_offsets_at_end: dict[int, int] | None = None
    group_last_committed: dict[int, int] = field(default_factory=dict)

    @property
    def group_offsets_kept(self) -> bool:
        return (bool(self.group_last_committed) and self.group_offsets_at_end == self.group_last_committed
                and not any(s.group_offsets_kept is False for s in self.steps))

    @property
    def ok(self) -> bool:
        return (self.durability.ok and self.group_offsets_kept
                and all(s.isr_full_s is not None for s in self.steps))

    def to_json(self) -> dict[str, object]:
        """The steps, the checker's counts and the group's offsets, for bench/results."""
        d = self.durability
        return {"steps": [{**vars(s), "description": s.description} for s in self.steps],
                "acknowledged": d.acknowledged, "acknowledged_without_offset": d.acknowledged_without_offset,
                "lost": len(d.lost), "lost_examples": d.lost[:100], "duplicated": len(d.duplicated),
                "duplicated_resent": d.duplicated_resent[:100], "vanished_reads": len(d.vanished_reads), "divergent_replicas": d.divergent_replicas,
                "group_commits": self.group_commits, "group_commit_errors": self.group_commit_errors,
                "group_offsets_at_end": self.group_offsets_at_end, "group_last_committed": self.group_last_committed,
                "group_offsets_kept": self.group_offsets_kept,
                "longest_ack_gap_s": d.longest_unavailability_s, "duration_s": d.duration_s, "ok": self.ok}

    def steps_table(self) -> str:
        """Each step as a Markdown table row."""
        rows = ["| step | broker | from -> to | controlled shutdown (s) | start to registered (s) "
                "| start to full ISR (s) | controller after | acks during | group offsets kept |",
                "|---|---|---|---|---|---|---|---|---|"]
        for n, s in enumerate(self.steps, 1):
            full = "not within the timeout" if s.isr_full_s is None else f"{s.isr_full_s:.1f}"
            rows.append(f"| {n} | {s.broker_id} | {s.before} -> {s.after} | {s.stop_s:.1f} | {s.registered_s:.1f} "
                        f"| {full} | {s.controller} | {s.acknowledged} | {_kept(s.group_offsets_kept)} |")
        return "\n".join(rows)

    def checker_table(self) -> str:
        """The durability checker's verdict and the group's offsets as a Markdown table."""
        d = self.durability
        rows = [
            ("records acknowledged", f"{d.acknowledged} (without an offset: {d.acknowledged_without_offset})"),
            ("lost", str(len(d.lost))),
            ("duplicated", f"{len(d.duplicated)} (re-sent by the client under a new producer epoch: "
                           f"{len(d.duplicated_resent)})" if d.duplicated else "0"),
            ("reads later gone", str(len(d.vanished_reads))),
            ("replicas identical", "yes" if not d.divergent_replicas else f"NO: {d.divergent_replicas[:3]}"),
            ("longest time between acks (s)", ", ".join(f"p{p} {s:.1f}" for p, s in
                                                        sorted(d.longest_unavailability_s.items()))),
            ("group commits (failed)", f"{self.group_commits} ({self.group_commit_errors})"),
            ("group offsets kept", "yes" if self.group_offsets_kept else
             f"NO: committed {self.group_offsets_at_end}, last commit {self.group_last_committed}"),
        ]
        return "\n".join(["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])


def _kept(kept: bool | None) -> str:
    return "not fetched" if kept is None else "yes" if kept else "NO"


class GroupReader:
    """A consumer group member reading ``topic`` and committing its positions (synchronously)
    every ``commit_interval_s``; ``last_committed`` holds the offsets of the last commit that
    succeeded."""

    def __init__(self, client: Mapping[str, object], topic: str, partitions: int, group: str,
                 log: Callable[[str], None], commit_interval_s: float = 1.0) -> None:
        self.client = dict(client)
        self.topic = topic
        self.partitions = partitions
        self.group = group
        self.log = log
        self.commit_interval_s = commit_interval_s
        self.commits = 0
        self.commit_errors = 0
        self._last: dict[int, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="group-reader")
        self.error: BaseException | None = None

    @property
    def last_committed(self) -> dict[int, int]:
        with self._lock:
            return dict(self._last)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            self._read()
        except BaseException as e:  # surfaced by stop()
            self.error = e

    def _read(self) -> None:
        consumer = Consumer({**self.client, "group.id": self.group, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "log_level": 0})
        consumer.subscribe([self.topic])
        next_commit = time.monotonic() + self.commit_interval_s
        try:
            while not self._stop.is_set():
                consumer.consume(500, 0.2)
                if time.monotonic() >= next_commit:
                    self._commit(consumer)
                    next_commit = time.monotonic() + self.commit_interval_s
            self._commit(consumer)
        finally:
            consumer.close()

    def _commit(self, consumer: Consumer) -> None:
        try:
            committed = consumer.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() == KafkaError._NO_OFFSET:  # nothing read since the last commit
                return
            # A coordinator moving or a rebalance: the next commit tries again.
            self.commit_errors += 1
            self.log(f"group commit failed ({self.commit_errors} so far): {e}")
            return
        self.commits += 1
        with self._lock:
            for tp in committed or ():
                if tp.error is None and tp.offset >= 0:
                    self._last[tp.partition] = tp.offset

    def committed_offsets(self, timeout_s: float = 120.0) -> dict[int, int] | None:
        """The group's committed offsets as its coordinator answers them now (OffsetFetch
        from a consumer that does not join); None when no answer came within ``timeout_s``.
        Each try is a new client: one whose coordinator lookup went astray while brokers
        were replaced may stay so (seen once on a loaded machine)."""
        answer: dict[int, int] = {}

        def fetched() -> bool:
            consumer = Consumer({**self.client, "group.id": self.group, "enable.auto.commit": False,
                                 "log_level": 0})
            try:
                tps = consumer.committed([TopicPartition(self.topic, p) for p in range(self.partitions)], timeout=10)
            except KafkaException as e:
                self.log(f"the group's offsets not fetched yet: {e}")
                return False
            finally:
                consumer.close()
            answer.update({tp.partition: tp.offset for tp in tps if tp.offset >= 0})
            return True

        return answer if poll_until(fetched, timeout_s, interval_s=1.0) else None


class MigrationRun(DurabilityRun):
    """A durability run on a ``MixedCluster`` whose faults are the ``plan``'s replacements
    ((broker id, kind) each, in order), with ``dwell_s`` of workload before each and after the
    last. ``run()`` returns the durability report; ``migration`` holds the steps, the group's
    offsets and that report."""

    def __init__(self, cluster: MixedCluster, plan: Sequence[tuple[int, str]], *, topic: str = "migration",
                 partitions: int = 3, dwell_s: float = 5.0, isr_timeout_s: float = 180.0,
                 group: str = "migration-group", log: Callable[[str], None] | None = None) -> None:
        super().__init__(cluster, topic, partitions, faults=len(plan), log=log)
        self.mixed = cluster
        self.plan = list(plan)
        self.dwell_s = dwell_s
        self.isr_timeout_s = isr_timeout_s
        self.offsets_partitions = int(cluster.overrides.get("offsets.topic.num.partitions", "50"))
        self.migration = MigrationReport()
        self.group = GroupReader(cluster.client_properties(), topic, partitions, group, self.log)

    def run(self) -> DurabilityReport:
        self.group.start()
        try:
            report = super().run()
        finally:
            self.group.stop()
        self.migration.durability = report
        self.migration.group_commits = self.group.commits
        self.migration.group_commit_errors = self.group.commit_errors
        self.migration.group_last_committed = self.group.last_committed
        self.migration.group_offsets_at_end = self.group.committed_offsets()
        return report

    def _inject_faults(self) -> None:
        for broker_id, kind in self.plan:
            if self._stop.is_set():
                return
            self._stop.wait(self.dwell_s)
            step = self._replace(broker_id, kind)
            self.migration.steps.append(step)
            self.report.faults.append(step.description)
            self.log(f"{step.description}: stopped in {step.stop_s:.1f}s, registered {step.registered_s:.1f}s "
                     f"after its start, every ISR full {step.isr_full_s}s after its start; controller "
                     f"{step.controller}")
        self._stop.wait(self.dwell_s)

    def _replace(self, broker_id: int, kind: str) -> MigrationStep:
        before = self.mixed.kinds[broker_id]
        acks_before = len(self.acks)
        committed_before = self.group.last_committed
        stop_s, registered_s = self.mixed.replace_broker(broker_id, kind)
        started = time.monotonic() - registered_s
        full = self._wait_every_isr_full()
        isr_full_s = time.monotonic() - started if full else None
        controller = self.cluster.state().controller()
        committed = self.group.committed_offsets()
        kept = None if committed is None else all(committed.get(p, -1) >= offset
                                                  for p, offset in committed_before.items())
        if kept is False:
            self.log(f"group offsets behind after {broker_id} -> {kind}: {committed} < {committed_before}")
        return MigrationStep(broker_id, before, kind, stop_s, registered_s, isr_full_s,
                             f"{controller} ({self.mixed.kind_of(controller)})", len(self.acks) - acks_before, kept)

    def _wait_every_isr_full(self) -> bool:
        """Every broker registered and in the ISR of every partition of the workload's topic
        and of ``__consumer_offsets``."""
        state = self.cluster.state()
        brokers = list(self.cluster.brokers)
        deadline = time.monotonic() + self.isr_timeout_s
        return all(state.wait_isr_full(topic, partitions, len(brokers), brokers=brokers, log=self.log,
                                       timeout_s=max(0.0, deadline - time.monotonic()), stop=self._stop)
                   for topic, partitions in ((self.topic, self.partitions), (OFFSETS_TOPIC, self.offsets_partitions)))
