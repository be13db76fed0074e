"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments with real clients:
Kafka 2.8's own kafka-leader-election and kafka-reassign-partitions (--bootstrap-server) beside
odradek's leader-election and reassign-partitions, on the same cluster, printing the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer

from odradek.local.cluster import LocalCluster
from support import (
    ClusterFactory,
    create_topic,
    partition_state,
    run_kafka_tool,
    run_odradek,
    wait_until,
)

ELECTION = "kafka.admin.LeaderElectionCommand"
REASSIGN = "kafka.admin.ReassignPartitionsCommand"


def both(cluster: LocalCluster, kafka_class: str, odradek_command: str, *args: str) -> tuple:
    bootstrap = ("--bootstrap-server", cluster.bootstrap_servers.split(",")[0])
    kafka = run_kafka_tool("kafka-2.8", kafka_class, *bootstrap, *args)
    ours = run_odradek(odradek_command, *bootstrap, *args)
    return kafka, ours


def assignment(cluster: LocalCluster, topic: str) -> dict:
    return json.loads(cluster.zk_client().get(f"/brokers/topics/{topic}")[0])


def plan(tmp_path: Path, topic: str, replicas: list[int], name: str | None = None) -> str:
    path = tmp_path / (name or f"{topic}-{'-'.join(map(str, replicas))}.json")
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas, "log_dirs": ["any"] * len(replicas)}]}))
    return str(path)


@pytest.fixture(scope="module")
def cluster(module_cluster: LocalCluster) -> LocalCluster:
    return module_cluster


@pytest.mark.parametrize("args", [
    ("--election-type", "preferred", "--all-topic-partitions"),
    ("--election-type", "preferred", "--topic", "placed", "--partition", "0"),
    ("--election-type", "unclean", "--topic", "no-such-topic", "--partition", "0"),
    ("--election-type", "PREFERRED", "--topic", "placed", "--partition", "9"),
], ids=["all-none-needed", "not-needed", "unknown-topic", "unknown-partition"])
def test_leader_election_prints_what_kafkas_tool_prints(cluster: LocalCluster, args: tuple[str, ...]) -> None:
    if partition_state(cluster, "placed", 0) is None:
        create_topic(cluster, "placed", assignment=[[0, 1]])
    kafka, ours = both(cluster, ELECTION, "leader-election", *args)
    assert (ours.returncode, ours.stdout) == (kafka.returncode, kafka.stdout), (kafka.stderr, ours.stderr)
    if "no-such-topic" in args:
        assert ours.stdout == ("Error completing leader election (UNCLEAN) for partition: no-such-topic-0: "
                               "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
                               "The partition does not exist.\n")
        assert ours.returncode == 1 and "1 replica(s) could not be elected" in ours.stderr


def test_preferred_leader_elected_again(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3)
    create_topic(cluster, "moved", assignment=[[0, 1]])
    cluster.stop_broker(0)
    wait_until(lambda: partition_state(cluster, "moved", 0)["leader"] == 1, message="leadership moved to 1")
    cluster.start_broker(0)
    wait_until(lambda: sorted(partition_state(cluster, "moved", 0)["isr"]) == [0, 1], timeout=60,
               message="broker 0 back in the ISR")
    elected = run_odradek("leader-election", "--bootstrap-server", cluster.bootstrap_servers,
                          "--election-type", "preferred", "--topic", "moved", "--partition", "0")
    assert elected.returncode == 0, elected.stderr
    assert elected.stdout == "Successfully completed leader election (PREFERRED) for partitions moved-0\n"
    assert partition_state(cluster, "moved", 0)["leader"] == 0
    # Kafka's tool, asked again, finds nothing to do.
    again = run_kafka_tool("kafka-2.8", ELECTION, "--bootstrap-server", cluster.bootstrap_servers,
                           "--election-type", "preferred", "--topic", "moved", "--partition", "0")
    assert again.returncode == 0 and again.stdout.startswith("Valid replica already elected")


def step(cluster: LocalCluster, *args: str) -> tuple[str, str]:
    """Kafka's tool on topic ``k``, odradek's on ``o`` (``@`` in ``args`` names it); their
    output with the topic's name made ``@``."""
    bootstrap = ("--bootstrap-server", cluster.bootstrap_servers.split(",")[0])
    kafka = run_kafka_tool("kafka-2.8", REASSIGN, *bootstrap, *(a.replace("@", "k") for a in args))
    ours = run_odradek("reassign-partitions", *bootstrap, *(a.replace("@", "o") for a in args))
    assert kafka.returncode == ours.returncode == 0, (kafka.stdout, kafka.stderr, ours.stderr)
    return (kafka.stdout.replace('"k"', '"@"').replace("k-0", "@-0").replace(" k\n", " @\n"),
            ours.stdout.replace('"o"', '"@"').replace("o-0", "@-0").replace(" o\n", " @\n"))


