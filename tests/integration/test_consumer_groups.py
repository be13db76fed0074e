"""Consumer groups on real 3-broker clusters with real clients: confluent-kafka (librdkafka),
kafka-python, aiokafka and kcat join groups, split partitions, rebalance when members come
and go, commit and read back offsets, and resume from them; standalone consumers commit
with generation -1; the coordinator's broker is SIGKILLed and another one takes over from
the replicated __consumer_offsets without losing a commit."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from odradek.broker.group.hashing import partition_for_group
from odradek.local.cluster import LocalCluster
from odradek.net.client import BrokerConnection
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import build, request_module, response_module
from support import (
    ClusterFactory,
    create_topic,
    end_offsets,
    partition_state,
    run_odradek,
    wait_until,
    wait_until_async,
)

OFFSETS_PARTITIONS = 6
# Fast groups for tests: a short first-rebalance delay and sessions of a few seconds.
GROUP_OVERRIDES = {
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "group.initial.rebalance.delay.ms": "200",
    "group.min.session.timeout.ms": "1000",
}
FAST_MEMBER = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}


@pytest.fixture(scope="module")
def cluster(zookeeper: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("groups-cluster"))
    try:
        yield factory(3, overrides=GROUP_OVERRIDES)
    finally:
        factory.stop_all()


# ----------------------------------------------------------------------------- helpers


def produce(cluster: LocalCluster, topic: str, values: Sequence[str]) -> None:
    failures: list[Any] = []
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5}) as producer:
        for v in values:
            producer.produce(topic, key=v.encode(), value=v.encode(),
                             on_delivery=lambda err, _msg: failures.append(err) if err else None)
        assert producer.flush(30) == 0
    assert not failures


def group_consumer(cluster: LocalCluster, group: str, **extra: Any) -> Consumer:
    return Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **FAST_MEMBER, **extra})


def commit(consumer: Consumer) -> None:
    """A synchronous commit of what was consumed (nothing new to commit is fine)."""
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as e:
        if e.args[0].code() != KafkaError._NO_OFFSET:
            raise


def committed(consumer: Consumer, topic: str, partitions: int) -> dict[int, int]:
    return {tp.partition: tp.offset for tp in consumer.committed(
        [TopicPartition(topic, p) for p in range(partitions)], timeout=10)}


class Members:
    """Several confluent consumers polled in turn from this thread; every record any of
    them delivers is kept, by member."""

    def __init__(self, consumers: Sequence[Consumer]) -> None:
        self.consumers = list(consumers)
        self.records: list[list[tuple[int, int, str]]] = [[] for _ in self.consumers]

    def pump(self, seconds: float = 0.2) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for i, consumer in enumerate(self.consumers):
                msg = consumer.poll(0.02)
                if msg is None:
                    continue
                assert msg.error() is None, msg.error()
                self.records[i].append((msg.partition(), msg.offset(), msg.value().decode()))

    def until(self, condition: Callable[[], bool], message: str, timeout: float = 60) -> None:
        def step() -> bool:
            self.pump()
            return condition()
        wait_until(step, timeout=timeout, interval=0, message=message)

    def assignments(self) -> list[set[int]]:
        return [{tp.partition for tp in c.assignment()} for c in self.consumers]

    def balanced(self, sizes: list[int], partitions: int) -> bool:
        current = self.assignments()
        everything = set().union(*current)
        return sorted(len(a) for a in current) == sizes and everything == set(range(partitions)) and \
            sum(len(a) for a in current) == partitions

    def all_records(self) -> list[tuple[int, int, str]]:
        return [r for rs in self.records for r in rs]

    def close(self, index: int) -> None:
        self.consumers[index].close()
        del self.consumers[index]
        del self.records[index]


def assert_exactly(records: list[tuple[int, int, str]], expected_values: set[str]) -> None:
    keys = [(p, o) for p, o, _ in records]
    assert len(keys) == len(set(keys)), "a record was delivered twice"
    assert {v for _, _, v in records} == expected_values
    assert len(records) == len(expected_values)


# ----------------------------------------------------------------------------- confluent-kafka


def test_confluent_group_splits_rebalances_commits_and_resumes(cluster: LocalCluster) -> None:
    topic, partitions = "group-orders", 6
    create_topic(cluster, topic, partitions)
    members = Members([group_consumer(cluster, "orders-app") for _ in range(3)])
    try:
        for c in members.consumers:
            c.subscribe([topic])
        # (Records produced before the group settles could be read twice: a partition that
        # moves before a commit is read again from the start, as in Kafka.)
        members.until(lambda: members.balanced([2, 2, 2], partitions), "three members with two partitions each")
        first = [f"a{i}" for i in range(600)]
        produce(cluster, topic, first)
        members.until(lambda: len(members.all_records()) >= len(first), "all records consumed")
        assert_exactly(members.all_records(), set(first))
        # Each member read only its own partitions.
        for owned, records in zip(members.assignments(), members.records, strict=True):
            assert {p for p, _, _ in records} <= owned
        for c in members.consumers:
            commit(c)
        ends = end_offsets(cluster.bootstrap_servers, topic, partitions)
        assert committed(members.consumers[0], topic, partitions) == ends

        # A member leaves: the other two take over its partitions and carry on from the
        # committed offsets, re-reading nothing.
        members.close(0)
        members.records = [[] for _ in members.consumers]
        members.until(lambda: members.balanced([3, 3], partitions), "two members with three partitions each")
        second = [f"b{i}" for i in range(300)]
        produce(cluster, topic, second)
        members.until(lambda: len(members.all_records()) >= len(second), "the new records consumed")
        members.pump(0.5)
        assert_exactly(members.all_records(), set(second))
        for c in members.consumers:
            commit(c)
        assert committed(members.consumers[0], topic, partitions) == end_offsets(cluster.bootstrap_servers, topic, partitions)
    finally:
        for c in members.consumers:
            c.close()

    # A consumer starting later in the same group resumes where the group left off.
    third = [f"c{i}" for i in range(60)]
    produce(cluster, topic, third)
    again = Members([group_consumer(cluster, "orders-app")])
    try:
        again.consumers[0].subscribe([topic])
        again.until(lambda: len(again.all_records()) >= len(third), "records after the restart")
        again.pump(0.5)
        assert_exactly(again.all_records(), set(third))
    finally:
        again.consumers[0].close()


def test_consumer_offsets_is_created_compacted_and_described_so(cluster: LocalCluster) -> None:
    topic = "offsets-described"
    create_topic(cluster, topic, 1, 3)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "describes-offsets",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        consumer.close()
    for backend in ("--bootstrap-server", "--zookeeper"):
        where = cluster.bootstrap_servers if backend == "--bootstrap-server" else cluster.zookeeper_connect
        result = run_odradek("topics", backend, where, "--describe", "--topic", "__consumer_offsets")
        assert result.returncode == 0, result.stderr
        first = result.stdout.splitlines()[0]
        assert first.startswith(f"Topic:__consumer_offsets\tPartitionCount:{OFFSETS_PARTITIONS}\t"), first
        assert "cleanup.policy=compact" in first.partition("Configs:")[2].split(","), first


def test_confluent_standalone_consumer_commits_with_generation_minus_one(cluster: LocalCluster) -> None:
    topic = "group-standalone"
    create_topic(cluster, topic, 2)
    produce(cluster, topic, [f"s{i}" for i in range(40)])
    consumer = group_consumer(cluster, "standalone-app")
    try:
        consumer.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 40 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen += 1
        assert seen == 40
        consumer.commit(asynchronous=False)
        expected = end_offsets(cluster.bootstrap_servers, topic, 2)
    finally:
        consumer.close()
    other = group_consumer(cluster, "standalone-app")
    try:
        assert committed(other, topic, 2) == expected
        # Explicit offsets (with metadata), again without joining the group.
        other.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
        assert committed(other, topic, 2) == {0: 3, 1: expected[1]}
    finally:
        other.close()


def test_confluent_admin_lists_describes_and_deletes_groups(cluster: LocalCluster) -> None:
    topic = "group-admin"
    create_topic(cluster, topic, 3)
    produce(cluster, topic, [f"x{i}" for i in range(30)])
    with AdminClient({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        _list_describe_and_delete_a_group(admin, cluster, topic)


def _list_describe_and_delete_a_group(admin: AdminClient, cluster: LocalCluster, topic: str) -> None:
    members = Members([group_consumer(cluster, "admin-app", **{"client.id": "admin-app-client"})])
    try:
        members.consumers[0].subscribe([topic])
        members.until(lambda: len(members.all_records()) >= 30, "records consumed")
        members.consumers[0].commit(asynchronous=False)
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(30).valid}
        assert "admin-app" in listed
        assert str(listed["admin-app"].state).endswith("STABLE")
        (described,) = admin.describe_consumer_groups(["admin-app"]).values()
        description = described.result(30)
        assert str(description.state).endswith("STABLE")
        assert description.partition_assignor == "range"
        (member,) = description.members
        assert member.client_id == "admin-app-client"
        assert {tp.partition for tp in member.assignment.topic_partitions} == {0, 1, 2}
        # A group with members cannot be deleted.
        with pytest.raises(KafkaException, match="NON_EMPTY_GROUP"):
            admin.delete_consumer_groups(["admin-app"])["admin-app"].result(30)
    finally:
        members.consumers[0].close()
    wait_until(lambda: str({g.group_id: g for g in admin.list_consumer_groups().result(30).valid}
                           ["admin-app"].state).endswith("EMPTY"), message="the group empty")
    admin.delete_consumer_groups(["admin-app"])["admin-app"].result(30)
    assert "admin-app" not in {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    with pytest.raises(KafkaException, match="GROUP_ID_NOT_FOUND"):
        admin.delete_consumer_groups(["admin-app"])["admin-app"].result(30)
    check = group_consumer(cluster, "admin-app")
    try:
        assert set(committed(check, topic, 3).values()) == {-1001}  # the offsets went with the group
    finally:
        check.close()


def test_confluent_static_member_restarts_without_a_rebalance(cluster: LocalCluster) -> None:
    topic, group = "group-static", "static-app"
    create_topic(cluster, topic, 2)
    revoked: list[list[int]] = []
    a = group_consumer(cluster, group, **{"group.instance.id": "instance-a"})
    b = group_consumer(cluster, group, **{"group.instance.id": "instance-b"})
    members = Members([a, b])
    try:
        a.subscribe([topic])
        b.subscribe([topic], on_revoke=lambda _c, parts: revoked.append([p.partition for p in parts]))
        members.until(lambda: members.balanced([1, 1], 2), "one partition each")
        a_partitions = members.assignments()[0]
        revoked.clear()
        # A static member leaves without LeaveGroup; its instance id comes back under a new
        # member id within the session timeout and gets its old assignment, no rebalance.
        members.close(0)
        restarted = group_consumer(cluster, group, **{"group.instance.id": "instance-a"})
        restarted.subscribe([topic])
        members.consumers.insert(0, restarted)
        members.records.insert(0, [])
        members.until(lambda: members.assignments()[0] == a_partitions, "the restarted member's assignment")
        members.pump(1.0)
        assert revoked == []  # the other member never gave up its partition
        with AdminClient({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            description = admin.describe_consumer_groups([group])[group].result(30)
        assert sorted(m.group_instance_id for m in description.members) == ["instance-a", "instance-b"]
    finally:
        for c in members.consumers:
            c.close()


# ----------------------------------------------------------------------------- every version on the wire

FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST, COMMIT, FETCH, DELETE, OFFSET_DELETE = (
    10, 11, 12, 13, 14, 15, 16, 8, 9, 42, 47)


class Wire:
    """Requests of any version, built from kio's schemas and sent on one connection."""

    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn

    async def call(self, api_key: int, version: int, cls: str, /, **fields: Any) -> Any:
        request = build(getattr(request_module(api_key, version), cls + "Request"), **fields)
        return await self.conn.send(request, getattr(response_module(api_key, version), cls + "Response"))

    @staticmethod
    def nested(api_key: int, version: int, cls: str, /, **fields: Any) -> Any:
        return build(getattr(request_module(api_key, version), cls), **fields)


