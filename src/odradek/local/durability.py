"""A durability run: acks=all producers write records with unique ids while brokers are
SIGKILLed and restarted (leaders and the controller among them) and paused past their
ZooKeeper session timeout; afterwards the cluster must hold every acknowledged record
exactly once at the offset it was acknowledged at, in-sync replicas must hold byte-identical
logs, and nothing a consumer read may have disappeared.

An acknowledgement does not always carry an offset. librdkafka's idempotent producer reports
a record delivered without one (``RD_KAFKA_OFFSET_INVALID``; ``Message.offset()`` is None)
when it infers the write instead of being told where it landed: a produce request fails with
its persistence unknown (a timeout, a dropped connection, NOT_ENOUGH_REPLICAS_AFTER_APPEND),
its records wait for a retry, and a later request of the same producer succeeds; the broker
appends a producer's batches only in sequence, so the earlier records were written before it
(``rd_kafka_dr_implicit_ack``). It does the same for a DUPLICATE_SEQUENCE_NUMBER answer, which
odradek never gives (it answers a retried batch with its original offsets). Such a record must
still be in its partition exactly once.

Transactional mode (``transactional=True``): one transactional producer writes transactions
of ``txn_records`` records spread over the partitions and aborts about ``abort_ratio`` of them
on purpose, while the same faults (and SIGKILLs of its transaction coordinator) happen. Then
every record of a committed transaction must be in the log exactly once where acknowledged, no
record of an aborted transaction may be visible to a read_committed consumer (during the run
or after), a transaction whose outcome the client could not learn must be wholly visible or
wholly invisible, and no partition's last stable offset may stay below its high watermark.

Used by the fault tests (short runs) and by ``bench/durability_runner.py`` (100+ faults).
"""

from __future__ import annotations

import itertools
import json
import logging
import random
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kazoo.exceptions import NoNodeError

from odradek.broker.transaction.transaction_state import coordinator_partition
from odradek.local.checker import misplaced_acks
from odradek.local.cluster import LocalCluster

__all__ = ["DurabilityReport", "DurabilityRun", "misplaced_acks", "read_to_the_end", "transaction_verdict"]


@dataclass
class DurabilityReport:
    faults: list[str] = field(default_factory=list)
    produced: int = 0  # handed to the client (not counting produce_refused)
    produce_refused: int = 0  # produce() raised: the client refused the record locally
    acknowledged: int = 0
    acknowledged_without_offset: int = 0  # delivered, but the client was not told the offset
    lost: list[str] = field(default_factory=list)  # acked ids missing or at another offset
    duplicated: list[str] = field(default_factory=list)  # ids present more than once
    consumer_reads: int = 0
    vanished_reads: list[str] = field(default_factory=list)  # read by a consumer, later gone
    divergent_replicas: list[str] = field(default_factory=list)
    longest_unavailability_s: dict[int, float] = field(default_factory=dict)
    duration_s: float = 0.0
    # transactional mode
    transactions_committed: int = 0
    transactions_aborted: int = 0  # aborted on purpose, or after an error that required it
    transactions_unknown: int = 0  # the client could not learn the outcome: all or nothing
    aborted_visible: list[str] = field(default_factory=list)  # aborted ids a read_committed reader saw
    partial_transactions: list[str] = field(default_factory=list)  # partly visible transactions
    hanging_partitions: list[str] = field(default_factory=list)  # LSO stayed below the HW

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.vanished_reads or self.divergent_replicas
                    or self.aborted_visible or self.partial_transactions or self.hanging_partitions)

    def summary(self) -> str:
        worst = max(self.longest_unavailability_s.values(), default=0.0)
        return (f"faults injected: {len(self.faults)}, records produced: {self.produced} (refused by the client: "
                f"{self.produce_refused}), acknowledged: {self.acknowledged} (without an offset: "
                f"{self.acknowledged_without_offset}), lost: {len(self.lost)}, duplicated: {len(self.duplicated)}, "
                f"consumer reads: {self.consumer_reads}, reads later gone: {len(self.vanished_reads)}, divergent replicas: "
                f"{len(self.divergent_replicas)}, longest unavailability per partition (s): "
                + ", ".join(f"p{p}={s:.1f}" for p, s in sorted(self.longest_unavailability_s.items()))
                + f" (worst {worst:.1f}), run time {self.duration_s:.0f}s" + self._txn_summary())

    def _txn_summary(self) -> str:
        if not (self.transactions_committed or self.transactions_aborted or self.transactions_unknown):
            return ""
        return (f"; transactions committed: {self.transactions_committed}, aborted: {self.transactions_aborted}, "
                f"outcome unknown to the client: {self.transactions_unknown}, aborted records visible: "
                f"{len(self.aborted_visible)}, partly visible transactions: {len(self.partial_transactions)}, "
                f"hanging partitions: {len(self.hanging_partitions)}")