def moving_cluster(cluster_factory: ClusterFactory, tmp_path: Path) -> tuple[LocalCluster, tuple[int, int, int]]:
    """Three brokers, topics ``k`` and ``o`` on [a, b] with 200 batches of 1 kB each, and the plan
    ``@.json`` moving them to [c, a]: executed with ``--throttle 100`` (bytes/s: a batch every
    ten seconds) it stays in progress for half an hour."""
    cluster = cluster_factory(3)
    a, b, c = 0, 1, 2
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "batch.size": 1100, "linger.ms": 0}) as producer:
        for topic in ("k", "o"):
            create_topic(cluster, topic, assignment=[[a, b]])
            plan(tmp_path, topic, [c, a], f"{topic}.json")
            for _ in range(200):
                producer.produce(topic, value=bytes(1000), partition=0)
        assert producer.flush(30) == 0
    return cluster, (a, b, c)


def test_reassignment_in_progress_side_by_side(cluster_factory: ClusterFactory, tmp_path: Path) -> None:
    """--execute, --list and --verify while a move is held back by a throttle of 100 B/s."""
    cluster, (a, b, added) = moving_cluster(cluster_factory, tmp_path)
    kafka, ours = both(cluster, REASSIGN, "reassign-partitions", "--list")
    assert kafka.stdout == ours.stdout == "No partition reassignments found.\n"
    json_file = str(tmp_path / "@.json")
    executed = step(cluster, "--execute", "--reassignment-json-file", json_file, "--additional", "--throttle", "100")
    listed = both(cluster, REASSIGN, "reassign-partitions", "--list")
    verified = step(cluster, "--verify", "--reassignment-json-file", json_file)
    assert executed[0] == executed[1]
    assert executed[1] == ("Current partition replica assignment\n\n"
                           f'{{"version":1,"partitions":[{{"topic":"@","partition":0,"replicas":[{a},{b}],'
                           '"log_dirs":["any","any"]}]}\n\n'
                           "Save this to use as the --reassignment-json-file option during rollback\n"
                           "Warning: You must run --verify periodically, until the reassignment completes, to "
                           "ensure the throttle is removed.\n"
                           "The inter-broker throttle limit was set to 100 B/s\n"
                           "Successfully started partition reassignment for @-0\n")
    ongoing = f"replicas: {added},{a},{b}. adding: {added}. removing: {b}."
    assert listed[0].stdout == listed[1].stdout == f"Current partition reassignments:\nk-0: {ongoing}\no-0: {ongoing}\n"
    assert verified[0] == verified[1]
    assert verified[1] == "Status of partition reassignment:\nReassignment of partition @-0 is still in progress.\n\n"
    # The throttle raised by resubmitting (Kafka's --additional), the moves finish.
    step(cluster, "--execute", "--reassignment-json-file", json_file, "--additional", "--throttle", "100000000")
    wait_until(lambda: all(assignment(cluster, t)["partitions"]["0"] == [added, a] for t in ("k", "o")),
               timeout=60, message="both moves complete at the raised throttle")
    done = step(cluster, "--verify", "--reassignment-json-file", json_file)
    assert done[0] == done[1] == ("Status of partition reassignment:\n"
                                  "Reassignment of partition @-0 is complete.\n\n"
                                  "Clearing broker-level throttles on brokers 0,1,2\n"
                                  "Clearing topic-level throttles on topic @\n")


def test_cancel_and_throttles_side_by_side(cluster_factory: ClusterFactory, tmp_path: Path) -> None:
    cluster, (a, b, added) = moving_cluster(cluster_factory, tmp_path)
    json_file = str(tmp_path / "@.json")
    executed = step(cluster, "--execute", "--reassignment-json-file", json_file, "--additional",
                    "--throttle", "100")
    assert executed[0] == executed[1]
    assert "The inter-broker throttle limit was set to 100 B/s" in executed[1]
    zk = cluster.zk_client()
    for t in ("k", "o"):
        config = json.loads(zk.get(f"/config/topics/{t}")[0])["config"]
        assert config == {"leader.replication.throttled.replicas": f"0:{a},0:{b}",
                          "follower.replication.throttled.replicas": f"0:{added}"}, (t, config)
    for broker in (0, 1, 2):
        config = json.loads(zk.get(f"/config/brokers/{broker}")[0])["config"]
        assert config == {"leader.replication.throttled.rate": "100",
                          "follower.replication.throttled.rate": "100"}, (broker, config)
    # Throttles kept: clearing the brokers' rates would let the other tool's move finish.
    cancelled = step(cluster, "--cancel", "--reassignment-json-file", json_file, "--preserve-throttles")
    assert cancelled[0] == cancelled[1] == ("Successfully cancelled partition reassignment for: @-0\n"
                                            "None of the specified partition moves are active.\n")
    wait_until(lambda: all(assignment(cluster, t)["partitions"]["0"] == [a, b] for t in ("k", "o")),
               message="cancelled: the original replicas")
    nothing = step(cluster, "--cancel", "--reassignment-json-file", json_file)
    assert nothing[0] == nothing[1] == ("None of the specified partition reassignments are active.\n"
                                        "None of the specified partition moves are active.\n"
                                        "Clearing broker-level throttles on brokers 0,1,2\n"
                                        "Clearing topic-level throttles on topic @\n")
    zk = cluster.zk_client()
    assert all(json.loads(zk.get(f"/config/topics/{t}")[0])["config"] == {} for t in ("k", "o"))
    assert all(json.loads(zk.get(f"/config/brokers/{broker}")[0])["config"] == {} for broker in (0, 1, 2))


