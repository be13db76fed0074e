"""Suite 4: Kafka Connect 3.9 in distributed mode (``ConnectDistributed``) on odradek.

Two workers of one group share their config, offset and status topics (compacted, RF 3, created
by the workers).  Through the REST API they get Kafka's FileStreamSource (a file, tailed, into
a topic) and FileStreamSink (the topic into another file) while a writer appends numbered
lines to the source file at a steady rate.  Then the worker that runs the source task is
SIGKILLed (its tasks must move to the other worker), and the whole cluster is restarted (the
connectors come back from the config topic, the copy resumes from the offset topic).  Finally
the sink file is checked line by line against the source file: none lost, order kept, and
duplicates only where at-least-once delivery allows them: a replay, from a committed
position, of lines the killed worker had sent but not yet committed (and none at the graceful
restart).  The ``exactly-once`` row sets ``exactly.once.source.support=enabled`` (KIP-618):
the source writes in transactions with its offsets, and the topic read with read_committed
must hold every line exactly once, in order.  The quick subset copies the file once through
two workers (no kill, no restart).
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from compat.connect_worker import Worker, await_value
from compat.context import SuiteContext
from compat.kafka_tools import KafkaTools
from compat.suite import DURABLE, SuiteResult, Variant
from odradek.local.cluster import LocalCluster

NAME = "connect"
ORDER = 4
TITLE = "Kafka Connect 3.9, distributed: FileStream source and sink, a worker killed, the cluster restarted"
VARIANTS = (Variant(), Variant("exactly-once", quick=False))
BROKER_OVERRIDES = DURABLE

FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
RATE = 200  # lines appended per second
# At-least-once's allowance: a killed worker's source task re-sends what it sent since its last
# offset commit (offset.flush.interval.ms, 1 s, apart), its sink task what it wrote since its
# consumer's last commit; a generous bound on either replay on a loaded machine.
MAX_REPLAY = RATE * 15
TIMEOUT_S = 180.0


@dataclass
class Copied:
    """What a copy shows against its source (sans-IO: ``compare``)."""

    lines: int  # in the copy
    lost: list[str] = field(default_factory=list)  # source lines missing from the copy
    unknown: list[str] = field(default_factory=list)  # copy lines that are no source line
    out_of_order: list[str] = field(default_factory=list)  # first copies that skip ahead
    replays: list[tuple[int, int]] = field(default_factory=list)  # (first source index, length)

    @property
    def duplicates(self) -> int:
        return sum(length for _, length in self.replays)

    def problems(self) -> list[str]:
        """Loss, strangers and disorder (duplicates are judged by the caller)."""
        found = []
        if self.lost:
            found.append(f"{len(self.lost)} lines lost (first {self.lost[:3]})")
        if self.unknown:
            found.append(f"{len(self.unknown)} lines that were never written (first {self.unknown[:3]})")
        if self.out_of_order:
            found.append(f"{len(self.out_of_order)} lines out of order (first {self.out_of_order[:3]})")
        return found


def compare(source: list[str], copy: list[str]) -> Copied:
    """Compare a copy with its (distinct) source lines.  A line copied again is part of a
    replay: a run of consecutive source lines that starts at or before the furthest line
    copied so far; a replay from a committed position re-sends lines in their order, so
    anything else (a line first copied before its predecessor) is disorder."""
    index = {line: i for i, line in enumerate(source)}
    result = Copied(len(copy))
    furthest = -1  # the highest source index copied so far
    previous = -2  # the source index of the previous copied line
    for line in copy:
        i = index.get(line)
        if i is None:
            result.unknown.append(line)
            continue
        if i <= furthest:
            start, length = result.replays[-1] if result.replays else (-1, 0)
            if i == previous + 1 and start + length - 1 == previous:
                result.replays[-1] = (start, length + 1)
            else:
                result.replays.append((i, 1))
        elif i == furthest + 1:
            furthest = i
        else:
            result.out_of_order.append(line)
            furthest = i
        previous = i
    seen = set(copy)
    result.lost = [line for line in source if line not in seen]
    return result


class Writer(threading.Thread):
    """Appends ``line-<n>`` lines to a file at ``RATE`` per second until stopped."""

    def __init__(self, path: Path, prefix: str) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.prefix = prefix
        self.count = 0
        self._stop_event = threading.Event()
        path.touch()

    def line(self, n: int) -> str:
        return f"{self.prefix}-{n:07d}"

    def run(self) -> None:
        start = time.monotonic()
        with self.path.open("a") as out:
            while not self._stop_event.wait(0.05):
                due = int((time.monotonic() - start) * RATE)
                if due > self.count:
                    out.write("".join(f"{self.line(n)}\n" for n in range(self.count, due)))
                    out.flush()
                    self.count = due

    def finish(self) -> list[str]:
        """Stop writing; every line written."""
        self._stop_event.set()
        if self.ident is not None:
            self.join()
        return [self.line(n) for n in range(self.count)]


def complete_lines(path: Path) -> list[str]:
    """The lines of ``path`` that end in a newline (the sink may be mid-write)."""
    if not path.exists():
        return []
    text = path.read_text()
    return text[: text.rfind("\n") + 1].splitlines()


class ConnectRun:
    """One Connect cluster of two workers copying a file through a topic."""

    def __init__(self, cluster: LocalCluster, ctx: SuiteContext, exactly_once: bool) -> None:
        self.cluster = cluster
        self.ctx = ctx
        self.exactly_once = exactly_once
        run_id = uuid.uuid4().hex[:8]
        self.topic = f"connect-lines-{run_id}"
        self.source_file = ctx.path("source.txt")
        self.sink_file = ctx.path("sink.txt")
        self.writer = Writer(self.source_file, f"line-{run_id}")
        props = {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"connect-{run_id}",
            "key.converter": STRING_CONVERTER,
            "value.converter": STRING_CONVERTER,
            "config.storage.topic": f"connect-configs-{run_id}",
            "offset.storage.topic": f"connect-offsets-{run_id}",
            "status.storage.topic": f"connect-status-{run_id}",
            "config.storage.replication.factor": "3",
            "offset.storage.replication.factor": "3",
            "status.storage.replication.factor": "3",
            "offset.storage.partitions": "5",
            "status.storage.partitions": "3",
            "offset.flush.interval.ms": "1000",
            # A lost worker's tasks are reassigned after this delay (Kafka's default: 5 min).
            "scheduled.rebalance.max.delay.ms": "5000",
            "session.timeout.ms": "10000",
            "heartbeat.interval.ms": "2000",
            # The plugins' ServiceLoader manifests, not a scan of every class on the classpath
            # (which takes minutes on a loaded machine).
            "plugin.discovery": "service_load",
        }
        if exactly_once:
            props["exactly.once.source.support"] = "enabled"
        self.workers = [Worker(ctx, f"worker-{n}", props) for n in (1, 2)]
        self.internal_topics = [props["config.storage.topic"], props["offset.storage.topic"],
                                props["status.storage.topic"]]
        self.kill_at = 0  # lines written when the worker was killed
        self.moved: list[str] = []

    @property
    def running(self) -> list[Worker]:
        return [w for w in self.workers if w.alive]

    def start_workers(self, one_by_one: bool = False) -> None:
        """Start the workers not running and wait until they serve; ``one_by_one`` waits for
        each before starting the next."""
        for worker in self.workers:
            if not worker.alive:
                worker.start()
                if one_by_one:
                    worker.await_ready()
        for worker in self.workers:
            worker.await_ready()

    def create_connectors(self) -> None:
        # The worker creates the topic (KIP-158), as odradek creates none on a first produce.
        source = {"connector.class": FILE_SOURCE, "file": str(self.source_file), "topic": self.topic,
                  "tasks.max": "1", "topic.creation.default.replication.factor": "3",
                  "topic.creation.default.partitions": "1"}
        if self.exactly_once:
            source["exactly.once.support"] = "required"
        sink = {"connector.class": FILE_SINK, "file": str(self.sink_file), "topics": self.topic, "tasks.max": "1"}
        first = self.workers[0]
        for name, config in (("source", source), ("sink", sink)):
            first.rest("PUT", f"/connectors/{name}/config", config)
        self.await_running()

    def await_running(self, on: Worker | None = None) -> dict[str, list[str]]:
        """Until both connectors and their tasks run (on ``on`` when given, which answers);
        the worker ids of each connector's tasks."""
        asked = on or self.running[0]

        def running() -> dict[str, list[str]] | None:
            placed = {}
            for name in ("source", "sink"):
                status = asked.status(name)
                tasks = status["tasks"]
                states = [status["connector"]["state"]] + [t["state"] for t in tasks]
                if not tasks or any(s != "RUNNING" for s in states):
                    if any(s == "FAILED" for s in states):
                        raise AssertionError(f"{name} failed: {_trace(status)}")
                    return None
                placed[name] = [t["worker_id"] for t in tasks]
            if on is not None and any(w != on.worker_id for ids in placed.values() for w in ids):
                return None
            return placed

        return await_value(running, "source and sink running" + (f" on {on.name}" if on else ""), TIMEOUT_S)

    def await_sink(self, lines: int) -> None:
        await_value(lambda: len(complete_lines(self.sink_file)) >= lines or None,
                    f"{lines} lines in the sink file (it has {len(complete_lines(self.sink_file))})", TIMEOUT_S)

    def kill_source_worker(self) -> None:
        """SIGKILL the worker that runs the source task; its tasks must move to the other one."""
        placed = self.await_running()
        victim = next(w for w in self.workers if w.worker_id in placed["source"])
        survivor = next(w for w in self.workers if w is not victim)
        self.moved = [name for name, ids in placed.items() if victim.worker_id in ids]
        self.kill_at = self.writer.count
        victim.kill()
        self.await_running(on=survivor)

    def restart(self) -> None:
        """Stop the cluster's workers (SIGTERM) and start both again, one after the other: a
        worker that starts a source task asks the leader to fence its zombies (KIP-618) over
        the REST API, which Connect 3.9 answers 404 until its own start is through, failing the
        task for good (Connect's race, whatever the brokers)."""
        for worker in self.running:
            worker.stop()
        self.start_workers(one_by_one=True)
        self.await_running()

    def topic_lines(self) -> list[str]:
        """The topic's values, read_committed, from the start to its end."""
        consumer = Consumer({**self.cluster.client_properties(), "group.id": f"check-{uuid.uuid4().hex[:8]}",
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest"})
        try:
            partition = TopicPartition(self.topic, 0, 0)
            consumer.assign([partition])
            _, high = consumer.get_watermark_offsets(partition, timeout=30)
            values: list[str] = []
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline:
                batch = consumer.consume(1000, 1.0)
                values += [m.value().decode() for m in batch if m.error() is None and m.value() is not None]
                position = consumer.position([partition])[0].offset
                # The last offset may be a transaction marker, never returned.
                if not batch and position >= high - 1:
                    break
            return values
        finally:
            consumer.close()

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop(timeout_s=30)


def _trace(status: dict[str, object]) -> str:
    return str(status)[:500]


def run(cluster: LocalCluster, ctx: SuiteContext, quick: bool) -> SuiteResult:
    result = SuiteResult(versions={"Kafka Connect": KafkaTools(ctx).version})
    copy = ConnectRun(cluster, ctx, exactly_once=ctx.variant.name == "exactly-once")
    try:
        _cases(copy, result, quick)
    finally:
        copy.stop()
        copy.writer.finish()
    return result


def _cases(copy: ConnectRun, result: SuiteResult, quick: bool) -> None:
    state: dict[str, list[str]] = {}

    def start() -> None:
        copy.start_workers()
        copy.writer.start()
        copy.create_connectors()
        copy.await_sink(RATE)

    def internal_topics() -> None:
        _check_internal_topics(copy)

    def worker_killed() -> None:
        copy.await_sink(copy.writer.count // 2)
        copy.kill_source_worker()
        copy.await_sink(copy.writer.count)

    def restarted() -> None:
        copy.restart()
        copy.await_sink(copy.writer.count)

    def copied() -> None:
        state["source"] = source = copy.writer.finish()
        copy.await_sink(len(source))
        # Lines copied twice may still arrive: wait until the sink file stops growing.
        await_value(_steady(copy.sink_file), "a steady sink file", 30)
        found = compare(source, complete_lines(copy.sink_file))
        problems = found.problems()
        assert not problems, "; ".join(problems)
        late = [r for r in found.replays if r[0] >= copy.kill_at + RATE * 5]
        assert not late, f"lines copied twice without a worker killed (after line {copy.kill_at}): {late}"
        assert len(found.replays) <= 2, f"{len(found.replays)} replays: {found.replays}"
        long = [r for r in found.replays if r[1] > MAX_REPLAY]
        assert not long, f"replays longer than {MAX_REPLAY} lines (~15 s of writing): {long}"
        result.versions["duplicates (sink file)"] = (f"{found.duplicates} of {len(source)} lines, "
                                                     f"{len(found.replays)} replays")

    def exactly_once() -> None:
        source = state.get("source") or []
        in_topic = copy.topic_lines()
        found = compare(source, in_topic)
        problems = found.problems() + ([f"{found.duplicates} lines twice: {found.replays[:3]}"]
                                       if found.replays else [])
        assert not problems, "; ".join(problems)

    result.case("two workers, source and sink running", start)
    result.case("internal topics created compacted, RF 3", internal_topics)
    if not quick:
        result.case("worker SIGKILLed, its tasks moved", worker_killed)
        result.case("cluster restarted, copy resumed", restarted)
    result.case("sink file: no loss, duplicates only after the kill", copied)
    if copy.exactly_once:
        result.case("topic read_committed: every line exactly once", exactly_once)


def _steady(path: Path):  # type: ignore[no-untyped-def]
    """A probe that is true once the file's size did not change since the previous call."""
    sizes: list[int] = []

    def probe() -> bool | None:
        sizes.append(path.stat().st_size)
        time.sleep(2)
        return True if len(sizes) >= 2 and sizes[-1] == sizes[-2] else None

    return probe


def _check_internal_topics(copy: ConnectRun) -> None:
    admin = AdminClient(copy.cluster.client_properties())
    metadata = admin.list_topics(timeout=30).topics
    for topic in copy.internal_topics:
        assert topic in metadata, f"{topic} not created: {sorted(metadata)}"
        replicas = {len(p.replicas) for p in metadata[topic].partitions.values()}
        assert replicas == {3}, f"{topic}: replicas {replicas}"
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        configs = admin.describe_configs([resource])[resource].result(30)
        assert configs["cleanup.policy"].value == "compact", f"{topic}: cleanup.policy={configs['cleanup.policy'].value}"
