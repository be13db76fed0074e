"""`odradek topics` against a real 3-broker cluster, over --zookeeper and over --bootstrap-server:
kafka-topics.sh's flags, output and semantics, each case through both backends; bad input that
changes nothing; and what only one backend does (a deletion over ZooKeeper only marks the topic,
topic configs are altered over the Kafka protocol)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from odradek.local.cluster import LocalCluster
from support import partition_state, run_odradek, wait_until

BACKENDS = ("zookeeper", "bootstrap-server")


@dataclass(frozen=True)
class Topics:
    """``odradek topics`` over one backend of the module's cluster."""

    cluster: LocalCluster
    backend: str  # one of BACKENDS

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        connect = (self.cluster.zookeeper_connect if self.backend == "zookeeper"
                   else self.cluster.bootstrap_servers.split(",")[0])
        return run_odradek("topics", f"--{self.backend}", connect, *args)

    def other(self) -> Topics:
        return Topics(self.cluster, next(b for b in BACKENDS if b != self.backend))

    def name(self, topic: str) -> str:
        """``topic`` for this backend: the two share the cluster."""
        return f"{topic}-{self.backend}"

    def done(self, condition: Callable[[], object], message: str) -> None:
        """Over the Kafka protocol, CreateTopics, CreatePartitions and DeleteTopics answer once
        the controller has acted: ``condition`` holds already.  Over ZooKeeper the command only
        wrote znodes: wait for the controller."""
        if self.backend == "bootstrap-server":
            assert condition(), message
        else:
            wait_until(condition, message=message)


@pytest.fixture(params=BACKENDS)
def topics(request: pytest.FixtureRequest, module_cluster: LocalCluster) -> Topics:
    return Topics(module_cluster, request.param)


def zk_tree(cluster: LocalCluster) -> dict[str, bytes]:
    """Every znode and its data, to show that a refused command wrote nothing."""
    zk = cluster.zk_client()
    out = {}

    def walk(path: str) -> None:
        data, _ = zk.get(path)
        out[path] = data
        for child in zk.get_children(path):
            walk(f"{path.rstrip('/')}/{child}")

    for top in ("/brokers/topics", "/config/topics", "/admin/delete_topics"):
        walk(top)
    return out


def online(cluster: LocalCluster, topic: str, partitions: int) -> bool:
    states = [partition_state(cluster, topic, p) for p in range(partitions)]
    return all(s is not None and s["leader"] >= 0 for s in states)


def assignment_of(cluster: LocalCluster, topic: str) -> dict[str, list[int]]:
    return json.loads(cluster.zk_client().get(f"/brokers/topics/{topic}")[0])["partitions"]


def config_of(cluster: LocalCluster, topic: str) -> dict[str, str]:
    return json.loads(cluster.zk_client().get(f"/config/topics/{topic}")[0])["config"]


def test_create_with_an_explicit_replica_assignment(topics: Topics) -> None:
    cluster, name = topics.cluster, topics.name("topic_a")
    result = topics("--create", "--topic", name, "--replica-assignment", "1:2:0,2:0:1,0:1:2")
    assert result.returncode == 0, result.stderr
    assert f'Created topic "{name}".' in result.stdout
    assert assignment_of(cluster, name) == {"0": [1, 2, 0], "1": [2, 0, 1], "2": [0, 1, 2]}
    assert json.loads(cluster.zk_client().get(f"/config/topics/{name}")[0]) == {"version": 1, "config": {}}
    topics.done(lambda: online(cluster, name, 3), f"{name} online")
    # Leader = first live replica of the assignment; ISR = the live assigned replicas.
    for p, replicas in ((0, [1, 2, 0]), (1, [2, 0, 1]), (2, [0, 1, 2])):
        state = partition_state(cluster, name, p)
        assert state["leader"] == replicas[0]
        assert state["isr"] == replicas
        assert state["leader_epoch"] == 0 and state["version"] == 1


