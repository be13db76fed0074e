"""Log directories on a real cluster whose brokers have two each: kafka-python's admin client
describes them and moves a replica between them while a producer writes to it (nothing
lost), its errors (LOG_DIR_NOT_FOUND, unknown topic, a broker without the replica), and
``odradek log-dirs`` printing exactly what Kafka 2.8's own kafka-log-dirs.sh prints about the
same cluster; a move held to ``replica.alter.log.dirs.io.max.bytes.per.second``."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import TopicPartitionReplica
from kafka.admin import KafkaAdminClient
from kafka.errors import (
    LogDirNotFoundError,
    NoError,
    ReplicaNotAvailableError,
    UnknownTopicOrPartitionError,
)

from odradek.admin.log_dirs import LogDirsAdmin
from odradek.admin.log_dirs import TopicPartitionReplica as LogDirsTopicPartitionReplica
from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.protocol.errors import ErrorCode
from support import (
    ClusterFactory,
    JbodCluster,
    consume_all,
    create_topic,
    partition_state,
    produce,
    run_kafka_tool,
    run_odradek,
    wait_until,
    zk_json,
)

IDEMPOTENT = {"enable.idempotence": "true", "batch.size": "16384"}  # batches below segment.bytes


@pytest.fixture(scope="module")
def cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JbodCluster]:
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("jbod"))
    try:
        yield factory(3, cluster_class=JbodCluster)  # type: ignore[misc]
    finally:
        factory.stop_all()


@pytest.fixture(scope="module")
def spread(cluster: JbodCluster) -> str:
    """A topic with a replica of each of its 4 partitions on every broker, and some records."""
    create_topic(cluster, "spread", 4, 3)
    produce(cluster.bootstrap_servers, "spread", [(p, None, b"x" * 100) for p in range(4)])
    return "spread"


@pytest.fixture
def admin(cluster: LocalCluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        yield client
    finally:
        client.close()


def replica_dirs(admin: KafkaAdminClient, broker: int, topic: str) -> dict[int, tuple[str, bool]]:
    """Where ``broker`` keeps each partition of ``topic``: (log dir, is a future replica)."""
    (answer,) = admin.describe_log_dirs(brokers=[broker])
    return {p["partition_index"]: (d["log_dir"], p["is_future_key"])
            for d in answer["log_dirs"] for t in d["topics"] if t["name"] == topic for p in t["partitions"]}


def test_each_broker_spreads_its_partitions_over_its_dirs(cluster: JbodCluster, admin: KafkaAdminClient,
                                                          spread: str) -> None:
    for broker in cluster.brokers:
        (answer,) = admin.describe_log_dirs(brokers=[broker])
        dirs = {d["log_dir"]: d for d in answer["log_dirs"]}
        assert list(dirs) == [str(d) for d in cluster.log_dirs(broker)]
        assert all(d["error_code"] == 0 and 0 < d["usable_bytes"] <= d["total_bytes"] for d in dirs.values())
        counts = [sum(len(t["partitions"]) for t in d["topics"] if t["name"] == spread) for d in dirs.values()]
        assert counts == [2, 2]  # the directory with the fewest partitions gets the next one


def test_a_replica_moves_between_dirs_while_a_producer_writes(cluster: JbodCluster, admin: KafkaAdminClient) -> None:
    create_topic(cluster, "moving", 1, 3, {"segment.bytes": "50000"})
    before = [b"before-%05d" % i for i in range(3000)]
    produce(cluster.bootstrap_servers, "moving", [(0, None, v) for v in before], **IDEMPOTENT)
    broker = 1
    source, _ = replica_dirs(admin, broker, "moving")[0]
    target = next(str(d) for d in cluster.log_dirs(broker) if str(d) != source)
    during: list[bytes] = []  # acknowledged (produce() fails the test otherwise)
    stop = threading.Event()

    def write() -> None:
        while not stop.is_set():
            batch = [b"during-%05d" % n for n in range(len(during), len(during) + 200)]
            produce(cluster.bootstrap_servers, "moving", [(0, None, v) for v in batch], **IDEMPOTENT)
            during.extend(batch)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        replica = TopicPartitionReplica("moving", 0, broker)
        assert admin.alter_replica_log_dirs({replica: target}) == {replica: NoError}
        wait_until(lambda: replica_dirs(admin, broker, "moving") == {0: (target, False)}, timeout=60,
                   message="the replica in its new directory")
    finally:
        stop.set()
        writer.join()
    assert not any(p.name.startswith("moving-0") and not p.name.endswith("-delete") for p in Path(source).iterdir())
    assert during, "nothing was written during the move"
    values = [m.value() for m in consume_all(cluster.bootstrap_servers, "moving", 1, len(before) + len(during))]
    assert values == before + during
    wait_until(lambda: broker in (partition_state(cluster, "moving", 0) or {}).get("isr", ()),
               message="the moved replica in the ISR")


def test_the_admin_layer_moves_a_replica(cluster: JbodCluster) -> None:
    """What the reassignment tool's ``log_dirs`` will use: LogDirsAdmin.alter_replica_log_dirs."""
    create_topic(cluster, "admin-moved", 1, 2, assignment=[[2, 1]])
    produce(cluster.bootstrap_servers, "admin-moved", [(0, None, b"r%d" % i) for i in range(100)])
    admin = LogDirsAdmin(cluster.bootstrap_servers)

    def where() -> str:
        (dirs,) = asyncio.run(admin.describe_log_dirs([2])).values()
        return next(d.path for d in dirs for r in d.replicas if r.topic_partition == ("admin-moved", 0))

    target = next(str(d) for d in cluster.log_dirs(2) if str(d) != where())
    replica = LogDirsTopicPartitionReplica("admin-moved", 0, 2)
    missing = LogDirsTopicPartitionReplica("admin-moved", 0, 7)
    assert asyncio.run(admin.alter_replica_log_dirs({replica: target, missing: target})) == {
        replica: ErrorCode.none, missing: ErrorCode.broker_not_available}
    wait_until(lambda: where() == target, timeout=60, message="the replica in its new directory")
    assert [m.value() for m in consume_all(cluster.bootstrap_servers, "admin-moved", 1, 100)] == \
        [b"r%d" % i for i in range(100)]