def test_generate_proposes_the_brokers_given(cluster: LocalCluster, tmp_path: Path) -> None:
    create_topic(cluster, "spread", 3, replication_factor=2)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "spread"}]}))
    args = ("--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,2")
    kafka, ours = both(cluster, REASSIGN, "reassign-partitions", *args)
    assert kafka.returncode == ours.returncode == 0, (kafka.stderr, ours.stderr)
    # The current assignment is the same; the proposals start at random brokers.
    assert ours.stdout.split("\n\n")[0] == kafka.stdout.split("\n\n")[0]
    proposed = json.loads(ours.stdout.splitlines()[-1])["partitions"]
    assert [p["partition"] for p in proposed] == [0, 1, 2]
    assert all(sorted(p["replicas"]) == [1, 2] and p["log_dirs"] == ["any", "any"] for p in proposed)


def test_refusals(cluster: LocalCluster, tmp_path: Path) -> None:
    bad = plan(tmp_path, "no-such-topic", [0, 1])
    kafka, ours = both(cluster, REASSIGN, "reassign-partitions", "--execute", "--reassignment-json-file", bad)
    unknown = ("Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
               "This server does not host this topic-partition.\n")
    assert kafka.returncode == ours.returncode == 1
    assert kafka.stdout.startswith(unknown) and ours.stderr == unknown
    if partition_state(cluster, "refused", 0) is None:
        create_topic(cluster, "refused", assignment=[[0]])
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps({"version": 1, "partitions": [{"topic": "refused", "partition": 5,
                                                                 "replicas": [0]}]}))
    ours = run_odradek("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers, "--execute",
                       "--reassignment-json-file", str(missing))
    assert ours.returncode == 1 and "non-existent partitions: refused-5" in ours.stderr
    unknown_broker = plan(tmp_path, "refused", [0, 7])
    ours = run_odradek("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers, "--execute",
                       "--reassignment-json-file", unknown_broker)
    assert ours.returncode == 1 and "non-existent brokerIDs: 7" in ours.stderr
    two = run_odradek("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers, "--list", "--verify")
    assert two.returncode == 1 and "exactly one action" in two.stderr


def test_cluster_authorization_required(cluster_factory: ClusterFactory, tmp_path: Path) -> None:
    """Alter on the cluster for elections and reassignments, Describe to list them."""
    guarded = cluster_factory(1, overrides={"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                            "super.users": "User:nobody", "allow.everyone.if.no.acl.found": "true"})
    create_topic(guarded, "t", assignment=[[0]])
    zk = guarded.zk_client()
    deny = {"version": 1, "acls": [{"principal": "User:ANONYMOUS", "permissionType": "Deny", "operation": op,
                                    "host": "*"} for op in ("Alter", "Describe")]}
    zk.create("/kafka-acl/Cluster/kafka-cluster", json.dumps(deny).encode(), makepath=True)
    zk.create("/kafka-acl-changes/acl_changes_", b"CLUSTER:kafka-cluster", sequence=True, makepath=True)
    bootstrap = ("--bootstrap-server", guarded.bootstrap_servers)

    def listed() -> str:
        return run_odradek("reassign-partitions", *bootstrap, "--list").stderr

    wait_until(lambda: "ClusterAuthorizationException" in listed(), timeout=120, interval=1,
               message="the broker loads the DENY")
    assert listed() == ("Error: org.apache.kafka.common.errors.ClusterAuthorizationException: "
                        "Cluster authorization failed.\n")
    elected = run_odradek("leader-election", *bootstrap, "--election-type", "preferred", "--topic", "t",
                          "--partition", "0")
    kafka = run_kafka_tool("kafka-2.8", ELECTION, *bootstrap, "--election-type", "preferred", "--topic", "t",
                           "--partition", "0")
    assert elected.returncode == kafka.returncode == 1
    assert elected.stdout == kafka.stdout == "Not authorized to perform leader election\n"
    moved = run_odradek("reassign-partitions", *bootstrap, "--cancel", "--reassignment-json-file",
                        plan(tmp_path, "t", [0]))
    assert moved.returncode == 1 and "ClusterAuthorizationException" in moved.stderr