def test_describe_prints_kafkas_format(topics: Topics) -> None:
    cluster, name = topics.cluster, topics.name("described")
    result = topics("--create", "--topic", name, "--partitions", "3", "--replication-factor", "2",
                    "--config", "retention.ms=1000")
    assert result.returncode == 0, result.stderr
    topics.done(lambda: online(cluster, name, 3), f"{name} online")
    result = topics("--describe", "--topic", name)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"Topic:{name}\tPartitionCount:3\tReplicationFactor:2\tConfigs:retention.ms=1000"
    assert len(lines) == 4
    assignment = assignment_of(cluster, name)
    for p in range(3):
        state = partition_state(cluster, name, p)
        replicas = ",".join(map(str, assignment[str(p)]))
        isr = ",".join(map(str, state["isr"]))
        assert lines[1 + p] == (f"\tTopic: {name}\tPartition: {p}\tLeader: {state['leader']}\t"
                                f"Replicas: {replicas}\tIsr: {isr}")
    # The other backend agrees (over the Kafka protocol once UpdateMetadata reached the broker).
    wait_until(lambda: topics.other()("--describe", "--topic", name).stdout == result.stdout,
               message="the same description over the other backend")
    overrides = topics("--describe", "--topics-with-overrides")
    assert f"Topic:{name}\t" in overrides.stdout
    assert "Partition:" not in overrides.stdout
    assert topics("--describe", "--under-replicated-partitions").stdout == ""
    assert topics("--describe", "--unavailable-partitions").stdout == ""
    missing = topics("--describe", "--topic", "not-there", "--if-exists")
    assert missing.returncode == 0 and missing.stdout == ""


def test_automatic_placement_spreads_leaders_and_replicas(topics: Topics) -> None:
    name = topics.name("spread")
    result = topics("--create", "--topic", name, "--partitions", "9", "--replication-factor", "3")
    assert result.returncode == 0, result.stderr
    assignment = assignment_of(topics.cluster, name)
    leaders = [replicas[0] for replicas in assignment.values()]
    assert sorted(leaders.count(b) for b in (0, 1, 2)) == [3, 3, 3]
    assert all(sorted(r) == [0, 1, 2] for r in assignment.values())


def test_list_shows_every_topic_sorted(topics: Topics) -> None:
    names = [topics.name("listed-b"), topics.name("listed-a")]
    for name in names:
        assert topics("--create", "--topic", name, "--partitions", "1", "--replication-factor", "1").returncode == 0
    listed = topics("--list").stdout.splitlines()
    assert set(names) <= set(listed)
    assert listed == sorted(listed, key=lambda line: line.split(" ")[0])
    ours = [line for line in listed if line in names]
    wait_until(lambda: [line for line in topics.other()("--list").stdout.splitlines() if line in names] == ours,
               message="the same list over the other backend")


def test_list_over_zookeeper_marks_topics_for_deletion(module_cluster: LocalCluster) -> None:
    topics = Topics(module_cluster, "zookeeper")
    assert topics("--create", "--topic", "marked", "--partitions", "1", "--replication-factor", "1").returncode == 0
    module_cluster.zk_client().create("/admin/delete_topics/marked", b"")  # as an older tool would
    # The controller deletes it (delete.topic.enable defaults to true); until then list marks it.
    wait_until(lambda: "marked" not in topics("--list").stdout
               or "marked - marked for deletion" in topics("--list").stdout)


def test_alter_adds_partitions_where_kafka_puts_them(topics: Topics) -> None:
    cluster, name = topics.cluster, topics.name("grow")
    assert topics("--create", "--topic", name, "--replica-assignment", "1:2:0,2:0:1,0:1:2").returncode == 0
    result = topics("--alter", "--topic", name, "--partitions", "4")
    assert result.returncode == 0, result.stderr
    assert "Adding partitions succeeded!" in result.stdout
    assert assignment_of(cluster, name)["3"] == [1, 2, 0]  # Kafka's addPartitions: start index 1, partition 3
    topics.done(lambda: online(cluster, name, 4), "new partition online")
    assert partition_state(cluster, name, 3)["leader"] == 1
    result = topics("--alter", "--topic", name, "--partitions", "5",
                    "--replica-assignment", "1:2:0,2:0:1,0:1:2,1:2:0,0:2:1")
    assert result.returncode == 0, result.stderr
    assert assignment_of(cluster, name)["4"] == [0, 2, 1]


def test_alter_cannot_decrease_partitions(topics: Topics) -> None:
    name = topics.name("shrink")
    assert topics("--create", "--topic", name, "--partitions", "3", "--replication-factor", "1").returncode == 0
    before = zk_tree(topics.cluster)
    result = topics("--alter", "--topic", name, "--partitions", "1")
    assert result.returncode != 0
    assert "The number of partitions for a topic can only be increased" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert zk_tree(topics.cluster) == before