LOG_DIR_RATE = 50_000  # bytes/s
# The rate is measured over up to 11 one-second windows: a broker that moved a replica in the
# last 11 s (another test's) lets a new move start with a burst of up to 11 windows' worth.
LOG_DIR_BURST = 11 * LOG_DIR_RATE


def _set_log_dir_rate(cluster: JbodCluster, broker: int, rate: int | None) -> None:
    change = ["--add-config", f"replica.alter.log.dirs.io.max.bytes.per.second={rate}"] if rate is not None \
        else ["--delete-config", "replica.alter.log.dirs.io.max.bytes.per.second"]
    done = run_odradek("configs", "--bootstrap-server", cluster.bootstrap_servers, "--entity-type", "brokers",
                       "--entity-name", str(broker), "--alter", *change)
    assert done.returncode == 0, done.stderr


def test_a_move_between_dirs_stays_under_the_log_dir_throttle(cluster: JbodCluster, admin: KafkaAdminClient) -> None:
    """replica.alter.log.dirs.io.max.bytes.per.second (the reassignment tool's
    --replica-alter-log-dirs-throttle) bounds the copy into the -future log: measured on the
    future replica's size, which DescribeLogDirs reports while it grows; without it the move
    back is not held."""
    create_topic(cluster, "log-dir-throttled", 1, 1, {"segment.bytes": "200000"}, assignment=[[2]])
    values = [b"%06d" % i + b"x" * 994 for i in range(900)]  # about 910 kB with batch overhead
    produce(cluster.bootstrap_servers, "log-dir-throttled", [(0, None, v) for v in values], **IDEMPOTENT)
    (answer,) = admin.describe_log_dirs(brokers=[2])
    size = next(p["partition_size"] for d in answer["log_dirs"] for t in d["topics"]
                if t["name"] == "log-dir-throttled" for p in t["partitions"])
    source, _ = replica_dirs(admin, 2, "log-dir-throttled")[0]
    target = next(str(d) for d in cluster.log_dirs(2) if str(d) != source)
    replica = TopicPartitionReplica("log-dir-throttled", 0, 2)
    _set_log_dir_rate(cluster, 2, LOG_DIR_RATE)
    try:
        samples: list[tuple[float, int]] = []  # (time, future replica's size)

        def moved() -> bool:
            (answer,) = admin.describe_log_dirs(brokers=[2])
            parts = [(d["log_dir"], p) for d in answer["log_dirs"] for t in d["topics"]
                     if t["name"] == "log-dir-throttled" for p in t["partitions"]]
            future = [p["partition_size"] for _, p in parts if p["is_future_key"]]
            if future:
                samples.append((time.monotonic(), future[0]))
            return [(where, p["is_future_key"]) for where, p in parts] == [(target, False)]

        started = time.monotonic()
        assert admin.alter_replica_log_dirs({replica: target}) == {replica: NoError}
        wait_until(moved, timeout=60, interval=0.2, message="the replica in its new directory")
        took = time.monotonic() - started
    finally:
        _set_log_dir_rate(cluster, 2, None)
    # A burst may go at once (see LOG_DIR_BURST); the rest at the rate.
    assert took >= 0.9 * (size - LOG_DIR_BURST) / LOG_DIR_RATE, (took, size)
    later = [(t, n) for t, n in samples if t >= samples[0][0] + 1.0]
    assert len(later) >= 2, samples
    rate = (later[-1][1] - later[0][1]) / (later[-1][0] - later[0][0])
    assert rate <= 1.1 * LOG_DIR_RATE, (rate, samples)
    print(f"log-dir move of {size} B: {took:.1f} s, {rate:.0f} B/s against a limit of {LOG_DIR_RATE} B/s")
    assert [m.value() for m in consume_all(cluster.bootstrap_servers, "log-dir-throttled", 1, len(values))] == values
    # Without the throttle the move back takes a fraction of that.
    back = time.monotonic()
    assert admin.alter_replica_log_dirs({replica: source}) == {replica: NoError}
    wait_until(lambda: replica_dirs(admin, 2, "log-dir-throttled") == {0: (source, False)}, timeout=60,
               message="the replica back in its first directory")
    assert time.monotonic() - back < took / 2, (time.monotonic() - back, took)


