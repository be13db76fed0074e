"""`odradek topics --bootstrap-server ...` against a real 3-broker cluster: the cases of
test_topics_zk_cli.py, carried out over the Kafka protocol instead of ZooKeeper (the table of
bad inputs, shared by both, is in test_topics_zk_cli.py)."""

from __future__ import annotations

import json

import pytest
from test_topics_zk_cli import online, zk_tree
from test_topics_zk_cli import topics_bootstrap as topics

from odradek.local.cluster import LocalCluster
from support import partition_state, run_odradek, wait_until


def topics_zk(cluster: LocalCluster, *args: str):
    return run_odradek("topics", "--zookeeper", cluster.zookeeper_connect, *args)


def assignment_of(cluster: LocalCluster, topic: str) -> dict[str, list[int]]:
    return json.loads(cluster.zk_client().get(f"/brokers/topics/{topic}")[0])["partitions"]


def config_of(cluster: LocalCluster, topic: str) -> dict[str, str]:
    return json.loads(cluster.zk_client().get(f"/config/topics/{topic}")[0])["config"]


def test_create_with_an_explicit_replica_assignment(module_cluster: LocalCluster) -> None:
    result = topics(module_cluster, "--create", "--topic", "topic_a", "--replica-assignment", "1:2:0,2:0:1,0:1:2")
    assert result.returncode == 0, result.stderr
    assert 'Created topic "topic_a".' in result.stdout
    assert assignment_of(module_cluster, "topic_a") == {"0": [1, 2, 0], "1": [2, 0, 1], "2": [0, 1, 2]}
    assert json.loads(module_cluster.zk_client().get("/config/topics/topic_a")[0]) == {"version": 1, "config": {}}
    # CreateTopics answers once the partitions have leaders: no waiting needed here.
    assert online(module_cluster, "topic_a", 3)
    for p, replicas in ((0, [1, 2, 0]), (1, [2, 0, 1]), (2, [0, 1, 2])):
        state = partition_state(module_cluster, "topic_a", p)
        assert state["leader"] == replicas[0]
        assert state["isr"] == replicas


def test_describe_prints_what_the_zookeeper_path_prints(module_cluster: LocalCluster) -> None:
    result = topics(module_cluster, "--create", "--topic", "described", "--partitions", "3",
                    "--replication-factor", "2", "--config", "retention.ms=1000")
    assert result.returncode == 0, result.stderr
    result = topics(module_cluster, "--describe", "--topic", "described")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Topic:described\tPartitionCount:3\tReplicationFactor:2\tConfigs:retention.ms=1000"
    assignment = assignment_of(module_cluster, "described")
    for p in range(3):
        state = partition_state(module_cluster, "described", p)
        assert lines[1 + p] == (f"\tTopic: described\tPartition: {p}\tLeader: {state['leader']}\t"
                                f"Replicas: {','.join(map(str, assignment[str(p)]))}\t"
                                f"Isr: {','.join(map(str, state['isr']))}")
    assert len(lines) == 4
    assert result.stdout == topics_zk(module_cluster, "--describe", "--topic", "described").stdout
    overrides = topics(module_cluster, "--describe", "--topics-with-overrides")
    assert "Topic:described\t" in overrides.stdout
    assert "Partition:" not in overrides.stdout
    assert topics(module_cluster, "--describe", "--under-replicated-partitions").stdout == ""
    assert topics(module_cluster, "--describe", "--unavailable-partitions").stdout == ""
    missing = topics(module_cluster, "--describe", "--topic", "not-there", "--if-exists")
    assert missing.returncode == 0 and missing.stdout == ""


def test_automatic_placement_spreads_leaders_and_replicas(module_cluster: LocalCluster) -> None:
    result = topics(module_cluster, "--create", "--topic", "spread", "--partitions", "9", "--replication-factor", "3")
    assert result.returncode == 0, result.stderr
    assignment = assignment_of(module_cluster, "spread")
    leaders = [replicas[0] for replicas in assignment.values()]
    assert sorted(leaders.count(b) for b in (0, 1, 2)) == [3, 3, 3]
    assert all(sorted(r) == [0, 1, 2] for r in assignment.values())


