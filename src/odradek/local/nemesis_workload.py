"""The nemesis workload: one process, run on the lab's ``client`` host, that writes a JSONL
history for the checker (``odradek.local.checker``) while faults happen around it.

- producers (idempotent with ``--acks all``) write unique values ``<producer>-<seq>`` to
  explicit partitions, at a steady pace; each ``send``, each ``ack`` (with its offset, or
  none for librdkafka's implicit acks, see local/durability.py) and each delivery ``error``
  is an event;
- an assigned consumer reads every partition from the beginning throughout (one session);
- a consumer group of ``--group-members`` members polls and commits synchronously about once
  a second; each successful commit is a ``commit`` event. Each assignment a member receives
  starts a new poll session (it resumes from the committed offsets). librdkafka does not give
  Python the group's generation id, so ``generation`` is the member's count of assignments.

SIGTERM (or SIGINT) stops it: producers flush, consumers close, the history is flushed, exit 0.

    python -m odradek.local.nemesis_workload --bootstrap H:P,... --topic T --history FILE
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

__all__ = ["HistoryWriter", "Workload", "main"]

log = logging.getLogger(__name__)


class HistoryWriter:
    """Thread-safe JSONL events, each stamped with wall-clock ``t`` (the runner's fault times
    use the same clock: every namespace shares it)."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._lock = threading.Lock()

    def event(self, kind: str, **fields: object) -> None:
        line = json.dumps({"type": kind, "t": time.time(), **fields})
        with self._lock:
            self._out.write(line + "\n")

    def flush(self) -> None:
        with self._lock:
            self._out.flush()


