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
  Python the group's generation id, so ``generation`` is the member's count of assignments;
- ``--txn-producers`` transactional producers write to ``<topic>-txn``: each first reads,
  read_committed, what is new there (each record a ``txn-read`` event), then writes one
  transaction of a record to each of several partitions and commits it, or aborts about
  ``--abort-ratio`` of them on purpose; a ``txn`` event gives its outcome as the client learnt
  it, its records with their offsets, and the transactions it had read;
- ``--pipelines`` consume-transform-produce members (KIP-447) of one group read ``<topic>``
  read_committed and write ``<partition>:<offset>:<value>`` per record to
  ``<topic>-pipeline``, each batch in one transaction with the consumed offsets; a
  ``pipeline`` event gives each transaction's outcome and offsets.

The transactional events are judged by local/txn_checker.py.

SIGTERM (or SIGINT) stops it: producers flush, consumers close, the history is flushed, exit 0.

    python -m odradek.local.nemesis_workload --bootstrap H:P,... --topic T --history FILE
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import signal
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local.txn_checker import transaction_of
from odradek.local.txn_client import (
    Wedged,
    after_error,
    end_transaction,
    replace_producer,
    transactional_producer,
    within,
)

__all__ = ["GROUP", "HistoryWriter", "Workload", "main"]

log = logging.getLogger(__name__)