def test_list_shows_every_topic_sorted(module_cluster: LocalCluster) -> None:
    for name in ("listed-b", "listed-a"):
        assert topics(module_cluster, "--create", "--topic", name, "--partitions", "1",
                      "--replication-factor", "1").returncode == 0
    listed = topics(module_cluster, "--list").stdout.splitlines()
    assert {"listed-a", "listed-b"} <= set(listed)
    assert listed == sorted(listed)
    assert listed == topics_zk(module_cluster, "--list").stdout.splitlines()


def test_alter_adds_partitions_where_kafka_puts_them(module_cluster: LocalCluster) -> None:
    assert topics(module_cluster, "--create", "--topic", "grow", "--replica-assignment",
                  "1:2:0,2:0:1,0:1:2").returncode == 0
    result = topics(module_cluster, "--alter", "--topic", "grow", "--partitions", "4")
    assert result.returncode == 0, result.stderr
    assert "Adding partitions succeeded!" in result.stdout
    assert assignment_of(module_cluster, "grow")["3"] == [1, 2, 0]  # Kafka's addPartitions placement
    assert online(module_cluster, "grow", 4)  # CreatePartitions answered once it was
    result = topics(module_cluster, "--alter", "--topic", "grow", "--partitions", "5",
                    "--replica-assignment", "1:2:0,2:0:1,0:1:2,1:2:0,0:2:1")
    assert result.returncode == 0, result.stderr
    assert assignment_of(module_cluster, "grow")["4"] == [0, 2, 1]


def test_alter_cannot_decrease_partitions(module_cluster: LocalCluster) -> None:
    assert topics(module_cluster, "--create", "--topic", "shrink", "--partitions", "3",
                  "--replication-factor", "1").returncode == 0
    before = zk_tree(module_cluster)
    result = topics(module_cluster, "--alter", "--topic", "shrink", "--partitions", "1")
    assert result.returncode != 0
    assert "The number of partitions for a topic can only be increased" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert zk_tree(module_cluster) == before


def test_alter_configs(module_cluster: LocalCluster) -> None:
    assert topics(module_cluster, "--create", "--topic", "tuned", "--partitions", "1", "--replication-factor", "1",
                  "--config", "retention.ms=1000", "--config", "segment.ms=60000").returncode == 0
    result = topics(module_cluster, "--alter", "--topic", "tuned", "--config", "max.message.bytes=2048",
                    "--delete-config", "retention.ms")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["Updated config for topic tuned."]
    assert config_of(module_cluster, "tuned") == {"segment.ms": "60000", "max.message.bytes": "2048"}
    described = topics(module_cluster, "--describe", "--topic", "tuned").stdout.splitlines()[0]
    assert described.endswith("Configs:max.message.bytes=2048,segment.ms=60000")
    before = zk_tree(module_cluster)
    bad = topics(module_cluster, "--alter", "--topic", "tuned", "--config", "min.insync.replicas=0")
    assert bad.returncode != 0
    assert len(bad.stderr.strip().splitlines()) == 1
    assert "Invalid value 0 for configuration min.insync.replicas" in bad.stderr
    assert zk_tree(module_cluster) == before


def test_describe_shows_the_cleanup_policy_of_a_compacted_topic(module_cluster: LocalCluster) -> None:
    assert topics(module_cluster, "--create", "--topic", "compacted", "--partitions", "1", "--replication-factor",
                  "1", "--config", "cleanup.policy=compact", "--config", "min.compaction.lag.ms=10").returncode == 0
    expected = "Topic:compacted\tPartitionCount:1\tReplicationFactor:1\t" \
               "Configs:cleanup.policy=compact,min.compaction.lag.ms=10"
    assert topics(module_cluster, "--describe", "--topic", "compacted").stdout.splitlines()[0] == expected
    assert topics_zk(module_cluster, "--describe", "--topic", "compacted").stdout.splitlines()[0] == expected
    # Kafka's LogConfig check: the minimum compaction lag may not exceed the maximum.
    before = zk_tree(module_cluster)
    bad = topics(module_cluster, "--create", "--topic", "lagging", "--partitions", "1", "--replication-factor", "1",
                 "--config", "min.compaction.lag.ms=10", "--config", "max.compaction.lag.ms=5")
    assert bad.returncode != 0
    assert "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)" in bad.stderr
    assert zk_tree(module_cluster) == before


