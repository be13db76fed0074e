"""Transactions under broker faults on 3 brokers (RF 3, min.insync.replicas=2): the
transaction coordinator's broker SIGKILLed mid-transaction and right as the commit starts, a
data partition's leader SIGKILLed while commits are on their way to their markers, and a short
transactional durability run. Afterwards every transaction is wholly visible or wholly
invisible to read_committed, committed ones are visible, aborted ones are not, and no
transaction hangs (each partition's last stable offset reaches its high watermark)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable

from confluent_kafka import KafkaException, Producer

from odradek.broker.transaction.transaction_state import coordinator_partition
from odradek.local.cluster import LocalCluster
from odradek.local.durability import DurabilityRun
from support import ClusterFactory, create_topic, partition_state, unique_topic, wait_until
from support.transactions import TXN_OVERRIDES, read_topic, wait_lso_reaches_hw

FAULT_OVERRIDES = {**TXN_OVERRIDES, "min.insync.replicas": "2", "replica.lag.time.max.ms": "5000",
                   "zookeeper.session.timeout.ms": "4000"}
PARTITIONS = 3
RECORDS_PER_PARTITION = 4


def _coordinator(cluster: LocalCluster, transactional_id: str) -> int:
    count = int(TXN_OVERRIDES["transaction.state.log.num.partitions"])
    state = wait_until(lambda: partition_state(cluster, "__transaction_state",
                                               coordinator_partition(transactional_id, count)),
                       message="the __transaction_state partition")
    return state["leader"]  # type: ignore[index]


def _leader(cluster: LocalCluster, topic: str, partition: int) -> int:
    state = partition_state(cluster, topic, partition)
    assert state is not None
    return state["leader"]


class TxnStream:
    """Transactions of RECORDS_PER_PARTITION records on each partition, committed (or aborted
    when ``abort`` says so) one after another by one confluent-kafka producer; each outcome as
    the client learnt it: committed, aborted or unknown (a new producer then settles it)."""

    def __init__(self, cluster: LocalCluster, topic: str, abort: Callable[[int], bool] = lambda n: n % 4 == 3) -> None:
        self.cluster = cluster
        self.topic = topic
        self.abort = abort
        self.transactional_id = unique_topic("stream")
        self.outcome: dict[int, str] = {}
        self.committing = threading.Event()  # set as commit_transaction is called
        self.producer = self._new_producer()

    def _new_producer(self) -> Producer:
        def initialised() -> tuple[Producer] | None:  # a 1-tuple: an idle Producer's len() is 0
            producer = Producer({"bootstrap.servers": self.cluster.bootstrap_servers, "log_level": 0,
                                 "transactional.id": self.transactional_id, "linger.ms": 2,
                                 "transaction.timeout.ms": 30000, "message.timeout.ms": 30000,
                                 "socket.timeout.ms": 10000})
            try:
                producer.init_transactions(30)
            except KafkaException:
                return None
            return (producer,)

        return wait_until(initialised, timeout=120, interval=0.5,
                          message=f"InitProducerId for {self.transactional_id}")[0]

    def begin_and_write(self, n: int) -> None:
        self.producer.begin_transaction()
        for p in range(PARTITIONS):
            for i in range(RECORDS_PER_PARTITION):
                self.producer.produce(self.topic, value=f"t{n}-p{p}-{i}".encode(), partition=p)
        self.producer.flush(30)

    def end(self, n: int, commit: bool | None = None) -> None:
        commit = not self.abort(n) if commit is None else commit
        self.committing.set()
        deadline = time.monotonic() + 90
        outcome = "unknown"
        while time.monotonic() < deadline:
            try:
                if commit:
                    self.producer.commit_transaction(30)
                    outcome = "committed"
                else:
                    self.producer.abort_transaction(30)
                    outcome = "aborted"
                break
            except KafkaException as e:
                error = e.args[0]
                if error.retriable():
                    continue
                if error.txn_requires_abort() and commit:
                    commit = False
                    continue
                break
        self.outcome[n] = outcome
        if outcome == "unknown":
            self.producer.flush(1)
            self.producer = self._new_producer()

    def one(self, n: int) -> None:
        try:
            self.begin_and_write(n)
        except KafkaException as e:
            if e.args[0].txn_requires_abort():
                self.end(n, commit=False)
            else:
                self.outcome[n] = "unknown"
                self.producer = self._new_producer()
            return
        self.end(n)

    def check(self) -> None:
        """All or nothing per transaction; committed visible, aborted not; no partition hangs."""
        for p in range(PARTITIONS):
            wait_lso_reaches_hw(self.cluster.bootstrap_servers, self.topic, p, timeout=90)
        visible: dict[int, int] = defaultdict(int)
        for _, _, value in read_topic(self.cluster.bootstrap_servers, self.topic, PARTITIONS, "read_committed"):
            visible[int(value.decode().split("-")[0][1:])] += 1
        total = PARTITIONS * RECORDS_PER_PARTITION
        for n, outcome in self.outcome.items():
            count = visible.pop(n, 0)
            assert count in (0, total), f"transaction {n} ({outcome}) partly visible: {count} of {total}"
            if outcome == "committed":
                assert count == total, f"committed transaction {n} not visible"
            if outcome == "aborted":
                assert count == 0, f"aborted transaction {n} visible"
        assert not visible, f"records of transactions never begun: {dict(visible)}"
        assert "committed" in self.outcome.values()


def _cluster(cluster_factory: ClusterFactory, topic: str) -> LocalCluster:
    cluster = cluster_factory(3, overrides=FAULT_OVERRIDES)
    create_topic(cluster, topic, PARTITIONS, 3)
    return cluster


def test_coordinator_sigkill_mid_transaction(cluster_factory: ClusterFactory) -> None:
    topic = unique_topic("coord-kill")
    cluster = _cluster(cluster_factory, topic)
    stream = TxnStream(cluster, topic, abort=lambda n: False)
    stream.one(0)
    victim = _coordinator(cluster, stream.transactional_id)
    stream.begin_and_write(1)
    cluster.kill_broker(victim)  # the coordinator holds transaction 1 as Ongoing
    stream.end(1)
    stream.one(2)
    assert _coordinator(cluster, stream.transactional_id) != victim
    cluster.start_broker(victim, timeout_s=120)
    stream.one(3)
    stream.check()
    assert stream.outcome[0] == stream.outcome[3] == "committed"


def test_coordinator_sigkill_as_the_commit_starts(cluster_factory: ClusterFactory) -> None:
    """Killed while EndTxn is in flight: the new coordinator loads PrepareCommit (or Ongoing)
    from __transaction_state and completes it (or the client's retry does)."""
    topic = unique_topic("commit-kill")
    cluster = _cluster(cluster_factory, topic)
    stream = TxnStream(cluster, topic, abort=lambda n: False)
    stream.one(0)
    victim = _coordinator(cluster, stream.transactional_id)
    stream.begin_and_write(1)
    stream.committing.clear()
    ender = threading.Thread(target=stream.end, args=(1,))
    ender.start()
    assert stream.committing.wait(10)
    cluster.kill_broker(victim)
    ender.join(120)
    assert not ender.is_alive()
    stream.one(2)
    cluster.start_broker(victim, timeout_s=120)
    stream.check()


def test_data_leader_sigkill_between_end_txn_and_markers(cluster_factory: ClusterFactory) -> None:
    """A stream of transactions; each time a commit starts, the leader of a data partition that
    is not the coordinator is SIGKILLed (so the coordinator's markers to it must find the new
    leader), then restarted before the next kill."""
    topic = unique_topic("leader-kill")
    cluster = _cluster(cluster_factory, topic)
    stream = TxnStream(cluster, topic)
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        n = 0
        try:
            while not stop.is_set():
                stream.one(n)
                n += 1
        except BaseException as e:  # surfaced below
            errors.append(e)

    worker = threading.Thread(target=run)
    worker.start()
    try:
        for _ in range(3):
            coordinator = _coordinator(cluster, stream.transactional_id)
            leaders = [_leader(cluster, topic, p) for p in range(PARTITIONS)]
            victims = [b for b in leaders if b not in (coordinator, -1)] or [b for b in leaders if b != -1]
            stream.committing.clear()
            assert stream.committing.wait(60), "no commit started"
            victim = victims[0]
            cluster.kill_broker(victim)
            # Back only once the controller moved its partitions: the markers must find the new leaders.
            wait_until(lambda victim=victim: victim not in {_leader(cluster, topic, p) for p in range(PARTITIONS)},
                       timeout=60, message=f"leaders elected in place of broker {victim}")
            cluster.start_broker(victim, timeout_s=120)
            wait_until(lambda: all(len((partition_state(cluster, topic, p) or {}).get("isr", [])) == 3
                                   for p in range(PARTITIONS)), timeout=90, message="full ISRs")
    finally:
        stop.set()
        worker.join(240)
    assert not errors, errors
    assert len(stream.outcome) >= 3  # one per kill at least: each kill came as a transaction ended
    stream.check()


def test_transactional_durability_run(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3, overrides=FAULT_OVERRIDES)
    create_topic(cluster, "durability", 3, 3)
    # 30 transactions' worth acknowledged before the first fault (a fifth aborted on purpose):
    # the faults leave little throughput on a loaded machine (276 records in all, once, in a
    # fresh-clone suite run).
    report = DurabilityRun(cluster, faults=3, seed=11, transactional=True, txn_records=12,
                           first_acks=30 * 12, log=print).run()
    print(report.summary())
    assert len(report.faults) == 3
    assert report.transactions_committed > 20
    assert report.transactions_aborted > 0
    assert report.lost == []
    assert report.duplicated == []
    assert report.aborted_visible == []
    assert report.partial_transactions == []
    assert report.hanging_partitions == []
    assert report.vanished_reads == []
    assert report.divergent_replicas == []
    assert report.consumer_reads > 0
