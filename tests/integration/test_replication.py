"""Replication on real brokers: followers, ISR shrink/expand, acks=all, leader-epoch truncation."""

from __future__ import annotations

import asyncio
import datetime
import signal
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kio.schema.produce.v9 import request as preq
from kio.schema.produce.v9 import response as presp

from odradek.local.cluster import LocalCluster
from odradek.net.client import BrokerConnection
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import SimpleRecord, build_batch
from support import (
    ClusterFactory,
    controller_of,
    create_topic,
    partition_state,
    run_odradek,
    wait_until,
)


@pytest.fixture
def producer(cluster_factory: ClusterFactory) -> Iterator[Callable[..., Producer]]:
    """Makes producers for a cluster; closes each one before the clusters stop."""
    made: list[Producer] = []

    def make(cluster: LocalCluster, **conf: object) -> Producer:
        made.append(Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0,
                              "message.timeout.ms": 30000, **conf}))
        return made[-1]

    try:
        yield make
    finally:
        for p in made:
            p.close()


def produce_all(p: Producer, topic: str, values: list[bytes], partition: int = 0) -> list[tuple[object, int]]:
    """Produce and flush; returns (error, offset) per record in order."""
    results: list[tuple[object, int]] = [None] * len(values)  # type: ignore[list-item]
    for i, v in enumerate(values):
        def report(err, msg, i=i):
            results[i] = (err, msg.offset() if err is None else -1)
        p.produce(topic, value=v, partition=partition, on_delivery=report)
        p.poll(0)
    assert p.flush(60) == 0
    return results