def test_delete_removes_the_topic_and_refuses_internal_topics(module_cluster: LocalCluster) -> None:
    assert topics(module_cluster, "--create", "--topic", "doomed", "--partitions", "2",
                  "--replication-factor", "2").returncode == 0
    result = topics(module_cluster, "--delete", "--topic", "doomed")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["Topic doomed is marked for deletion."]
    assert "doomed" not in topics(module_cluster, "--list").stdout.splitlines()  # DeleteTopics waited
    wait_until(lambda: not module_cluster.zk_client().exists("/brokers/topics/doomed"), message="znodes removed")
    assert not module_cluster.zk_client().exists("/config/topics/doomed")
    assert topics(module_cluster, "--delete", "--topic", "doomed", "--if-exists").returncode == 0
    gone = topics(module_cluster, "--delete", "--topic", "doomed")
    assert gone.returncode != 0 and "Topic 'doomed' does not exist as expected" in gone.stderr
    assert topics_zk(module_cluster, "--create", "--topic", "__consumer_offsets", "--partitions", "1",
                     "--replication-factor", "1").returncode == 0
    try:
        wait_until(lambda: "__consumer_offsets" in topics(module_cluster, "--list").stdout, message="listed")
        assert "__consumer_offsets" not in topics(module_cluster, "--list", "--exclude-internal").stdout
        refused = topics(module_cluster, "--delete", "--topic", "__consumer_offsets")
        assert refused.returncode != 0
        assert "is a kafka internal topic and is not allowed to be marked for deletion" in refused.stderr
        assert not module_cluster.zk_client().exists("/admin/delete_topics/__consumer_offsets")
    finally:
        module_cluster.zk_client().create("/admin/delete_topics/__consumer_offsets", b"")
        wait_until(lambda: not module_cluster.zk_client().exists("/brokers/topics/__consumer_offsets"),
                   message="internal topic removed again")


def test_if_not_exists_and_existing_topic(module_cluster: LocalCluster) -> None:
    assert topics(module_cluster, "--create", "--topic", "twice", "--partitions", "1",
                  "--replication-factor", "1").returncode == 0
    again = topics(module_cluster, "--create", "--topic", "twice", "--partitions", "1", "--replication-factor", "1")
    assert again.returncode != 0 and "Topic 'twice' already exists." in again.stderr
    quiet = topics(module_cluster, "--create", "--topic", "twice", "--partitions", "1",
                   "--replication-factor", "1", "--if-not-exists")
    assert quiet.returncode == 0 and quiet.stdout == ""


def test_colliding_names_are_refused(module_cluster: LocalCluster) -> None:
    assert topics(module_cluster, "--create", "--topic", "c_d", "--partitions", "1",
                  "--replication-factor", "1").returncode == 0
    before = zk_tree(module_cluster)
    result = topics(module_cluster, "--create", "--topic", "c.d", "--partitions", "1", "--replication-factor", "1")
    assert result.returncode != 0
    assert "collides with existing topics: c_d" in result.stderr
    assert "WARNING: Due to limitations in metric names" in result.stdout
    assert zk_tree(module_cluster) == before


@pytest.mark.parametrize("bootstrap", ["127.0.0.1:1", "no-port-here"])
def test_unreachable_or_malformed_bootstrap_is_one_line(bootstrap: str) -> None:
    result = run_odradek("topics", "--bootstrap-server", bootstrap, "--list")
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "--bootstrap-server" in result.stderr


def test_disable_rack_aware_places_replicas_without_racks(cluster_factory) -> None:
    cluster = cluster_factory(3, racks=["r1", "r1", None])
    refused = topics(cluster, "--create", "--topic", "racked", "--partitions", "3", "--replication-factor", "2")
    assert refused.returncode != 0
    assert "Not all brokers have rack information" in refused.stderr
    result = topics(cluster, "--create", "--topic", "racked", "--partitions", "3", "--replication-factor", "2",
                    "--disable-rack-aware")
    assert result.returncode == 0, result.stderr
    assignment = assignment_of(cluster, "racked")
    assert sorted(r[0] for r in assignment.values()) == [0, 1, 2]
    assert all(len(set(r)) == 2 for r in assignment.values())
    result = topics(cluster, "--alter", "--topic", "racked", "--partitions", "6", "--disable-rack-aware")
    assert result.returncode == 0, result.stderr
    assert len(assignment_of(cluster, "racked")) == 6