class DurabilityRun:
    def __init__(self, cluster: LocalCluster, topic: str = "durability", partitions: int = 3, *,
                 faults: int = 6, seed: int | None = None,
                 log: Callable[[str], None] | None = None,
                 transactional: bool = False, txn_records: int = 20, abort_ratio: float = 0.2) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partitions = partitions
        self.target_faults = faults
        self.rng = random.Random(seed)
        # What the run does (each fault, refused records) goes to ``log``, else to this module's logger.
        self.log = log if log is not None else logging.getLogger(__name__).info
        self.report = DurabilityReport()
        self.acked: dict[str, tuple[int, int | None]] = {}  # id -> (partition, offset or None)
        self.ack_times: dict[int, list[float]] = defaultdict(list)
        self.reads: dict[tuple[int, int], bytes] = {}
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        self.session_timeout_s = int(cluster.overrides.get("zookeeper.session.timeout.ms", "6000")) / 1000
        self.transactional = transactional
        self.txn_records = txn_records
        self.abort_ratio = abort_ratio
        self.transactional_id = f"{topic}-txn"
        self.txn_rng = random.Random(None if seed is None else seed + 1)  # the producer thread's own
        self.txn_of: dict[str, int] = {}  # record id -> transaction number
        self.txn_outcome: dict[int, str] = {}  # transaction number -> committed | aborted | unknown

    # ------------------------------------------------------------------ run

    def run(self) -> DurabilityReport:
        started = time.monotonic()
        produce = self._produce_transactional if self.transactional else self._produce
        producer_thread = threading.Thread(target=self._guard(produce), name="producer")
        consumer_thread = threading.Thread(target=self._guard(self._consume), name="consumer")
        producer_thread.start()
        consumer_thread.start()
        try:
            self._wait_first_acks()
            self._inject_faults()
        finally:
            self._stop.set()
            producer_thread.join(180)
            consumer_thread.join(60)
        if self._errors:
            raise self._errors[0]
        self._restore_all()
        if self.transactional:
            self._verify_transactional()
        else:
            self._verify()
        self.report.duration_s = time.monotonic() - started
        return self.report

    def _guard(self, fn):
        def wrapped() -> None:
            try:
                fn()
            except BaseException as e:  # surfaced by run()
                self._errors.append(e)
                self._stop.set()
        return wrapped

    def _on_delivery(self, err, msg) -> None:
        """Delivery report: an acknowledged record's id -> (partition, offset)."""
        if err is None:
            self.acked[msg.value().decode().split(":")[0]] = (msg.partition(), msg.offset())
            self.ack_times[msg.partition()].append(time.monotonic())

    def _wait_first_acks(self) -> None:
        deadline = time.monotonic() + 60
        while len(self.acked) < 100 and time.monotonic() < deadline and not self._stop.is_set():
            time.sleep(0.05)

    # ------------------------------------------------------------------ load

    def _produce(self) -> None:
        producer = Producer({
            **self.cluster.client_properties(), "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 120000, "log_level": 0,
        })
        seq = 0

        while not self._stop.is_set():
            for _ in range(50):
                record_id = f"id{seq:09d}"
                seq += 1
                try:
                    producer.produce(self.topic, value=f"{record_id}:{'x' * 80}".encode(), key=record_id.encode(),
                                     partition=seq % self.partitions, on_delivery=self._on_delivery)
                except BufferError:
                    # The client's queue is full and nothing was queued: the id goes again.
                    seq -= 1
                    producer.poll(0.1)
                except KafkaException as e:
                    # Refused locally (nothing was queued), e.g. while the client's metadata is stale;
                    # counted, and the record is never acknowledged.
                    self.report.produce_refused += 1
                    if self.report.produce_refused == 1 or self.report.produce_refused % 1000 == 0:
                        self.log(f"produce refused by the client ({self.report.produce_refused} so far): {e}")
                    producer.poll(0.1)
            producer.poll(0.01)
        producer.flush(150)
        self.report.produced = seq - self.report.produce_refused
        self.report.acknowledged = len(self.acked)
        self.report.acknowledged_without_offset = sum(1 for _, offset in self.acked.values() if offset is None)

    # ------------------------------------------------------------------ transactional load

    def _txn_producer(self) -> Producer:
        """A transactional producer with its transactions initialised (InitProducerId also
        completes or aborts whatever its predecessor left open); retried while faults last."""
        deadline = time.monotonic() + 180
        while True:
            producer = Producer({
                **self.cluster.client_properties(), "transactional.id": self.transactional_id,
                "linger.ms": 5, "message.timeout.ms": 60000, "transaction.timeout.ms": 60000, "log_level": 0,
            })
            try:
                producer.init_transactions(30)
                return producer
            except KafkaException as e:
                if time.monotonic() > deadline:
                    raise
                self.log(f"init_transactions failed, retrying with a new producer: {e}")
                time.sleep(1)

    def _produce_transactional(self) -> None:
        producer = self._txn_producer()
        txn = 0
        produced = 0

        while not self._stop.is_set():
            commit = self.txn_rng.random() >= self.abort_ratio
            ids = [f"t{txn:07d}{'c' if commit else 'a'}{i:04d}" for i in range(self.txn_records)]
            outcome = "unknown"
            try:
                producer.begin_transaction()
                for i, record_id in enumerate(ids):
                    while True:
                        try:
                            producer.produce(self.topic, value=f"{record_id}:{'x' * 80}".encode(),
                                             key=record_id.encode(), partition=i % self.partitions,
                                             on_delivery=self._on_delivery)
                            break
                        except BufferError:
                            producer.poll(0.1)
                    self.txn_of[record_id] = txn
                    produced += 1
                outcome = self._end_transaction(producer, commit)
            except KafkaException as e:
                outcome = self._after_error(producer, e)
            self.txn_outcome[txn] = outcome
            if outcome == "unknown":
                # The producer may be unusable (fatal error); a new one's InitProducerId settles
                # the open transaction, whichever way the coordinator had got.
                try:
                    producer.flush(1)
                except KafkaException:  # a producer in a fatal state raises its error again
                    pass
                producer = self._txn_producer()
            txn += 1
        producer.flush(30)
        self.report.produced = produced
        outcomes = list(self.txn_outcome.values())
        self.report.transactions_committed = outcomes.count("committed")
        self.report.transactions_aborted = outcomes.count("aborted")
        self.report.transactions_unknown = outcomes.count("unknown")
        committed = {i for i, t in self.txn_of.items() if self.txn_outcome.get(t) == "committed"}
        self.report.acknowledged = len(committed)
        self.report.acknowledged_without_offset = sum(
            1 for i in committed if self.acked.get(i, (0, None))[1] is None)

    def _end_transaction(self, producer: Producer, commit: bool) -> str:
        """commit_transaction / abort_transaction, retried while the error is retriable; a
        commit that needs an abort is aborted."""
        deadline = time.monotonic() + 120
        while True:
            try:
                if commit:
                    producer.commit_transaction(30)
                    return "committed"
                producer.abort_transaction(30)
                return "aborted"
            except KafkaException as e:
                error = e.args[0]
                if error.retriable() and time.monotonic() < deadline:
                    continue
                if commit and error.txn_requires_abort():
                    self.log(f"commit needs an abort: {error}")
                    return self._end_transaction(producer, commit=False)
                self.log(f"{'commit' if commit else 'abort'} failed, outcome unknown to the client: {error}")
                return "unknown"

    def _after_error(self, producer: Producer, e: KafkaException) -> str:
        error = e.args[0]
        self.log(f"transaction failed before its end: {error}")
        if error.txn_requires_abort():
            return self._end_transaction(producer, commit=False)
        return "unknown"

    def _consume(self) -> None:
        consumer = Consumer({
            **self.cluster.client_properties(), "group.id": "durability-reader",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 0,
            "isolation.level": "read_committed",
        })
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        try:
            while not self._stop.is_set():
                for msg in consumer.consume(500, 0.2):
                    if msg.error() is None:
                        self.reads[(msg.partition(), msg.offset())] = msg.value()
        finally:
            consumer.close()
        self.report.consumer_reads = len(self.reads)

    # ------------------------------------------------------------------ faults

    def _controller(self) -> int | None:
        try:  # the controller's node vanishes whenever it dies, also between two reads
            return json.loads(self.cluster.zk_client().get("/controller")[0])["brokerid"]
        except NoNodeError:
            return None

    def _transaction_coordinator(self) -> int | None:
        """The leader of the transactional id's ``__transaction_state`` partition."""
        count = int(self.cluster.overrides.get("transaction.state.log.num.partitions", "50"))
        path = f"/brokers/topics/__transaction_state/partitions/{coordinator_partition(self.transactional_id, count)}/state"
        try:
            leader = json.loads(self.cluster.zk_client().get(path)[0])["leader"]
        except NoNodeError:
            return None
        return leader if leader >= 0 else None

    def _leaders(self) -> dict[int, int]:
        zk = self.cluster.zk_client()
        leaders = {}
        for p in range(self.partitions):
            path = f"/brokers/topics/{self.topic}/partitions/{p}/state"
            if zk.exists(path):
                leaders[p] = json.loads(zk.get(path)[0])["leader"]
        return leaders

    def _inject_faults(self) -> None:
        brokers = list(self.cluster.brokers)
        for n in range(self.target_faults):
            if self._stop.is_set():
                return
            kinds = ["kill-leader", "kill-controller", "kill-any", "pause"]
            kind = self.rng.choice([*kinds, "kill-coordinator"] if self.transactional else kinds)
            if kind == "kill-controller":
                victim = self._controller()
            elif kind == "kill-coordinator":
                victim = self._transaction_coordinator()
            elif kind == "kill-leader":
                leaders = [b for b in self._leaders().values() if b >= 0]
                victim = self.rng.choice(leaders) if leaders else None
            else:
                victim = None
            if victim is None:
                victim = self.rng.choice(brokers)
            if kind == "pause":
                self.log(f"fault {n + 1}: SIGSTOP broker {victim} past the session timeout")
                self.cluster.signal_broker(victim, signal.SIGSTOP)
                time.sleep(self.session_timeout_s + 2 + self.rng.random() * 2)
                self.cluster.signal_broker(victim, signal.SIGCONT)
            else:
                self.log(f"fault {n + 1}: SIGKILL broker {victim} ({kind})")
                self.cluster.kill_broker(victim)
                time.sleep(self.rng.random() * 3)
                try:
                    self.cluster.start_broker(victim, timeout_s=120)
                except TimeoutError:
                    self._dump_task_stacks("broker did not come back")
                    time.sleep(1)
                    raise
            self.report.faults.append(f"{kind} broker {victim}")
            self._wait_healthy(timeout_s=90)

    def _isr_full(self) -> bool:
        zk = self.cluster.zk_client()
        for p in range(self.partitions):
            path = f"/brokers/topics/{self.topic}/partitions/{p}/state"
            if not zk.exists(path):
                return False
            state = json.loads(zk.get(path)[0])
            if state["leader"] < 0 or len(state["isr"]) < len(self.cluster.brokers):
                return False
        return len(zk.get_children("/brokers/ids")) == len(self.cluster.brokers)

    def _wait_healthy(self, timeout_s: float) -> None:
        """Before the next fault: every broker registered and every ISR full again."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self._stop.is_set():
            if self._isr_full():
                return
            time.sleep(0.2)
        if self._stop.is_set():
            return
        self._dump_task_stacks("warning: ISRs not full again before the next fault")

    def _dump_task_stacks(self, why: str) -> None:
        self.log(f"{why} (brokers log their task stacks: SIGUSR1)")
        for broker_id in self.cluster.brokers:
            self.cluster.signal_broker(broker_id, signal.SIGUSR1)

    def _restore_all(self) -> None:
        for broker_id, broker in self.cluster.brokers.items():
            self.cluster.signal_broker(broker_id, signal.SIGCONT)
            if not broker.alive:
                self.cluster.start_broker(broker_id, timeout_s=120)
        deadline = time.monotonic() + 120
        while not self._isr_full():
            if time.monotonic() > deadline:
                raise TimeoutError("ISRs did not recover after the run")
            time.sleep(0.2)

    # ------------------------------------------------------------------ verification

    def _read_final(self) -> dict[int, dict[int, bytes]]:
        """Every record a read_committed consumer reads, per partition and offset."""
        final, _ = read_to_the_end(
            {**self.cluster.client_properties(), "group.id": "durability-verifier", "isolation.level": "read_committed"},
            self.topic, self.partitions, transactional=self.transactional)
        return final

    def _verify(self) -> None:
        final = self._read_final()
        positions: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for p, records in final.items():
            for offset, value in records.items():
                positions[value.decode().split(":")[0]].append((p, offset))
        self.report.lost = misplaced_acks(self.acked, positions)
        self.report.duplicated = [i for i, ps in positions.items() if len(ps) > 1]
        for (p, offset), value in self.reads.items():
            if final.get(p, {}).get(offset) != value:
                self.report.vanished_reads.append(f"p{p}@{offset}")
        self._compare_replicas()
        for p, times in self.ack_times.items():
            times.sort()
            gaps = [b - a for a, b in itertools.pairwise(times)]
            self.report.longest_unavailability_s[p] = max(gaps, default=0.0)

    def _verify_transactional(self) -> None:
        """Committed records exactly once where acknowledged, aborted ones never visible (now
        or during the run), unknown outcomes all or nothing, no partition's LSO left behind."""
        self._wait_stable()
        final = self._read_final()
        positions: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for p, records in final.items():
            for offset, value in records.items():
                positions[value.decode().split(":")[0]].append((p, offset))
        committed = {i: self.acked.get(i, (self._partition_of(i), None))
                     for i, t in self.txn_of.items() if self.txn_outcome.get(t) == "committed"}
        self.report.lost = misplaced_acks(committed, positions)
        self.report.duplicated = [i for i, ps in positions.items() if len(ps) > 1]
        read_ids = {value.decode().split(":")[0] for value in self.reads.values()}
        self.report.aborted_visible, self.report.partial_transactions = transaction_verdict(
            self.txn_of, self.txn_outcome, set(positions), read_ids)
        for (p, offset), value in self.reads.items():
            if final.get(p, {}).get(offset) != value:
                self.report.vanished_reads.append(f"p{p}@{offset}")
        self._compare_replicas()
        for p, times in self.ack_times.items():
            times.sort()
            gaps = [b - a for a, b in itertools.pairwise(times)]
            self.report.longest_unavailability_s[p] = max(gaps, default=0.0)

    def _partition_of(self, record_id: str) -> int:
        return int(record_id[-4:]) % self.partitions

    def _wait_stable(self, timeout_s: float = 120.0) -> None:
        """Wait until each partition's last stable offset reaches its high watermark (open
        transactions completed); partitions still behind after ``timeout_s`` are hanging."""
        ends: dict[str, Consumer] = {}
        for isolation in ("read_committed", "read_uncommitted"):
            ends[isolation] = Consumer({**self.cluster.client_properties(),
                                        "group.id": "durability-lso", "isolation.level": isolation, "log_level": 0})
        deadline = time.monotonic() + timeout_s
        try:
            behind: dict[int, tuple[int, int]] = {}
            while True:
                behind = {}
                for p in range(self.partitions):
                    tp = TopicPartition(self.topic, p)
                    try:
                        lso = ends["read_committed"].get_watermark_offsets(tp, timeout=30)[1]
                        hw = ends["read_uncommitted"].get_watermark_offsets(tp, timeout=30)[1]
                    except KafkaException as e:  # e.g. a leader just moved: asked again
                        self.log(f"partition {p}: end offsets not known yet: {e}")
                        lso, hw = -1, 0
                    if lso != hw:
                        behind[p] = (lso, hw)
                if not behind or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            self.report.hanging_partitions = [f"partition {p}: LSO {lso} < HW {hw}" for p, (lso, hw) in behind.items()]
        finally:
            for consumer in ends.values():
                consumer.close()

    def _compare_replicas(self) -> None:
        """Once every replica is in the ISR and caught up, their logs are byte-identical."""
        deadline = time.monotonic() + 60
        for p in range(self.partitions):
            while True:
                contents = {b: _log_bytes(broker.config_path.parent / "data" / f"{self.topic}-{p}")
                            for b, broker in self.cluster.brokers.items()}
                if len(set(contents.values())) == 1:
                    break
                if time.monotonic() > deadline:
                    sizes = {b: len(c) for b, c in contents.items()}
                    self.report.divergent_replicas.append(f"partition {p}: log sizes {sizes}")
                    break
                time.sleep(0.2)


