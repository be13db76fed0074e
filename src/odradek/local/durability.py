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

The faults are the table of local/durability_faults.py; ``local/checker.py`` judges the run
(``check_durability``). Used by the fault tests (short runs) and by
``bench/durability_runner.py`` (100+ faults).
"""

from __future__ import annotations

import logging
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kazoo.exceptions import KazooException

from odradek.local.checker import (
    Ack,
    Poll,
    Transactions,
    Verdict,
    check_durability,
    longest_ack_gaps,
)
from odradek.local.cluster import LocalCluster
from odradek.local.cluster_state import poll_until
from odradek.local.durability_faults import DURABILITY_FAULTS, TRANSACTIONAL_FAULTS, BrokerTarget
from odradek.local.final_read import read_to_the_end, settled_replica_logs, wait_stable
from odradek.local.txn_client import (
    after_error,
    end_transaction,
    replace_producer,
    transactional_producer,
)

__all__ = ["DurabilityReport", "DurabilityRun"]


@dataclass
class DurabilityReport:
    faults: list[str] = field(default_factory=list)
    produced: int = 0  # handed to the client (not counting produce_refused)
    produce_refused: int = 0  # produce() raised: the client refused the record locally
    acknowledged: int = 0
    acknowledged_without_offset: int = 0  # delivered, but the client was not told the offset
    consumer_reads: int = 0
    longest_unavailability_s: dict[int, float] = field(default_factory=dict)
    duration_s: float = 0.0
    # transactional mode
    transactions_committed: int = 0
    transactions_aborted: int = 0  # aborted on purpose, or after an error that required it
    transactions_unknown: int = 0  # the client could not learn the outcome: all or nothing
    verdict: Verdict = field(default_factory=Verdict)  # the checker's

    # The verdict in the report's words.
    @property
    def lost(self) -> list[str]:  # acked ids missing or at another offset
        return self.verdict.lost

    @property
    def duplicated(self) -> list[str]:  # ids present more than once
        return self.verdict.duplicated

    @property
    def duplicated_resent(self) -> list[str]:  # of those, every copy under another producer epoch or id
        return self.verdict.duplicated_resent

    @property
    def duplicated_same_writer(self) -> list[str]:  # the rest: a broker's failed deduplication
        return self.verdict.duplicated_same_writer

    @property
    def vanished_reads(self) -> list[str]:  # read by a consumer, later gone
        return self.verdict.vanished

    @property
    def divergent_replicas(self) -> list[str]:
        return self.verdict.divergent

    @property
    def aborted_visible(self) -> list[str]:  # aborted ids a read_committed reader saw
        return self.verdict.aborted_visible

    @property
    def partial_transactions(self) -> list[str]:  # partly visible transactions
        return self.verdict.partial_transactions

    @property
    def hanging_partitions(self) -> list[str]:  # LSO stayed below the HW
        return self.verdict.hanging

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    def summary(self) -> str:
        worst = max(self.longest_unavailability_s.values(), default=0.0)
        return (f"faults injected: {len(self.faults)}, records produced: {self.produced} (refused by the client: "
                f"{self.produce_refused}), acknowledged: {self.acknowledged} (without an offset: "
                f"{self.acknowledged_without_offset}), lost: {len(self.lost)}, duplicated: {len(self.duplicated)} "
                f"(re-sent by the client under a new producer epoch: {len(self.duplicated_resent)}), "
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
                 transactional: bool = False, txn_records: int = 20, abort_ratio: float = 0.2,
                 first_acks: int = 100) -> None:
        self.cluster = cluster
        # Acknowledged records before the first fault: the history has at least these, however
        # slowly a loaded machine lets the workload run.
        self.first_acks = first_acks
        self.topic = topic
        self.partitions = partitions
        self.target_faults = faults
        self.rng = random.Random(seed)
        # What the run does (each fault, refused records) goes to ``log``, else to this module's logger.
        self.log = log if log is not None else logging.getLogger(__name__).info
        self.report = DurabilityReport()
        self.acks: list[Ack] = []  # every delivery report without an error (value: the record id)
        self.reads: dict[tuple[int, int], Poll] = {}  # (partition, offset) -> what the consumer read there
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        self.transactional = transactional
        self.txn_records = txn_records
        self.abort_ratio = abort_ratio
        self.transactional_id = f"{topic}-txn"
        self.txn_rng = random.Random(None if seed is None else seed + 1)  # the producer thread's own
        self.txn_of: dict[str, int] = {}  # record id -> transaction number
        self.txn_outcome: dict[int, str] = {}  # transaction number -> committed | aborted | unknown
        self.target = BrokerTarget(cluster, self.rng, topic, partitions, self.transactional_id, self.log)

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
        # Counted here, not when the consumer's close() returns: under load and after kills
        # librdkafka's close can outlast the join (a suite run reported 0 reads so).
        self.report.consumer_reads = len(self.reads)
        if self._errors:
            raise self._errors[0]
        self._restore_all()
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
        """Delivery report: an acknowledged record's id, partition and offset (or None)."""
        if err is None:
            self.acks.append(Ack(_record_id(msg.value()), msg.partition(), msg.offset(), time.monotonic()))

    @property
    def acked(self) -> dict[str, tuple[int, int | None]]:
        """Each acknowledged record id -> (partition, offset or None)."""
        return {a.value: (a.partition, a.offset) for a in self.acks}

    def _wait_first_acks(self) -> None:
        poll_until(lambda: len(self.acks) >= self.first_acks, 90, interval_s=0.05, stop=self._stop)

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
        acked = self.acked
        self.report.acknowledged = len(acked)
        self.report.acknowledged_without_offset = sum(1 for _, offset in acked.values() if offset is None)

    # ------------------------------------------------------------------ transactional load

    def _txn_producer(self) -> Producer:
        return transactional_producer(self.cluster.client_properties(), self.transactional_id, self.log)

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
                outcome = end_transaction(producer, commit, self.log)
            except KafkaException as e:
                outcome = after_error(producer, e, self.log)
            self.txn_outcome[txn] = outcome
            if outcome == "unknown":
                producer = replace_producer(producer, self.cluster.client_properties(), self.transactional_id,
                                            self.log)
            txn += 1
        producer.flush(30)
        self.report.produced = produced
        outcomes = list(self.txn_outcome.values())
        self.report.transactions_committed = outcomes.count("committed")
        self.report.transactions_aborted = outcomes.count("aborted")
        self.report.transactions_unknown = outcomes.count("unknown")
        committed = self._committed_writes()
        self.report.acknowledged = len(committed)
        self.report.acknowledged_without_offset = sum(1 for _, offset in committed.values() if offset is None)

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
                        self.reads[(msg.partition(), msg.offset())] = Poll(
                            "durability-reader", msg.partition(), msg.offset(), _record_id(msg.value()),
                            time.monotonic())
        finally:
            consumer.close()

    # ------------------------------------------------------------------ faults

    def _inject_faults(self) -> None:
        table = TRANSACTIONAL_FAULTS if self.transactional else DURABILITY_FAULTS
        for n in range(self.target_faults):
            if self._stop.is_set():
                return
            fault = self.rng.choice(table)(self.target)
            self.log(f"fault {n + 1}: {fault.action}")
            fault.inject()
            time.sleep(fault.held_s())
            fault.heal()
            self.report.faults.append(fault.description)
            self._wait_healthy(timeout_s=60)

    def _wait_full_isr(self, timeout_s: float, stop: threading.Event | None = None) -> bool:
        """Every broker registered and in the ISR of every partition, as ZooKeeper says."""
        brokers = self.cluster.brokers
        return self.cluster.state().wait_isr_full(self.topic, self.partitions, len(brokers), brokers=brokers,
                                                  timeout_s=timeout_s, stop=stop, log=self.log)

    def _wait_healthy(self, timeout_s: float) -> None:
        """Before the next fault: every broker registered and every ISR full again."""
        if not self._wait_full_isr(timeout_s, self._stop) and not self._stop.is_set():
            self.target.dump_task_stacks(f"warning: ISRs not full again before the next fault: {self._isr_state()}")

    def _restore_all(self) -> None:
        for broker_id, broker in self.cluster.brokers.items():
            self.cluster.signal_broker(broker_id, signal.SIGCONT)
            if not broker.alive:
                self.cluster.start_broker(broker_id, timeout_s=120)
        if not self._wait_full_isr(90):
            state = self._isr_state()
            self.target.dump_task_stacks(f"ISRs did not recover after the run: {state}")
            raise TimeoutError(f"ISRs did not recover after the run: {state}")

    def _isr_state(self) -> str:
        """The registered brokers and each partition's leader and ISR, as ZooKeeper says now."""
        try:
            state = self.cluster.state()
            partitions = state.partition_states(self.topic, self.partitions)
            return f"registered {sorted(state.registered_brokers())}, " + ", ".join(
                f"{p}: leader {s.leader} isr {s.isr}" if s is not None else f"{p}: no state"
                for p, s in partitions.items())
        except KazooException as e:
            return f"ZooKeeper read failed: {e!r}"

    # ------------------------------------------------------------------ verification

    def _verify(self) -> None:
        """The checker's verdict over what was written, read and replicated: committed
        records exactly once where acknowledged, nothing read that vanished, replicas equal;
        in a transactional run also aborted ones never visible (now or during the run),
        unknown outcomes all or nothing, no partition's LSO left behind."""
        end_offsets = (wait_stable(self.cluster.client_properties(), self.topic, self.partitions, log=self.log)
                       if self.transactional else None)
        final, ends = read_to_the_end(
            {**self.cluster.client_properties(), "group.id": "durability-verifier", "isolation.level": "read_committed"},
            self.topic, self.partitions, transactional=self.transactional)
        logs = settled_replica_logs(self.cluster, self.topic, self.partitions, ends, timeout_s=60)
        self.report.verdict = check_durability(
            self._committed_writes() if self.transactional else self.acked, self.reads.values(),
            {p: {o: _record_id(v) for o, v in records.items()} for p, records in final.items()}, ends, logs,
            transactions=Transactions(self.txn_of, self.txn_outcome) if self.transactional else None,
            end_offsets=end_offsets)
        self.report.longest_unavailability_s = longest_ack_gaps(self.acks)

    def _committed_writes(self) -> dict[str, tuple[int, int | None]]:
        """Every record of a committed transaction -> (partition, offset), the offset None
        where no delivery report came."""
        acked = self.acked
        return {i: acked.get(i, (self._partition_of(i), None))
                for i, t in self.txn_of.items() if self.txn_outcome.get(t) == "committed"}

    def _partition_of(self, record_id: str) -> int:
        return int(record_id[-4:]) % self.partitions


def _record_id(value: bytes) -> str:
    """A record's unique id: its value up to the first colon."""
    return value.decode().split(":")[0]