REASSIGN = "kafka.admin.ReassignPartitionsCommand"


def _dir_plan(path: Path, topic: str, replicas: list[int], log_dirs: list[str]) -> str:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas, "log_dirs": log_dirs}]}))
    return str(path)


def test_reassign_partitions_moves_a_replica_between_dirs_as_kafkas_tool(
        cluster: JbodCluster, admin: KafkaAdminClient, tmp_path: Path) -> None:
    """``log_dirs`` in the reassignment file: ``odradek reassign-partitions`` moves broker 0's
    replica to the named directory (AlterReplicaLogDirs, its throttle set on that broker only),
    ``--verify`` reports the move and clears the throttle; Kafka 2.8's own tool moves it back on
    the same cluster, and both tools print the same lines."""
    topic = "dir-moves"
    create_topic(cluster, topic, 1, 2, assignment=[[0, 1]])
    produce(cluster.bootstrap_servers, topic, [(0, None, b"m%d" % i) for i in range(200)])
    source, _ = replica_dirs(admin, 0, topic)[0]
    target = next(str(d) for d in cluster.log_dirs(0) if str(d) != source)
    bootstrap = ["--bootstrap-server", cluster.bootstrap_servers]
    there = _dir_plan(tmp_path / "there.json", topic, [0, 1], [target, "any"])
    back = _dir_plan(tmp_path / "back.json", topic, [0, 1], [source, "any"])

    ours = run_odradek("reassign-partitions", *bootstrap, "--execute", "--reassignment-json-file", there,
                       "--replica-alter-log-dirs-throttle", "10000000")
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines()[-3:] == [
        "The replica-alter-dir throttle limit was set to 10000000 B/s",
        f"Successfully started partition reassignment for {topic}-0",
        f"Successfully started log directory move for: {topic}-0-0"], ours.stdout
    rates = {b: zk_json(cluster, f"/config/brokers/{b}") or {} for b in cluster.brokers}
    assert [b for b, c in rates.items() if "replica.alter.log.dirs.io.max.bytes.per.second" in c.get("config", {})] \
        == [0]
    wait_until(lambda: replica_dirs(admin, 0, topic) == {0: (target, False)}, timeout=60,
               message="broker 0's replica in its new directory")
    verified = run_odradek("reassign-partitions", *bootstrap, "--verify", "--reassignment-json-file", there)
    assert verified.returncode == 0, verified.stderr
    assert f"Reassignment of replica {topic}-0-0 completed successfully." in verified.stdout.splitlines()
    wait_until(lambda: "replica.alter.log.dirs.io.max.bytes.per.second" not in
               (zk_json(cluster, "/config/brokers/0") or {}).get("config", {}), message="the throttle cleared")

    kafka = run_kafka_tool("kafka-2.8", REASSIGN, *bootstrap, "--execute", "--reassignment-json-file", back)
    assert kafka.returncode == 0, kafka.stdout + kafka.stderr
    assert kafka.stdout.splitlines()[-1] == f"Successfully started log directory move for: {topic}-0-0"
    wait_until(lambda: replica_dirs(admin, 0, topic) == {0: (source, False)}, timeout=60,
               message="broker 0's replica back, moved by Kafka's tool")
    kafka_verify = run_kafka_tool("kafka-2.8", REASSIGN, *bootstrap, "--verify", "--reassignment-json-file", back)
    ours_verify = run_odradek("reassign-partitions", *bootstrap, "--verify", "--reassignment-json-file", back)
    assert ours_verify.stdout == kafka_verify.stdout, (ours_verify.stdout, kafka_verify.stdout)
    # Verifying the first file now: the replica is not where that file wants it.
    kafka_verify = run_kafka_tool("kafka-2.8", REASSIGN, *bootstrap, "--verify", "--reassignment-json-file", there)
    ours_verify = run_odradek("reassign-partitions", *bootstrap, "--verify", "--reassignment-json-file", there)
    assert ours_verify.stdout == kafka_verify.stdout, (ours_verify.stdout, kafka_verify.stdout)
    assert f"Partition {topic}-0 on broker 0 is not being moved from log dir {source} to {target}." \
        in ours_verify.stdout.splitlines()
    assert [m.value() for m in consume_all(cluster.bootstrap_servers, topic, 1, 200)] == [b"m%d" % i for i in range(200)]