GROUP = "nemesis-group"  # the committing group; its pipeline's is GROUP + "-pipeline"


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
                 rate: int = 200, group_members: int = 2, group: str = GROUP, txn_producers: int = 0,
                 txn_rate: float = 5.0, txn_partitions: int = 3, abort_ratio: float = 0.2, pipelines: int = 0,
                 seed: int | None = None) -> None:
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
        self.txn_producers = txn_producers
        self.txn_rate = txn_rate  # transactions a second, per transactional producer
        self.txn_partitions = txn_partitions  # partitions (records) per transaction
        self.abort_ratio = abort_ratio
        self.pipelines = pipelines
        self.seed = seed
        self.stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> None:
        """Create the topic, run every role until ``stop`` is set, then wind down."""
        self.create_topic()
        roles = [(f"producer-{n}", self._produce, n) for n in range(self.producers)]
        roles.append(("assigned-reader", self._read_assigned, 0))
        roles += [(f"member-{n}", self._group_member, n) for n in range(self.group_members)]
        roles += [(f"txn-{n}", self._transact, n) for n in range(self.txn_producers)]
        roles += [(f"pipeline-{n}", self._pipeline, n) for n in range(self.pipelines)]
        for name, fn, n in roles:
            # daemon: a role stuck past the stop is reported below and does not keep the process alive
            thread = threading.Thread(target=self._guard(fn, name), args=(n,), name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        while not self.stop.wait(0.5):  # a bounded wait lets the signal handler run
            pass
        for thread in self._threads:
            thread.join(90)
        for thread in self._threads:
            if thread.is_alive():  # where it is stuck, for whoever reads the history
                frame = sys._current_frames().get(thread.ident or 0)
                stack = "".join(traceback.format_stack(frame)[-6:]) if frame is not None else ""
                self.history.event("error", where=thread.name, error="role still running 90 s after the stop",
                                   stack=stack)
        self.history.flush()

    def _guard(self, fn, name: str):  # type: ignore[no-untyped-def]
        def wrapped(n: int) -> None:
            try:
                fn(n)
            except Exception as e:  # recorded: the checker and the runner see it
                log.exception("%s failed", name)
                self.history.event("error", where=name, error=f"role stopped: {e!r}")
        return wrapped

    @property
    def txn_topic(self) -> str:
        return f"{self.topic}-txn"

    @property
    def pipeline_topic(self) -> str:
        return f"{self.topic}-pipeline"

    @property
    def pipeline_group(self) -> str:
        return f"{self.group}-pipeline"

    def create_topic(self, timeout_s: float = 60.0) -> None:
        """The workload's topics (the transactional ones when a role writes them), each with a
        leader for every partition."""
        # Under the clock faults: the transactional topic stamps records with its leader's
        # (skewed) clock, and the pipeline's output refuses a record whose time is 10 minutes
        # off its leader's clock (INVALID_TIMESTAMP, an abortable error for the pipeline).
        configs = {self.topic: {}}
        if self.txn_producers:
            configs[self.txn_topic] = {"message.timestamp.type": "LogAppendTime"}
        if self.pipelines:
            configs[self.pipeline_topic] = {"message.timestamp.difference.max.ms": "600000"}
        names = list(configs)
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        for name, config in configs.items():
            topic = NewTopic(name, self.partitions, self.replication_factor,
                             config={"min.insync.replicas": str(self.min_insync), **config})
            try:
                admin.create_topics([topic], request_timeout=timeout_s)[name].result(timeout_s)
            except KafkaException as e:
                if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
                    raise
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            topics = admin.list_topics(timeout=10).topics
            if all((metadata := topics.get(name)) is not None and metadata.error is None
                   and len(metadata.partitions) == self.partitions
                   and all(p.leader >= 0 for p in metadata.partitions.values()) for name in names):
                return
            time.sleep(0.2)
        raise TimeoutError(f"topics {names} have no leader for every partition after {timeout_s:.0f}s")

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

    # ------------------------------------------------------------------ transactional roles

    def _log(self, line: str) -> None:
        log.warning("%s", line)

    def _transact(self, n: int) -> None:
        """Read what is new (read_committed), then write one transaction across partitions;
        commit it, or abort it on purpose."""
        rng = random.Random(None if self.seed is None else self.seed * 100 + n)
        transactional_id = f"{self.txn_topic}-{n}"
        reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"{transactional_id}-reader",
                           "isolation.level": "read_committed", "enable.auto.commit": False,
                           "auto.offset.reset": "earliest", "log_level": 0})
        reader.assign([TopicPartition(self.txn_topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
        producer = transactional_producer({"bootstrap.servers": self.bootstrap}, transactional_id, self._log,
                                          transaction_timeout_ms=20000)
        offsets: dict[str, int] = {}

        def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
            if err is None:
                offsets[msg.value().decode()] = msg.offset()

        number = 0
        next_start = time.monotonic()
        while not self.stop.is_set():
            read = self._read_new(reader, n)
            txn = f"t{n}.{number}"
            commit = rng.random() >= self.abort_ratio
            records = [(f"{txn}.{i}", p) for i, p in
                       enumerate(sorted(rng.sample(range(self.partitions), min(self.txn_partitions, self.partitions))))]
            try:
                producer.begin_transaction()
                for value, partition in records:
                    producer.produce(self.txn_topic, value=value.encode(), partition=partition, on_delivery=delivered)
                producer.flush(30)  # the delivery reports (offsets) before the end
                outcome = end_transaction(producer, commit, self._log)
            except KafkaException as e:
                outcome = after_error(producer, e, self._log)
            self.history.event("txn", id=txn, producer=n, outcome=outcome, read=sorted(read),
                               records=[[value, partition, offsets.pop(value, None)] for value, partition in records])
            if outcome == "unknown":
                producer = self._replace(producer, transactional_id)
            number += 1
            next_start = max(next_start + 1 / self.txn_rate, time.monotonic())  # no burst after a stall
            self.stop.wait(next_start - time.monotonic())
        reader.close()

    def _read_new(self, reader: Consumer, n: int) -> set[str]:
        """What ``reader`` can read now (a ``txn-read`` event each); the transactions read."""
        read: set[str] = set()
        while msgs := reader.consume(1000, 0.05):
            for msg in msgs:
                if msg.error() is not None:
                    continue
                value = msg.value().decode()
                self.history.event("txn-read", reader=n, partition=msg.partition(), offset=msg.offset(), value=value)
                read.add(transaction_of(value))
        return read

    def _replace(self, producer: Producer, transactional_id: str) -> Producer:
        return replace_producer(producer, {"bootstrap.servers": self.bootstrap}, transactional_id, self._log,
                                transaction_timeout_ms=20000)

    def _pipeline(self, n: int) -> None:
        """Consume-transform-produce: each batch read from the topic is written to the pipeline
        topic in one transaction with the consumed offsets (KIP-447). After an abort the
        consumer goes back to the group's committed offsets."""
        transactional_id = f"{self.pipeline_topic}-{n}"
        consumer = self._pipeline_consumer()
        producer = transactional_producer({"bootstrap.servers": self.bootstrap}, transactional_id, self._log,
                                          transaction_timeout_ms=20000)
        number = 0
        while not self.stop.is_set():
            msgs = [m for m in consumer.consume(200, 0.5) if m.error() is None]
            if not msgs:
                continue
            txn = f"c{n}.{number}"
            number += 1
            next_offsets: dict[int, int] = {}
            for msg in msgs:
                next_offsets[msg.partition()] = msg.offset() + 1
            try:
                producer.begin_transaction()
                for msg in msgs:
                    producer.produce(self.pipeline_topic, partition=msg.partition(),
                                     value=f"{msg.partition()}:{msg.offset()}:".encode() + msg.value())
                offsets = [TopicPartition(self.topic, p, o) for p, o in sorted(next_offsets.items())]
                metadata = consumer.consumer_group_metadata()
                # 30 s is librdkafka's own timeout, which it can fail to keep (txn_client.Wedged)
                within(60, lambda: producer.send_offsets_to_transaction(offsets, metadata, 30),
                       "send_offsets_to_transaction")
                outcome = end_transaction(producer, True, self._log)
            except KafkaException as e:
                outcome = after_error(producer, e, self._log)
            except Wedged as e:
                self._log(f"{e}: the producer is abandoned, the transaction's outcome unknown")
                outcome = "unknown"
            self.history.event("pipeline", id=txn, outcome=outcome, records=len(msgs),
                               offsets={str(p): o for p, o in next_offsets.items()})
            if outcome != "committed":
                if outcome == "unknown":
                    producer = self._replace(producer, transactional_id)
                consumer = self._rewind(consumer)
        consumer.close()

    def _pipeline_consumer(self) -> Consumer:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.pipeline_group,
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "session.timeout.ms": 10000, "log_level": 0})
        consumer.subscribe([self.topic])
        return consumer

    def _rewind(self, consumer: Consumer) -> Consumer:
        """Back to the group's committed offsets, so an aborted batch is read again (a
        partition with none, to its beginning); where that fails, a new consumer starts from
        them instead."""
        try:
            for tp in consumer.committed(consumer.assignment(), timeout=30):
                consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
            return consumer
        except KafkaException as e:
            self._log(f"rewind failed, a new consumer resumes from the committed offsets: {e}")
            consumer.close()
            return self._pipeline_consumer()

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
    parser.add_argument("--txn-producers", type=int, default=0)
    parser.add_argument("--txn-rate", type=float, default=5.0, help="transactions a second, per transactional producer")
    parser.add_argument("--abort-ratio", type=float, default=0.2)
    parser.add_argument("--pipelines", type=int, default=0)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(threadName)s %(message)s")
    with open(args.history, "a", encoding="utf-8") as out:
        workload = Workload(args.bootstrap, args.topic, HistoryWriter(out), partitions=args.partitions,
                            replication_factor=args.replication_factor, acks=args.acks,
                            producers=args.producers, rate=args.rate, group_members=args.group_members,
                            txn_producers=args.txn_producers, txn_rate=args.txn_rate, abort_ratio=args.abort_ratio,
                            pipelines=args.pipelines, seed=args.seed)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: workload.stop.set())
        workload.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