async def _find_coordinator(cluster: LocalCluster, group: str, version: int) -> tuple[str, int]:
    conn = BrokerConnection("127.0.0.1", cluster.brokers[0].port, "wire-test")
    await conn.connect()
    try:
        wire = Wire(conn)

        async def found() -> Any:
            r = await wire.call(FIND_COORDINATOR, version, "FindCoordinator", key=group, key_type=0,
                                coordinator_keys=(group,))
            answer = r.coordinators[0] if version >= 4 else r
            assert answer.error_code in (ErrorCode.none, ErrorCode.coordinator_not_available), answer
            return answer if answer.error_code == ErrorCode.none else None

        # Polled at a client's retry backoff while the coordinator loads the group.
        answer = await wait_until_async(found, timeout=60, interval=0.5, message=f"a coordinator for {group}")
        return answer.host, answer.port
    finally:
        await conn.close()


def test_every_api_version_on_the_wire(cluster: LocalCluster) -> None:
    """Each group API at each advertised version, through one group's life (join, sync,
    heartbeat, commit, fetch, describe, list, leave, delete offsets, delete)."""
    topic = "group-wire"
    create_topic(cluster, topic, 2)
    none = ErrorCode.none

    async def life(v: int) -> None:
        group = f"wire-{v}"
        host, port = await _find_coordinator(cluster, group, min(v, 4))
        conn = BrokerConnection(host, port, "wire-test")
        await conn.connect()
        w = Wire(conn)
        try:
            protocols = (w.nested(JOIN, v, "JoinGroupRequestProtocol", name="range", metadata=b"meta"),)
            join = {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000,
                    "group_instance_id": None, "protocol_type": "consumer", "protocols": protocols, "reason": None}
            r = await w.call(JOIN, v, "JoinGroup", member_id="", **join)
            if v >= 4:
                assert r.error_code == ErrorCode.member_id_required
                r = await w.call(JOIN, v, "JoinGroup", member_id=r.member_id, **join)
            assert (r.error_code, r.generation_id, r.protocol_name, r.leader) == (none, 1, "range", r.member_id)
            assert [(m.member_id, m.metadata) for m in r.members] == [(r.member_id, b"meta")]
            member, generation = r.member_id, r.generation_id
            ids = {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": None}

            sv = min(v, 5)
            assignment = (w.nested(SYNC, sv, "SyncGroupRequestAssignment", member_id=member, assignment=b"mine"),)
            r = await w.call(SYNC, sv, "SyncGroup", protocol_type="consumer", protocol_name="range",
                             assignments=assignment, **ids)
            assert (r.error_code, r.assignment) == (none, b"mine")
            r = await w.call(HEARTBEAT, min(v, 4), "Heartbeat", **ids)
            assert r.error_code == none

            cv = 2 + v % 7  # OffsetCommit v2..v8
            parts = tuple(w.nested(COMMIT, cv, "OffsetCommitRequestPartition", partition_index=p, committed_offset=7,
                                   committed_leader_epoch=-1, committed_metadata="md") for p in (0, 1))
            r = await w.call(COMMIT, cv, "OffsetCommit", group_id=group, generation_id_or_member_epoch=generation,
                             member_id=member, group_instance_id=None, retention_time=-1, topics=(
                                 w.nested(COMMIT, cv, "OffsetCommitRequestTopic", name=topic, partitions=parts),))
            assert [p.error_code for t in r.topics for p in t.partitions] == [none, none]

            fv = 1 + v % 8  # OffsetFetch v1..v8
            if fv >= 8:
                r = await w.call(FETCH, fv, "OffsetFetch", require_stable=True, groups=(
                    w.nested(FETCH, fv, "OffsetFetchRequestGroup", group_id=group, topics=(
                        w.nested(FETCH, fv, "OffsetFetchRequestTopics", name=topic, partition_indexes=(0,)),)),))
                (g,) = r.groups
                assert g.error_code == none
                fetched = [(p.committed_offset, p.metadata) for t in g.topics for p in t.partitions]
            else:
                r = await w.call(FETCH, fv, "OffsetFetch", group_id=group, require_stable=True, topics=(
                    w.nested(FETCH, fv, "OffsetFetchRequestTopic", name=topic, partition_indexes=(0,)),))
                fetched = [(p.committed_offset, p.metadata) for t in r.topics for p in t.partitions]
            assert fetched == [(7, "md")]

            r = await w.call(DESCRIBE, min(v, 5), "DescribeGroups", groups=(group,),
                             include_authorized_operations=True)
            (d,) = r.groups
            assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (
                none, "Stable", "consumer", "range")
            assert [(m.member_id, m.client_id, m.member_assignment) for m in d.members] == [
                (member, "wire-test", b"mine")]
            r = await w.call(LIST, min(v, 5), "ListGroups", states_filter=(), types_filter=())
            assert r.error_code == none and group in {g.group_id for g in r.groups}

            if v < 3:
                r = await w.call(LEAVE, v, "LeaveGroup", group_id=group, member_id=member)
            else:
                r = await w.call(LEAVE, min(v, 5), "LeaveGroup", group_id=group, members=(
                    w.nested(LEAVE, min(v, 5), "MemberIdentity", member_id=member, group_instance_id=None,
                             reason="done"),))
                assert [m.error_code for m in r.members] == [none]
            assert r.error_code == none

            r = await w.call(OFFSET_DELETE, 0, "OffsetDelete", group_id=group, topics=(
                w.nested(OFFSET_DELETE, 0, "OffsetDeleteRequestTopic", name=topic, partitions=(
                    w.nested(OFFSET_DELETE, 0, "OffsetDeleteRequestPartition", partition_index=0),)),))
            assert r.error_code == none and [p.error_code for t in r.topics for p in t.partitions] == [none]
            # (An empty group dies with its last offset: partition 1's commit keeps it.)
            r = await w.call(DELETE, min(v, 2), "DeleteGroups", groups_names=(group,))
            assert [(x.group_id, x.error_code) for x in r.results] == [(group, none)]
            r = await w.call(DELETE, min(v, 2), "DeleteGroups", groups_names=(group,))
            assert [(x.group_id, x.error_code) for x in r.results] == [(group, ErrorCode.group_id_not_found)]
        finally:
            await conn.close()

    async def all_versions() -> None:
        for v in range(10):
            await life(v)

    asyncio.run(all_versions())


# ----------------------------------------------------------------------------- other clients


def test_kafka_python_group_consumer_subscribes_commits_and_resumes(cluster: LocalCluster) -> None:
    topic = "group-kafka-python"
    create_topic(cluster, topic, 3)
    first = {f"k{i}" for i in range(90)}
    produce(cluster, topic, sorted(first))

    def consume(expected: int) -> tuple[set[str], dict[int, int]]:
        consumer = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers, group_id="kafka-python-app",
                                 auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                                 heartbeat_interval_ms=500)
        try:
            values: list[str] = []
            deadline = time.monotonic() + 60
            while len(values) < expected and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    values.extend(r.value.decode() for r in records)
            consumer.poll(timeout_ms=500)
            consumer.commit()
            return set(values), {p: consumer.committed(KpTopicPartition(topic, p)) for p in range(3)}
        finally:
            consumer.close()

    values, offsets = consume(len(first))
    assert values == first
    assert offsets == end_offsets(cluster.bootstrap_servers, topic, 3)
    second = {f"l{i}" for i in range(30)}
    produce(cluster, topic, sorted(second))
    values, offsets = consume(len(second))
    assert values == second
    assert offsets == end_offsets(cluster.bootstrap_servers, topic, 3)