def test_a_move_to_a_dir_the_broker_lacks_fails_the_execute(cluster: JbodCluster, tmp_path: Path) -> None:
    create_topic(cluster, "dir-missing", 1, 1, assignment=[[1]])
    plan = _dir_plan(tmp_path / "p.json", "dir-missing", [1], ["/no/such/dir"])
    done = run_odradek("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers, "--execute",
                       "--reassignment-json-file", plan)
    assert done.returncode != 0
    assert "Failed to alter dir for dir-missing-0-1" in done.stdout + done.stderr


def test_alter_replica_log_dirs_errors(cluster: JbodCluster, admin: KafkaAdminClient) -> None:
    create_topic(cluster, "placed", 1, replication_factor=1, assignment=[[0]])
    on_0 = TopicPartitionReplica("placed", 0, 0)
    not_on_1 = TopicPartitionReplica("placed", 0, 1)
    unknown = TopicPartitionReplica("no-such-topic", 0, 0)
    assert admin.alter_replica_log_dirs({on_0: "/not/a/configured/dir"}) == {on_0: LogDirNotFoundError}
    answers = admin.alter_replica_log_dirs({unknown: str(cluster.log_dirs(0)[1]),
                                            not_on_1: str(cluster.log_dirs(1)[1])})
    assert answers == {unknown: UnknownTopicOrPartitionError, not_on_1: ReplicaNotAvailableError}


@pytest.mark.parametrize("args", [(), ("--topic-list", "spread,placed"), ("--broker-list", "2,0")],
                         ids=["all", "topic-list", "broker-list"])
def test_odradek_log_dirs_prints_what_kafka_log_dirs_prints(cluster: JbodCluster, spread: str,
                                                           args: tuple[str, ...]) -> None:
    bootstrap = ["--bootstrap-server", cluster.bootstrap_servers.split(",")[0], "--describe", *args]
    kafka = run_kafka_tool("kafka-2.8", "kafka.admin.LogDirsCommand", *bootstrap)
    ours = run_odradek("log-dirs", *bootstrap)
    assert kafka.returncode == ours.returncode == 0, (kafka.stderr, ours.stderr)
    assert ours.stdout.splitlines()[:2] == ["Querying brokers for log directories information",
                                            f"Received log directory information from brokers "
                                            f"{'2,0' if '--broker-list' in args else '0,1,2'}"]
    assert ours.stdout == kafka.stdout