def read_all(cluster: LocalCluster, topic: str, partition: int = 0, expect: int | None = None) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "replication-test",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[tuple[int, bytes]] = []
    try:
        def done() -> bool:
            for m in c.consume(1000, 0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        return expect is None or len(out) >= expect
                    continue
                out.append((m.offset(), m.value()))
            return expect is not None and len(out) >= expect
        wait_until(done, timeout=60, message=f"reading {topic}-{partition}")
    finally:
        c.close()
    return out


def segment_bytes(cluster: LocalCluster, broker_id: int, topic: str, partition: int = 0) -> bytes:
    d = cluster.brokers[broker_id].config_path.parent / "data" / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def test_acks_all_waits_for_the_isr_and_followers_hold_identical_logs(cluster_factory, producer) -> None:
    cluster = cluster_factory(3)
    create_topic(cluster, "replicated", 1, 3, {"min.insync.replicas": "2"})
    results = produce_all(producer(cluster, acks="all"), "replicated", [f"r{i}".encode() for i in range(200)])
    assert [e for e, _ in results] == [None] * 200
    assert [o for _, o in results] == list(range(200))
    assert read_all(cluster, "replicated", expect=200) == [(i, f"r{i}".encode()) for i in range(200)]
    # Every replica holds the same bytes (offsets, epochs and all).
    wait_until(lambda: len({segment_bytes(cluster, b, "replicated") for b in range(3)}) == 1,
               message="identical replica logs")


def test_not_enough_replicas_when_the_isr_is_below_min_insync(cluster_factory, producer) -> None:
    cluster = cluster_factory(3)
    controller, _ = controller_of(cluster)
    a, b = (x for x in range(3) if x != controller)
    create_topic(cluster, "strict", config={"min.insync.replicas": "2"}, assignment=[[a, b]])
    cluster.kill_broker(b)
    wait_until(lambda: partition_state(cluster, "strict", 0)["isr"] == [a], timeout=30, message="ISR shrink")
    results = produce_all(producer(cluster, acks="all", retries=0, **{"message.timeout.ms": 5000}),
                          "strict", [b"x"])
    assert results[0][0] is not None
    assert results[0][0].code() == KafkaError.NOT_ENOUGH_REPLICAS
    ok = produce_all(producer(cluster, acks=1), "strict", [b"y"])  # acks=1 does not need the ISR
    assert ok[0][0] is None


def test_paused_follower_leaves_and_rejoins_the_isr(cluster_factory, producer) -> None:
    cluster = cluster_factory(3, overrides={"replica.lag.time.max.ms": "2000",
                                            "zookeeper.session.timeout.ms": "30000"})
    controller, _ = controller_of(cluster)
    a, b = (x for x in range(3) if x != controller)
    create_topic(cluster, "lagging", assignment=[[a, b, controller]])
    p = producer(cluster, acks=1)
    produce_all(p, "lagging", [b"before"] * 10)
    cluster.signal_broker(b, signal.SIGSTOP)  # alive in ZooKeeper, but not fetching
    try:
        produce_all(p, "lagging", [b"during"] * 10)
        wait_until(lambda: b not in partition_state(cluster, "lagging", 0)["isr"], timeout=30,
                   message="leader shrinks the ISR")
        assert partition_state(cluster, "lagging", 0)["leader"] == a
    finally:
        cluster.signal_broker(b, signal.SIGCONT)
    produce_all(p, "lagging", [b"after"] * 10)
    wait_until(lambda: sorted(partition_state(cluster, "lagging", 0)["isr"]) == sorted([a, b, controller]),
               timeout=30, message="ISR expands again")
    out = run_odradek("topics", "--zookeeper", cluster.zookeeper_connect, "--describe", "--topic", "lagging").stdout
    assert f"Isr: {a}," in out and str(b) in out.split("Isr: ")[1]
    state_log = cluster.brokers[a].config_path.parent / "state-change.log"
    wait_until(lambda: "Shrinking ISR of partition lagging-0" in state_log.read_text()
               and "Expanding ISR of partition lagging-0" in state_log.read_text(), message="state-change log")


def test_killed_follower_catches_up_and_rejoins(cluster_factory, producer) -> None:
    cluster = cluster_factory(3)
    controller, _ = controller_of(cluster)
    a, b = (x for x in range(3) if x != controller)
    create_topic(cluster, "phoenix", config={"min.insync.replicas": "2"}, assignment=[[a, b, controller]])
    p = producer(cluster, acks="all")
    produce_all(p, "phoenix", [f"a{i}".encode() for i in range(100)])
    cluster.kill_broker(b)
    wait_until(lambda: b not in partition_state(cluster, "phoenix", 0)["isr"], timeout=30, message="ISR shrink")
    produce_all(p, "phoenix", [f"b{i}".encode() for i in range(100)])  # ISR of 2 still satisfies min.insync
    cluster.start_broker(b)
    wait_until(lambda: b in partition_state(cluster, "phoenix", 0)["isr"], timeout=60, message="rejoined ISR")
    wait_until(lambda: segment_bytes(cluster, b, "phoenix") == segment_bytes(cluster, a, "phoenix"),
               message="follower caught up byte for byte")


def test_divergent_tail_is_truncated_by_leader_epoch(cluster_factory, producer) -> None:
    """KIP-101: records only the old leader had (acks=1, never replicated) are truncated when
    it comes back as a follower; no replica keeps a tail that diverged from the leader."""
    # The follower is stopped for about a second (in the ISR, in its ZooKeeper session); the
    # killed leader's session must expire before the follower is elected: 8 s covers one and
    # bounds the other.
    cluster = cluster_factory(3, overrides={"replica.lag.time.max.ms": "30000",
                                            "zookeeper.session.timeout.ms": "8000",
                                            "replica.fetch.wait.max.ms": "100"})
    controller, _ = controller_of(cluster)
    old_leader, follower = (x for x in range(3) if x != controller)
    create_topic(cluster, "diverge", assignment=[[old_leader, follower]])
    p = producer(cluster, acks="all")
    produce_all(p, "diverge", [f"common{i}".encode() for i in range(20)])
    wait_until(lambda: segment_bytes(cluster, follower, "diverge") == segment_bytes(cluster, old_leader, "diverge"))
    cluster.signal_broker(follower, signal.SIGSTOP)  # the follower stops fetching (still in the ISR)
    # A fetch the follower sent just before it stopped may still be parked at the leader (up to
    # replica.fetch.wait.max.ms); let that timeout elapse so it is answered (empty) first, or the
    # "lost" records would go out in its response.  Nothing outside the leader can observe the
    # parked fetch, so this waits out the timeout (ten times over) rather than a condition.
    time.sleep(1.0)
    lost = produce_all(producer(cluster, acks=1), "diverge", [f"lost{i}".encode() for i in range(5)])
    assert all(e is None for e, _ in lost)  # acked by the leader alone
    cluster.kill_broker(old_leader)
    cluster.signal_broker(follower, signal.SIGCONT)
    wait_until(lambda: partition_state(cluster, "diverge", 0)["leader"] == follower, timeout=60,
               message="follower elected from the ISR")
    produce_all(producer(cluster, acks=1), "diverge", [f"new{i}".encode() for i in range(7)])
    cluster.start_broker(old_leader)
    wait_until(lambda: segment_bytes(cluster, old_leader, "diverge") == segment_bytes(cluster, follower, "diverge"),
               timeout=60, message="old leader truncated and caught up")
    values = [v for _, v in read_all(cluster, "diverge", expect=27)]
    assert values == [f"common{i}".encode() for i in range(20)] + [f"new{i}".encode() for i in range(7)]
    log = cluster.brokers[old_leader].config_path.parent / "state-change.log"
    wait_until(lambda: "Truncated partition diverge-0 to offset 20" in log.read_text(), message="state-change log")


@pytest.mark.parametrize("acks", ["1", "all"])
def test_leader_failover_mid_traffic_loses_no_acknowledged_record(cluster_factory, producer, acks: str) -> None:
    cluster = cluster_factory(3, overrides={"zookeeper.session.timeout.ms": "4000"})  # a dead leader noticed sooner
    controller, _ = controller_of(cluster)
    create_topic(cluster, "failover", 3, 3, {"min.insync.replicas": "2"})
    p = producer(cluster, acks=acks, **{"enable.idempotence": acks == "all"})
    acked: dict[bytes, tuple[int, int | None]] = {}
    victim = next(b for b in range(3) if b != controller)

    def report(err, msg):
        if err is None:
            acked[msg.value()] = (msg.partition(), msg.offset())

    for i in range(3000):
        p.produce("failover", value=f"m{i}".encode(), on_delivery=report)
        p.poll(0)
        if i == 1000:
            p.flush(30)
            cluster.kill_broker(victim)
    p.flush(120)
    if acks == "all":
        assert len(acked) == 3000  # the idempotent producer retried through the failover
    got = {}
    for part in range(3):
        for offset, value in read_all(cluster, "failover", part):
            got[value] = (part, offset)
    missing = [v for v in acked if v not in got]
    # librdkafka acknowledges a record with no offset (None) when a later batch's success
    # proves it was written (odradek.local.durability explains when): any offset in its partition will do.
    moved = [v for v, (part, offset) in acked.items()
             if v in got and got[v] != (part, offset) and not (offset is None and got[v][0] == part)]
    if acks == "all":
        assert missing == [] and moved == []
    else:
        # acks=1 may lose what only the dead leader had; nothing else.
        assert all(acked[v][0] in range(3) for v in missing)


def test_leader_paused_past_its_session_cannot_ack_writes_that_are_lost(cluster_factory, producer) -> None:
    """A leader whose ZooKeeper session expired while it was paused still thinks it leads when
    it resumes; an acks=-1 write it takes must not be acknowledged (its followers have moved
    to the new leader), and it steps down once the controller tells it."""
    cluster = cluster_factory(3, overrides={"min.insync.replicas": "2"})
    controller, _ = controller_of(cluster)
    leader, other = (x for x in range(3) if x != controller)
    create_topic(cluster, "fenced", assignment=[[leader, other, controller]])
    produce_all(producer(cluster, acks="all"), "fenced", [b"before"] * 5)
    cluster.signal_broker(leader, signal.SIGSTOP)
    try:
        wait_until(lambda: partition_state(cluster, "fenced", 0)["leader"] not in (leader, -1), timeout=40,
                   message="new leader while the old one is paused")
    finally:
        cluster.signal_broker(leader, signal.SIGCONT)

    async def produce_to_old_leader() -> int:
        conn = BrokerConnection("127.0.0.1", cluster.brokers[leader].port, "fencing-test")
        await conn.connect()
        try:
            batch = build_batch([SimpleRecord(value=b"ghost")])
            request = preq.ProduceRequest(
                transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
                topic_data=(preq.TopicProduceData(name="fenced", partition_data=(
                    preq.PartitionProduceData(index=0, records=batch),)),))
            response = await conn.send(request, presp.ProduceResponse, timeout_s=30)
            return response.responses[0].partition_responses[0].error_code
        finally:
            await conn.close()

    error = asyncio.run(produce_to_old_leader())
    assert error != ErrorCode.none
    produce_all(producer(cluster, acks="all"), "fenced", [b"after"] * 5)
    values = [v for _, v in read_all(cluster, "fenced", expect=10)]
    assert b"ghost" not in values
    assert values == [b"before"] * 5 + [b"after"] * 5
    wait_until(lambda: segment_bytes(cluster, leader, "fenced") == segment_bytes(cluster, other, "fenced"),
               timeout=60, message="old leader truncated and caught up as a follower")


def test_follower_backs_off_when_its_leader_does_not_know_the_partition(cluster_factory, tmp_path) -> None:
    """A follower whose leader answers OffsetForLeaderEpoch with UNKNOWN_TOPIC_OR_PARTITION (a
    leader that has not had its LeaderAndIsr yet) retries after replica.fetch.backoff.ms, not
    in a tight loop.  The follower is a replica manager in this process; the leader is a real
    broker that has never heard of the topic."""
    import logging

    from odradek.broker.metadata_cache import MetadataCache
    from odradek.broker.replica_manager import ReplicaManager
    from odradek.config import KafkaConfig
    from odradek.log.log_manager import LogManager, LogManagerConfig
    from odradek.protocol import control

    cluster = cluster_factory(1)
    leader_port = cluster.brokers[0].port
    attempts: list[float] = []
    wanted_attempts = 5

    class Count(logging.Handler):
        enough: asyncio.Event | None = None  # set once ``wanted_attempts`` were logged

        def emit(self, record: logging.LogRecord) -> None:
            if "OffsetForLeaderEpoch for" in record.getMessage() and "unknown_topic_or_partition" in record.getMessage():
                attempts.append(time.monotonic())
                if self.enough is not None and len(attempts) >= wanted_attempts:
                    self.enough.set()

    handler = Count()
    fetcher_log = logging.getLogger("odradek.broker.fetcher")
    fetcher_log.addHandler(handler)
    fetcher_log.setLevel(logging.INFO)
    backoff_ms = 400

    async def follow() -> None:
        handler.enough = asyncio.Event()
        config = KafkaConfig.from_props({
            "broker.id": "1", "zookeeper.connect": "unused:2181", "log.dirs": str(tmp_path / "follower"),
            "replica.fetch.backoff.ms": str(backoff_ms)})
        logs = LogManager(LogManagerConfig.from_kafka_config(config), config.log_config())
        logs.startup()
        rm = ReplicaManager(1, config, MetadataCache(1), logs, broker_epoch=lambda: -1)
        leader = control.UpdateMetadataBroker(id=0, rack=None, endpoints=(control.UpdateMetadataEndpoint(
            port=leader_port, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0),))
        rm.maybe_update_metadata_cache(1, control.UpdateMetadataRequest(
            controller_id=0, controller_epoch=1, broker_epoch=-1, topic_states=(), live_brokers=(leader,)))

        async def leader_and_isr(correlation_id: int, leader_id: int, epoch: int) -> None:
            state = control.LeaderAndIsrPartitionState(
                partition_index=0, controller_epoch=1, leader=leader_id, leader_epoch=epoch, isr=(1, 0),
                zk_version=epoch, replicas=(1, 0), is_new=False)
            response = await rm.become_leader_or_follower(correlation_id, control.LeaderAndIsrRequest(
                controller_id=0, controller_epoch=1, broker_epoch=-1, live_leaders=(), topic_states=(
                    control.LeaderAndIsrTopicState(topic_name="ghost", topic_id=None, partition_states=(state,)),)))
            assert response.error_code == ErrorCode.none

        # Leader at epoch 1 with one batch, so the log has an epoch to ask about ...
        await leader_and_isr(1, 1, 1)
        results, _ = rm.append_records(1, 1000, [("ghost", 0, build_batch([SimpleRecord(value=b"x")]))])
        assert all(r.error == ErrorCode.none for r in results.values())
        # ... then a follower of broker 0 at epoch 2: truncation asks broker 0, which has no such partition.
        await leader_and_isr(2, 0, 2)
        try:
            await asyncio.wait_for(handler.enough.wait(), 30)
        finally:
            await rm.shutdown()
            logs.shutdown()

    try:
        asyncio.run(follow())
    finally:
        fetcher_log.removeHandler(handler)
    assert len(attempts) >= wanted_attempts  # it does keep retrying ...
    window = attempts[-1] - attempts[0]
    # ... but at most once per backoff interval (plus the first); a tight loop makes its
    # attempts within milliseconds.
    assert len(attempts) <= window / (backoff_ms / 1000) + 2, (len(attempts), window)
