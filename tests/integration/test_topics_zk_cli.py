"""`odradek topics --zookeeper ...` against a real 3-broker cluster: kafka-topics.sh's flags,
output and semantics; and bad input that changes nothing, over --zookeeper and --bootstrap-server
alike (one table of cases for both)."""

from __future__ import annotations

import json

import pytest

from odradek.local.cluster import LocalCluster
from support import partition_state, run_odradek, wait_until


def topics(cluster: LocalCluster, *args: str):
    return run_odradek("topics", "--zookeeper", cluster.zookeeper_connect, *args)


def topics_bootstrap(cluster: LocalCluster, *args: str):
    return run_odradek("topics", "--bootstrap-server", cluster.bootstrap_servers.split(",")[0], *args)


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


def test_create_with_an_explicit_replica_assignment(module_cluster: LocalCluster) -> None:
    result = topics(module_cluster, "--create", "--topic", "topic_a", "--replica-assignment", "1:2:0,2:0:1,0:1:2")
    assert result.returncode == 0, result.stderr
    assert 'Created topic "topic_a".' in result.stdout
    zk = module_cluster.zk_client()
    assignment = json.loads(zk.get("/brokers/topics/topic_a")[0])
    assert assignment["partitions"] == {"0": [1, 2, 0], "1": [2, 0, 1], "2": [0, 1, 2]}
    assert json.loads(zk.get("/config/topics/topic_a")[0]) == {"version": 1, "config": {}}
    wait_until(lambda: online(module_cluster, "topic_a", 3), message="topic_a online")
    # Leader = first live replica of the assignment; ISR = the live assigned replicas.
    for p, replicas in ((0, [1, 2, 0]), (1, [2, 0, 1]), (2, [0, 1, 2])):
        state = partition_state(module_cluster, "topic_a", p)
        assert state["leader"] == replicas[0]
        assert state["isr"] == replicas
        assert state["leader_epoch"] == 0 and state["version"] == 1


def test_describe_prints_kafkas_format(module_cluster: LocalCluster) -> None:
    result = topics(module_cluster, "--create", "--topic", "described", "--partitions", "3",
                    "--replication-factor", "2", "--config", "retention.ms=1000")
    assert result.returncode == 0, result.stderr
    wait_until(lambda: online(module_cluster, "described", 3), message="described online")
    result = topics(module_cluster, "--describe", "--topic", "described")
    lines = result.stdout.splitlines()
    assert lines[0] == "Topic:described\tPartitionCount:3\tReplicationFactor:2\tConfigs:retention.ms=1000"
    assert len(lines) == 4
    zk = module_cluster.zk_client()
    assignment = json.loads(zk.get("/brokers/topics/described")[0])["partitions"]
    for p in range(3):
        state = partition_state(module_cluster, "described", p)
        replicas = ",".join(map(str, assignment[str(p)]))
        isr = ",".join(map(str, state["isr"]))
        assert lines[1 + p] == (f"\tTopic: described\tPartition: {p}\tLeader: {state['leader']}\t"
                                f"Replicas: {replicas}\tIsr: {isr}")
    overrides = topics(module_cluster, "--describe", "--topics-with-overrides")
    assert "Topic:described\t" in overrides.stdout
    assert "Partition:" not in overrides.stdout
    assert topics(module_cluster, "--describe", "--under-replicated-partitions").stdout == ""
    assert topics(module_cluster, "--describe", "--unavailable-partitions").stdout == ""


def test_automatic_placement_spreads_leaders_and_replicas(module_cluster: LocalCluster) -> None:
    result = topics(module_cluster, "--create", "--topic", "spread", "--partitions", "9", "--replication-factor", "3")
    assert result.returncode == 0, result.stderr
    assignment = json.loads(module_cluster.zk_client().get("/brokers/topics/spread")[0])["partitions"]
    leaders = [replicas[0] for replicas in assignment.values()]
    assert sorted(leaders.count(b) for b in (0, 1, 2)) == [3, 3, 3]
    assert all(sorted(r) == [0, 1, 2] for r in assignment.values())


def test_list_marks_topics_for_deletion(module_cluster: LocalCluster) -> None:
    for name in ("listed-a", "listed-b"):
        assert topics(module_cluster, "--create", "--topic", name, "--partitions", "1",
                      "--replication-factor", "1").returncode == 0
    module_cluster.zk_client().create("/admin/delete_topics/listed-b", b"")  # as an older tool would
    listed = topics(module_cluster, "--list").stdout.splitlines()
    assert "listed-a" in listed
    assert listed == sorted(listed, key=lambda line: line.split(" ")[0])
    # The controller deletes it (delete.topic.enable defaults to true); until then list marks it.
    wait_until(lambda: "listed-b" not in topics(module_cluster, "--list").stdout
               or "listed-b - marked for deletion" in topics(module_cluster, "--list").stdout)