def test_kafka_python_standalone_commit(cluster: LocalCluster) -> None:
    topic = "group-kafka-python-solo"
    create_topic(cluster, topic, 1)
    produce(cluster, topic, [f"m{i}" for i in range(10)])
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="kafka-python-solo",
                             enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        tp = KpTopicPartition(topic, 0)
        consumer.assign([tp])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 10 and time.monotonic() < deadline:
            seen += sum(len(rs) for rs in consumer.poll(timeout_ms=500).values())
        consumer.commit()
        assert consumer.committed(tp) == 10
    finally:
        consumer.close()


def test_aiokafka_group_consumer_subscribes_and_commits(cluster: LocalCluster) -> None:
    topic = "group-aiokafka"
    create_topic(cluster, topic, 3)
    expected = {f"q{i}" for i in range(60)}
    produce(cluster, topic, sorted(expected))

    async def consume() -> tuple[set[str], dict[int, int | None]]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers, group_id="aiokafka-app",
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=6000, heartbeat_interval_ms=500)
        await consumer.start()
        try:
            values: set[str] = set()
            deadline = time.monotonic() + 60
            while len(values) < len(expected) and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    values.update(r.value.decode() for r in records)
            await consumer.commit()
            return values, {p: await consumer.committed(AioTopicPartition(topic, p)) for p in range(3)}
        finally:
            await consumer.stop()

    values, offsets = asyncio.run(consume())
    assert values == expected
    assert offsets == end_offsets(cluster.bootstrap_servers, topic, 3)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_balanced_consumer(cluster: LocalCluster) -> None:
    topic = "group-kcat"
    create_topic(cluster, topic, 3)
    produce(cluster, topic, [f"r{i}" for i in range(45)])
    result = subprocess.run(
        ["kcat", "-b", cluster.bootstrap_servers, "-G", "kcat-app", topic, "-c", "45", "-q", "-f", "%p %o %s\\n",
         "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000"],
        capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split()
    assert {v for v in lines if v.startswith("r")} == {f"r{i}" for i in range(45)}
    # kcat commits (auto commit) when it closes the consumer.
    check = group_consumer(cluster, "kcat-app")
    try:
        wait_until(lambda: committed(check, topic, 3) == end_offsets(cluster.bootstrap_servers, topic, 3), timeout=30,
                   message="kcat's commits")
    finally:
        check.close()


# ----------------------------------------------------------------------------- failover


def test_coordinator_failover_keeps_every_commit(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3, overrides=GROUP_OVERRIDES)
    topic, partitions, group = "group-failover", 3, "survivor"
    create_topic(cluster, topic, partitions)
    produce(cluster, topic, [f"f{i}" for i in range(300)])

    # A session that outlasts the failover (ZooKeeper's 6 s to notice the death, then the
    # election): the member stays in the group rather than timing out and rejoining.
    members = Members([group_consumer(cluster, group, **{"session.timeout.ms": 30000})])
    consumer = members.consumers[0]
    try:
        consumer.subscribe([topic])
        members.until(lambda: len(members.all_records()) >= 150, "half the records")
        consumer.commit(asynchronous=False)
        before = committed(consumer, topic, partitions)
        # A partition not fetched yet has no position, so nothing committed (-1001)
        assert sum(offset for offset in before.values() if offset >= 0) >= 150

        offsets_partition = partition_for_group(group, OFFSETS_PARTITIONS)
        state = partition_state(cluster, "__consumer_offsets", offsets_partition)
        assert state is not None and len(state["isr"]) == 3
        victim = state["leader"]
        cluster.kill_broker(victim)

        def new_coordinator() -> bool:
            s = partition_state(cluster, "__consumer_offsets", offsets_partition)
            return s is not None and s["leader"] not in (victim, -1)

        members.until(new_coordinator, "a new leader for the group's __consumer_offsets partition")

        def commits_survived() -> bool:
            try:
                return committed(consumer, topic, partitions) == before
            except KafkaException:
                return False  # the client is still finding the new coordinator

        members.until(commits_survived, "the committed offsets from the new coordinator")
        # The new coordinator loaded the group itself, not just its offsets: the member is
        # still there, in a stable group.
        with AdminClient({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            description = admin.describe_consumer_groups([group])[group].result(30)
        assert description.coordinator.id not in (victim, -1)
        assert str(description.state).endswith("STABLE")
        assert [m.member_id for m in description.members] == [consumer.memberid()]
        # The member carries on in its generation: it reads the rest and commits again.
        members.until(lambda: len({(p, o) for p, o, _ in members.all_records()}) >= 300, "the rest of the records")
        assert {v for _, _, v in members.all_records()} == {f"f{i}" for i in range(300)}
        members.until(lambda: _commit_ok(consumer), "a commit to the new coordinator")
        after = committed(consumer, topic, partitions)
        assert after == end_offsets(cluster.bootstrap_servers, topic, partitions)
    finally:
        consumer.close()

    # A new member of the group starts from those commits.
    produce(cluster, topic, [f"g{i}" for i in range(30)])
    again = Members([group_consumer(cluster, group)])
    try:
        again.consumers[0].subscribe([topic])
        again.until(lambda: len(again.all_records()) >= 30, "records after the failover")
        again.pump(0.5)
        assert_exactly(again.all_records(), {f"g{i}" for i in range(30)})
    finally:
        again.consumers[0].close()


def _commit_ok(consumer: Consumer) -> bool:
    try:
        commit(consumer)
    except KafkaException:
        return False
    return True