def test_alter_configs_over_bootstrap(module_cluster: LocalCluster) -> None:
    topics = Topics(module_cluster, "bootstrap-server")
    assert topics("--create", "--topic", "tuned", "--partitions", "1", "--replication-factor", "1",
                  "--config", "retention.ms=1000", "--config", "segment.ms=60000").returncode == 0
    result = topics("--alter", "--topic", "tuned", "--config", "max.message.bytes=2048",
                    "--delete-config", "retention.ms")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["Updated config for topic tuned."]
    assert config_of(module_cluster, "tuned") == {"segment.ms": "60000", "max.message.bytes": "2048"}
    described = topics("--describe", "--topic", "tuned").stdout.splitlines()[0]
    assert described.endswith("Configs:max.message.bytes=2048,segment.ms=60000")
    before = zk_tree(module_cluster)
    bad = topics("--alter", "--topic", "tuned", "--config", "min.insync.replicas=0")
    assert bad.returncode != 0
    assert len(bad.stderr.strip().splitlines()) == 1
    assert "Invalid value 0 for configuration min.insync.replicas" in bad.stderr
    assert zk_tree(module_cluster) == before


def test_describe_shows_the_cleanup_policy_of_a_compacted_topic(topics: Topics) -> None:
    name = topics.name("compacted")
    assert topics("--create", "--topic", name, "--partitions", "1", "--replication-factor", "1",
                  "--config", "cleanup.policy=compact", "--config", "min.compaction.lag.ms=10").returncode == 0
    expected = f"Topic:{name}\tPartitionCount:1\tReplicationFactor:1\t" \
               "Configs:cleanup.policy=compact,min.compaction.lag.ms=10"
    assert topics("--describe", "--topic", name).stdout.splitlines()[0] == expected
    wait_until(lambda: topics.other()("--describe", "--topic", name).stdout.startswith(f"{expected}\n"),
               message="the same configs over the other backend")
    # Kafka's LogConfig check: the minimum compaction lag may not exceed the maximum.
    before = zk_tree(topics.cluster)
    bad = topics("--create", "--topic", topics.name("lagging"), "--partitions", "1", "--replication-factor", "1",
                 "--config", "min.compaction.lag.ms=10", "--config", "max.compaction.lag.ms=5")
    assert bad.returncode != 0
    assert "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)" in bad.stderr
    assert zk_tree(topics.cluster) == before


# Over ZooKeeper the command only marks the topic, and says so as kafka-topics.sh does.
DELETED = {"zookeeper": ["Topic {} is marked for deletion.",
                         "Note: This will have no impact if delete.topic.enable is not set to true."],
           "bootstrap-server": ["Topic {} is marked for deletion."]}


def test_delete_removes_the_topic(topics: Topics) -> None:
    cluster, name = topics.cluster, topics.name("doomed")
    assert topics("--create", "--topic", name, "--partitions", "2", "--replication-factor", "2").returncode == 0
    result = topics("--delete", "--topic", name)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [line.format(name) for line in DELETED[topics.backend]]
    topics.done(lambda: name not in topics("--list").stdout.splitlines(), "topic deleted")
    wait_until(lambda: not cluster.zk_client().exists(f"/brokers/topics/{name}"), message="znodes removed")
    assert not cluster.zk_client().exists(f"/config/topics/{name}")
    wait_until(lambda: not cluster.zk_client().exists(f"/admin/delete_topics/{name}"), message="deletion done")
    assert topics("--delete", "--topic", name, "--if-exists").returncode == 0
    gone = topics("--delete", "--topic", name)
    assert gone.returncode != 0 and f"Topic '{name}' does not exist as expected" in gone.stderr


def test_internal_topics_are_listed_and_not_deleted(topics: Topics) -> None:
    cluster = topics.cluster
    assert run_odradek("topics", "--zookeeper", cluster.zookeeper_connect, "--create", "--topic",
                       "__consumer_offsets", "--partitions", "1", "--replication-factor", "1").returncode == 0
    try:
        wait_until(lambda: "__consumer_offsets" in topics("--list").stdout, message="listed")
        assert "__consumer_offsets" not in topics("--list", "--exclude-internal").stdout
        refused = topics("--delete", "--topic", "__consumer_offsets")
        assert refused.returncode != 0
        assert "is a kafka internal topic and is not allowed to be marked for deletion" in refused.stderr
        assert not cluster.zk_client().exists("/admin/delete_topics/__consumer_offsets")
    finally:
        cluster.zk_client().create("/admin/delete_topics/__consumer_offsets", b"")
        wait_until(lambda: not cluster.zk_client().exists("/brokers/topics/__consumer_offsets"),
                   message="internal topic removed again")


def test_if_not_exists_and_existing_topic(topics: Topics) -> None:
    name = topics.name("twice")
    assert topics("--create", "--topic", name, "--partitions", "1", "--replication-factor", "1").returncode == 0
    again = topics("--create", "--topic", name, "--partitions", "1", "--replication-factor", "1")
    assert again.returncode != 0 and f"Topic '{name}' already exists." in again.stderr
    quiet = topics("--create", "--topic", name, "--partitions", "1", "--replication-factor", "1", "--if-not-exists")
    assert quiet.returncode == 0 and quiet.stdout == ""