class Workload:
    def __init__(self, bootstrap: str, topic: str, history: HistoryWriter, *, partitions: int = 6,
                 replication_factor: int = 3, min_insync: int = 2, acks: str = "all", producers: int = 2,
                 rate: int = 200, group_members: int = 2, group: str = "nemesis-group") -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.history = history
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.min_insync = min_insync
        self.acks = acks
        self.producers = producers
        self.rate = rate  # records a second, per producer
        self.group_members = group_members
        self.group = group
        self.stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> None:
        """Create the topic, run every role until ``stop`` is set, then wind down."""
        self.create_topic()
        roles = [(f"producer-{n}", self._produce, n) for n in range(self.producers)]
        roles.append(("assigned-reader", self._read_assigned, 0))
        roles += [(f"member-{n}", self._group_member, n) for n in range(self.group_members)]
        for name, fn, n in roles:
            thread = threading.Thread(target=self._guard(fn, name), args=(n,), name=name)
            thread.start()
            self._threads.append(thread)
        while not self.stop.wait(0.5):  # a bounded wait lets the signal handler run
            pass
        for thread in self._threads:
            thread.join(90)
        self.history.flush()

    def _guard(self, fn, name: str):  # type: ignore[no-untyped-def]
        def wrapped(n: int) -> None:
            try:
                fn(n)
            except Exception as e:  # recorded: the checker and the runner see it
                log.exception("%s failed", name)
                self.history.event("error", where=name, error=f"role stopped: {e!r}")
        return wrapped

    def create_topic(self, timeout_s: float = 60.0) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        topic = NewTopic(self.topic, self.partitions, self.replication_factor,
                         config={"min.insync.replicas": str(self.min_insync)})
        try:
            admin.create_topics([topic], request_timeout=timeout_s)[self.topic].result(timeout_s)
        except KafkaException as e:
            if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            metadata = admin.list_topics(self.topic, timeout=10).topics.get(self.topic)
            if (metadata is not None and metadata.error is None and len(metadata.partitions) == self.partitions
                    and all(p.leader >= 0 for p in metadata.partitions.values())):
                return
            time.sleep(0.2)
        raise TimeoutError(f"topic {self.topic} has no leader for every partition after {timeout_s:.0f}s")

    # ------------------------------------------------------------------ roles

    def _produce(self, n: int) -> None:
        idempotent = self.acks == "all"  # librdkafka's idempotence requires acks=all
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": self.acks,
                             "enable.idempotence": idempotent, "linger.ms": 5,
                             "message.timeout.ms": 60000, "log_level": 0})

        def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
            value = msg.value().decode()
            if err is None:
                self.history.event("ack", value=value, partition=msg.partition(), offset=msg.offset())
            else:
                self.history.event("error", where=f"producer-{n}", value=value, partition=msg.partition(),
                                   error=str(err))

        seq = 0
        interval = 10 / self.rate  # ten records per tick
        next_tick = time.monotonic()
        while not self.stop.is_set():
            for _ in range(10):
                value = f"{n}-{seq}"
                partition = seq % self.partitions
                try:
                    producer.produce(self.topic, value=value.encode(), partition=partition, on_delivery=delivered)
                except (BufferError, KafkaException) as e:  # refused locally, nothing queued: never acked
                    self.history.event("error", where=f"producer-{n}", value=value, partition=partition,
                                       error=f"refused: {e}")
                else:
                    self.history.event("send", value=value, partition=partition)
                seq += 1
            next_tick += interval
            producer.poll(0)
            # poll() returns as soon as it has served a delivery report: waited out in a loop
            while (wait := next_tick - time.monotonic()) > 0 and not self.stop.is_set():
                producer.poll(wait)
        left = producer.flush(60)
        if left:
            self.history.event("error", where=f"producer-{n}", error=f"{left} records undelivered at exit")

    def _read_assigned(self, _: int) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"{self.group}-assigned",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 0})
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
        self._poll_until_stopped(consumer, "assigned")
        consumer.close()

    def _group_member(self, n: int) -> None:
        assignments = 0

        def on_assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            nonlocal assignments
            assignments += 1

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "session.timeout.ms": 10000, "log_level": 0})
        consumer.subscribe([self.topic], on_assign=on_assign)
        last_commit = time.monotonic()
        while not self.stop.is_set():
            self._poll_once(consumer, lambda: f"member-{n}.{assignments}")
            if time.monotonic() - last_commit >= 1.0:
                last_commit = time.monotonic()
                self._commit(consumer, n, assignments)
        self._commit(consumer, n, assignments)
        consumer.close()

    def _commit(self, consumer: Consumer, n: int, generation: int) -> None:
        try:
            committed = consumer.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].name() != "_NO_OFFSET":  # nothing read since the last commit
                self.history.event("error", where=f"member-{n}", error=f"commit: {e.args[0]}")
            return
        for tp in committed or []:
            if tp.error is None and tp.offset >= 0:
                self.history.event("commit", group=self.group, member=n, partition=tp.partition,
                                   offset=tp.offset, generation=generation)

    def _poll_until_stopped(self, consumer: Consumer, session: str) -> None:
        while not self.stop.is_set():
            self._poll_once(consumer, lambda: session)

    def _poll_once(self, consumer: Consumer, session) -> None:  # type: ignore[no-untyped-def]
        for msg in consumer.consume(500, 0.2):
            if msg.error() is not None:
                self.history.event("error", where=session(), error=str(msg.error()))
                continue
            self.history.event("poll", session=session(), partition=msg.partition(), offset=msg.offset(),
                               value=msg.value().decode())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m odradek.local.nemesis_workload")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", default="nemesis")
    parser.add_argument("--history", required=True, type=Path)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--acks", choices=["all", "1"], default="all")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--rate", type=int, default=200, help="records a second, per producer")
    parser.add_argument("--group-members", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(threadName)s %(message)s")
    with open(args.history, "a", encoding="utf-8") as out:
        workload = Workload(args.bootstrap, args.topic, HistoryWriter(out), partitions=args.partitions,
                            replication_factor=args.replication_factor, acks=args.acks,
                            producers=args.producers, rate=args.rate, group_members=args.group_members)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: workload.stop.set())
        workload.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