def transaction_verdict(txn_of: Mapping[str, int], outcome: Mapping[int, str], visible: Set[str],
                        read: Set[str]) -> tuple[list[str], list[str]]:
    """(aborted records visible, partly visible transactions): ids of aborted transactions a
    read_committed consumer finds in the final log (``visible``) or read during the run
    (``read``), and transactions some but not all of whose records are visible, whatever the
    client learnt of their outcome. ``txn_of`` maps each record id to its transaction."""
    aborted = {i for i, t in txn_of.items() if outcome.get(t) == "aborted"}
    aborted_visible = sorted(aborted & visible) + sorted(f"{i} (read during the run)" for i in aborted & read)
    members: dict[int, list[str]] = defaultdict(list)
    for record_id, txn in txn_of.items():
        members[txn].append(record_id)
    partial = []
    for txn, ids in sorted(members.items()):
        present = sum(1 for i in ids if i in visible)
        if 0 < present < len(ids):
            partial.append(f"transaction {txn} ({outcome.get(txn, 'unknown')}): {present} of {len(ids)} records visible")
    return aborted_visible, partial


def _log_bytes(directory: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))


def read_to_the_end(config: Mapping[str, object], topic: str, partitions: int, *,
                    transactional: bool = False, timeout_s: float = 300.0,
                    ) -> tuple[dict[int, dict[int, bytes]], dict[int, int]]:
    """Every record of ``topic``'s partitions up to the end offsets found first, per partition
    and offset (values as bytes), and those end offsets. ``transactional``: a log may end with
    a marker, not a record, so a partition's EOF also ends it."""
    consumer = Consumer({**config, "enable.auto.commit": False, "log_level": 0,
                         "enable.partition.eof": transactional})
    final: dict[int, dict[int, bytes]] = {p: {} for p in range(partitions)}
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        remaining = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + timeout_s
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF and transactional:
                        remaining.discard(msg.partition())
                    continue
                final[msg.partition()][msg.offset()] = msg.value()
                if msg.offset() >= ends[msg.partition()] - 1:
                    remaining.discard(msg.partition())
        if remaining:
            raise TimeoutError(f"could not read partitions {sorted(remaining)} to their end")
    finally:
        consumer.close()
    return final, ends