BAD_INPUT = [
    (["--create", "--topic", "bad name", "--partitions", "1", "--replication-factor", "1"],
     "contains a character other than ASCII alphanumerics"),
    (["--create", "--topic", "..", "--partitions", "1", "--replication-factor", "1"], 'cannot be "." or ".."'),
    (["--create", "--topic", "x" * 250, "--partitions", "1", "--replication-factor", "1"],
     "can't be longer than 249 characters"),
    (["--create", "--topic", "rf", "--partitions", "1", "--replication-factor", "4"],
     "Replication factor: 4 larger than available brokers: 3."),
    (["--create", "--topic", "zero", "--partitions", "0", "--replication-factor", "1"],
     "Number of partitions must be larger than 0."),
    (["--create", "--topic", "zero-rf", "--partitions", "1", "--replication-factor", "0"],
     "Replication factor must be larger than 0."),
    (["--create", "--topic", "dup", "--replica-assignment", "1:1:0"],
     "Partition replica lists may not contain duplicate entries: 1"),
    (["--create", "--topic", "uneven", "--replica-assignment", "1:2,0"], "has different replication factor"),
    (["--create", "--topic", "ghost", "--replica-assignment", "7:1"], "Unknown broker id(s) 7"),
    (["--create", "--topic", "cfg", "--partitions", "1", "--replication-factor", "1", "--config", "nope=1"],
     "Unknown topic config name: nope"),
    (["--create", "--topic", "cfg2", "--partitions", "1", "--replication-factor", "1", "--config",
      "retention.ms=soon"], "Invalid value soon for configuration retention.ms"),
    (["--create", "--topic", "noargs"], "Missing required argument"),
    (["--alter", "--topic", "missing-topic", "--partitions", "3"], "does not exist"),
    (["--alter", "--topic", "missing-topic", "--config", "retention.ms=1"], "does not exist"),
    (["--describe", "--topic", "missing-topic"], "does not exist"),
    (["--delete", "--topic", "missing-topic"], "does not exist"),
    (["--create", "--list"], "exactly one action"),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUT)
def test_bad_input_is_one_clear_line_and_writes_nothing(topics: Topics, args: list[str], message: str) -> None:
    before = zk_tree(topics.cluster)
    result = topics(*args)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert zk_tree(topics.cluster) == before


def test_colliding_names_are_refused(topics: Topics) -> None:
    assert topics("--create", "--topic", topics.name("a_b"), "--partitions", "1",
                  "--replication-factor", "1").returncode == 0
    before = zk_tree(topics.cluster)
    result = topics("--create", "--topic", topics.name("a.b"), "--partitions", "1", "--replication-factor", "1")
    assert result.returncode != 0
    assert f"collides with existing topics: {topics.name('a_b')}" in result.stderr
    assert "WARNING: Due to limitations in metric names" in result.stdout
    assert zk_tree(topics.cluster) == before


@pytest.mark.parametrize(("args", "message"), [
    (["--zookeeper", "127.0.0.1:1"], "could not connect to ZooKeeper"),
    (["--bootstrap-server", "127.0.0.1:1"], "--bootstrap-server"),
    (["--bootstrap-server", "no-port-here"], "--bootstrap-server"),
])
def test_unreachable_or_malformed_address_is_one_line(args: list[str], message: str) -> None:
    result = run_odradek("topics", *args, "--list")
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert message in result.stderr


def test_disable_rack_aware_places_replicas_without_racks(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    topics = Topics(cluster_factory(3, racks=["r1", "r1", None]), "bootstrap-server")
    refused = topics("--create", "--topic", "racked", "--partitions", "3", "--replication-factor", "2")
    assert refused.returncode != 0
    assert "Not all brokers have rack information" in refused.stderr
    result = topics("--create", "--topic", "racked", "--partitions", "3", "--replication-factor", "2",
                    "--disable-rack-aware")
    assert result.returncode == 0, result.stderr
    assignment = assignment_of(topics.cluster, "racked")
    assert sorted(r[0] for r in assignment.values()) == [0, 1, 2]
    assert all(len(set(r)) == 2 for r in assignment.values())
    result = topics("--alter", "--topic", "racked", "--partitions", "6", "--disable-rack-aware")
    assert result.returncode == 0, result.stderr
    assert len(assignment_of(topics.cluster, "racked")) == 6