def test_alter_adds_partitions_where_kafka_puts_them(module_cluster: LocalCluster) -> None:
    assert topics(module_cluster, "--create", "--topic", "grow", "--replica-assignment",
                  "1:2:0,2:0:1,0:1:2").returncode == 0
    result = topics(module_cluster, "--alter", "--topic", "grow", "--partitions", "4")
    assert result.returncode == 0, result.stderr
    assert "Adding partitions succeeded!" in result.stdout
    assignment = json.loads(module_cluster.zk_client().get("/brokers/topics/grow")[0])["partitions"]
    assert assignment["3"] == [1, 2, 0]  # Kafka's addPartitions: start index 1, start partition id 3
    wait_until(lambda: online(module_cluster, "grow", 4), message="new partition online")
    assert partition_state(module_cluster, "grow", 3)["leader"] == 1


def test_alter_cannot_decrease_partitions(module_cluster: LocalCluster) -> None:
    assert topics(module_cluster, "--create", "--topic", "shrink", "--partitions", "3",
                  "--replication-factor", "1").returncode == 0
    before = zk_tree(module_cluster)
    result = topics(module_cluster, "--alter", "--topic", "shrink", "--partitions", "1")
    assert result.returncode != 0
    assert "The number of partitions for a topic can only be increased" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert zk_tree(module_cluster) == before


def test_delete_marks_and_refuses_internal_topics(module_cluster: LocalCluster) -> None:
    assert topics(module_cluster, "--create", "--topic", "doomed", "--partitions", "2",
                  "--replication-factor", "2").returncode == 0
    result = topics(module_cluster, "--delete", "--topic", "doomed")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Topic doomed is marked for deletion.",
        "Note: This will have no impact if delete.topic.enable is not set to true.",
    ]
    wait_until(lambda: not module_cluster.zk_client().exists("/brokers/topics/doomed"), message="topic deleted")
    assert not module_cluster.zk_client().exists("/config/topics/doomed")
    assert not module_cluster.zk_client().exists("/admin/delete_topics/doomed")
    refused = topics(module_cluster, "--delete", "--topic", "__consumer_offsets", "--if-exists")
    assert refused.returncode == 0  # --if-exists: missing topic is fine
    module_cluster.zk_client().create("/brokers/topics/__consumer_offsets",
                                      b'{"version":1,"partitions":{"0":[0]}}')
    try:
        refused = topics(module_cluster, "--delete", "--topic", "__consumer_offsets")
        assert refused.returncode != 0
        assert "is a kafka internal topic and is not allowed to be marked for deletion" in refused.stderr
        assert not module_cluster.zk_client().exists("/admin/delete_topics/__consumer_offsets")
    finally:
        module_cluster.zk_client().delete("/brokers/topics/__consumer_offsets", recursive=True)


def test_if_not_exists_and_existing_topic(module_cluster: LocalCluster) -> None:
    assert topics(module_cluster, "--create", "--topic", "twice", "--partitions", "1",
                  "--replication-factor", "1").returncode == 0
    again = topics(module_cluster, "--create", "--topic", "twice", "--partitions", "1", "--replication-factor", "1")
    assert again.returncode != 0 and "Topic 'twice' already exists." in again.stderr
    quiet = topics(module_cluster, "--create", "--topic", "twice", "--partitions", "1",
                   "--replication-factor", "1", "--if-not-exists")
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


@pytest.mark.parametrize("run", [topics, topics_bootstrap], ids=["zookeeper", "bootstrap-server"])
@pytest.mark.parametrize(("args", "message"), BAD_INPUT)
def test_bad_input_is_one_clear_line_and_writes_nothing(module_cluster: LocalCluster, run, args: list[str],
                                                         message: str) -> None:
    before = zk_tree(module_cluster)
    result = run(module_cluster, *args)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert zk_tree(module_cluster) == before


def test_colliding_names_are_refused(module_cluster: LocalCluster) -> None:
    assert topics(module_cluster, "--create", "--topic", "a_b", "--partitions", "1",
                  "--replication-factor", "1").returncode == 0
    before = zk_tree(module_cluster)
    result = topics(module_cluster, "--create", "--topic", "a.b", "--partitions", "1", "--replication-factor", "1")
    assert result.returncode != 0
    assert "collides with existing topics: a_b" in result.stderr
    assert "WARNING: Due to limitations in metric names" in result.stdout
    assert zk_tree(module_cluster) == before


def test_unreachable_zookeeper_is_one_line() -> None:
    result = run_odradek("topics", "--zookeeper", "127.0.0.1:1", "--list")
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1
    assert "could not connect to ZooKeeper" in result.stderr
