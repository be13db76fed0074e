"""``odradek consumer-groups`` and Kafka 2.8's kafka-consumer-groups.sh (ConsumerGroupCommand,
run from the cached jars) on the same broker, side by side: each invocation is run with both
tools and their stdout and exit status must be the same.  A command that changes the cluster
is run by each tool on its own group of identical history, and the outputs compared with the
group names swapped.

The groups: ``cg-empty`` (a consumer read everything, committed and left; more records came
after, so it lags), ``cg-live`` (a confluent-kafka consumer still in the group) and pairs
of empty groups for the commands that change things.  Kafka's tool is also the real client of
OffsetDelete (KIP-496) here: its errors GROUP_SUBSCRIBED_TO_TOPIC, GROUP_ID_NOT_FOUND and
UNKNOWN_TOPIC_OR_PARTITION are printed by both tools alike.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from support import ClusterFactory, create_topic, run_odradek, wait_until
from support.kafka_tools import kafka_tool

TOPIC = "cg-t"
PARTITIONS = 3
OVERRIDES = {"offsets.topic.num.partitions": "3", "offsets.topic.replication.factor": "1",
             "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


@pytest.fixture(scope="module")
def cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("consumer-groups-cli"))
    try:
        yield factory(1, overrides=OVERRIDES)
    finally:
        factory.stop_all()


def produce(cluster: LocalCluster, per_partition: int) -> None:
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"}) as producer:
        for i in range(per_partition * PARTITIONS):
            producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % PARTITIONS)
        assert producer.flush(30) == 0


def consumer(cluster: LocalCluster, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "client.id": f"{group}-c",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, "session.timeout.ms": 6000,
                     "heartbeat.interval.ms": 500, "max.poll.interval.ms": 3_600_000})


def consume_and_commit(c: Consumer, records: int) -> None:
    """Subscribe, read ``records`` records and commit them."""
    c.subscribe([TOPIC])
    seen: list[object] = []

    def read() -> bool:
        msg = c.poll(0.2)
        if msg is not None:
            assert msg.error() is None, msg.error()
            seen.append(msg)
        return len(seen) >= records

    wait_until(read, timeout=60, interval=0, message=f"{records} records read")
    c.commit(asynchronous=False)


@pytest.fixture(scope="module")
def groups(cluster: LocalCluster) -> Iterator[Consumer]:
    """Sets the groups up; yields the live member of cg-live."""
    create_topic(cluster, TOPIC, PARTITIONS, 1)
    produce(cluster, 10)
    for group in ("cg-empty", "cg-del-a", "cg-del-b", "cg-off-a", "cg-off-b", "cg-reset-a", "cg-reset-b"):
        c = consumer(cluster, group)
        consume_and_commit(c, 10 * PARTITIONS)
        c.close()
    live = consumer(cluster, "cg-live")
    consume_and_commit(live, 10 * PARTITIONS)
    produce(cluster, 2)  # lag for everyone
    yield live
    live.close()


def ours(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return run_odradek("consumer-groups", "--bootstrap-server", cluster.bootstrap_servers, *args)


def kafkas(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    # --timeout: the admin calls' deadline (5 s by default, short on a busy machine).
    return kafka_tool("kafka.admin.ConsumerGroupCommand", "--bootstrap-server", cluster.bootstrap_servers,
                      "--timeout", "60000", *args)


def same(cluster: LocalCluster, *args: str) -> str:
    """Both tools with ``args``: the same stdout and exit status; returns the stdout."""
    mine, theirs = ours(cluster, *args), kafkas(cluster, *args)
    assert (mine.returncode, mine.stdout) == (theirs.returncode, theirs.stdout), \
        f"{args}\nours ({mine.returncode}):\n{mine.stdout}{mine.stderr}\nKafka's ({theirs.returncode}):\n{theirs.stdout}"
    return mine.stdout


def same_on_twins(cluster: LocalCluster, mine: str, theirs: str, *args: str) -> str:
    """A command that changes group ``mine`` (ours) and ``theirs`` (Kafka's), each with
    ``args`` followed by ``--group <its group>``; the outputs, the names swapped, the same."""
    a, b = ours(cluster, *args, "--group", mine), kafkas(cluster, *args, "--group", theirs)
    assert (a.returncode, a.stdout) == (b.returncode, b.stdout.replace(theirs, mine)), \
        f"{args}\nours ({a.returncode}):\n{a.stdout}{a.stderr}\nKafka's ({b.returncode}):\n{b.stdout}"
    return a.stdout


# Each of Kafka's runs starts a JVM (ten seconds and more on a busy machine): a few per test.


def test_list_prints_what_kafka_prints(cluster: LocalCluster, groups: Consumer) -> None:
    listed = same(cluster, "--list")
    assert {"cg-empty", "cg-live"} <= set(listed.split())
    assert "cg-live         Stable" in same(cluster, "--list", "--state")
    assert same(cluster, "--list", "--state", "Stable").split()[2:] == ["cg-live", "Stable"]


def test_describe_offsets_print_what_kafka_prints(cluster: LocalCluster, groups: Consumer) -> None:
    lagging = same(cluster, "--describe", "--group", "cg-empty")
    rows = [line.split() for line in lagging.splitlines()[2:]]
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
    assert sorted(rows) == [["cg-empty", TOPIC, str(p), "10", "12", "2", "-", "-", "-"] for p in range(PARTITIONS)]
    live = same(cluster, "--describe", "--group", "cg-live", "--offsets")
    live_rows = [line.split() for line in live.splitlines()[2:]]
    assert len(live_rows) == PARTITIONS and all(row[-1] == "cg-live-c" for row in live_rows)
    assert "Error: Consumer group 'nope' does not exist." in same(cluster, "--describe", "--group", "nope")


def test_describe_members_and_state_print_what_kafka_prints(cluster: LocalCluster, groups: Consumer) -> None:
    members = same(cluster, "--describe", "--group", "cg-live", "--members", "--verbose")
    assert f"{TOPIC}(0,1,2)" in members and "#PARTITIONS" in members
    same(cluster, "--describe", "--group", "cg-live", "--members")
    state = same(cluster, "--describe", "--group", "cg-live", "--state")
    assert state.split()[-3:] == ["range", "Stable", "1"]
    same(cluster, "--describe", "--all-groups", "--state")


def test_reset_offsets_dry_runs_print_what_kafka_prints(cluster: LocalCluster, groups: Consumer) -> None:
    # A few scenarios side by side, the others checked for their offsets.
    def new_offsets(out: str) -> dict[int, int]:
        return {int(line.split()[2]): int(line.split()[3]) for line in out.splitlines()[2:]}

    reset = ("--reset-offsets", "--group", "cg-empty", "--all-topics")
    assert new_offsets(same(cluster, *reset, "--shift-by", "-3", "--dry-run")) == dict.fromkeys(range(3), 7)
    assert new_offsets(same(cluster, *reset, "--to-datetime", "2020-01-01T00:00:00.000", "--dry-run")) == \
        dict.fromkeys(range(3), 0)
    for scenario, offset in ((["--to-earliest"], 0), (["--to-latest"], 12), (["--to-offset", "4"], 4),
                             (["--shift-by", "50"], 12), (["--to-current"], 10), (["--by-duration", "PT0S"], 12)):
        done = ours(cluster, *reset, *scenario, "--dry-run")
        assert done.returncode == 0 and new_offsets(done.stdout) == dict.fromkeys(range(3), offset), scenario
    assert "cg-t                           1          12" in same(
        cluster, "--reset-offsets", "--group", "cg-empty", "--topic", f"{TOPIC}:1", "--to-latest")
    same(cluster, "--reset-offsets", "--group", "cg-empty", "--topic", TOPIC, "--to-offset", "1", "--export")
    # A group with a member cannot be reset.
    assert "the current state is Stable" in same(cluster, "--reset-offsets", "--group", "cg-live", "--all-topics",
                                                 "--to-earliest", "--dry-run")


def test_reset_offsets_execute_and_from_file(cluster: LocalCluster, groups: Consumer, tmp_path: Path) -> None:
    same_on_twins(cluster, "cg-reset-a", "cg-reset-b", "--reset-offsets", "--topic", f"{TOPIC}:0,2",
                  "--to-offset", "3", "--execute")
    described = same_on_twins(cluster, "cg-reset-a", "cg-reset-b", "--describe")
    assert {tuple(line.split()[2:4]) for line in described.splitlines()[2:]} == {("0", "3"), ("1", "10"), ("2", "3")}
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{TOPIC},1,5\n")
    same_on_twins(cluster, "cg-reset-a", "cg-reset-b", "--reset-offsets", "--from-file", str(plan), "--execute")
    described = same_on_twins(cluster, "cg-reset-a", "cg-reset-b", "--describe")
    assert {tuple(line.split()[2:4]) for line in described.splitlines()[2:]} == {("0", "3"), ("1", "5"), ("2", "3")}


def test_delete_offsets_over_offset_delete(cluster: LocalCluster, groups: Consumer) -> None:
    """kafka-consumer-groups.sh --delete-offsets is OffsetDelete's real client."""
    subscribed = same(cluster, "--delete-offsets", "--group", "cg-live", "--topic", TOPIC)
    assert "GroupSubscribedToTopicException" in subscribed
    assert "'nope' does not exist." in same(cluster, "--delete-offsets", "--group", "nope", "--topic", TOPIC)
    unknown = same(cluster, "--delete-offsets", "--group", "cg-empty", "--topic", "no-such-topic")
    assert "UnknownTopicOrPartitionException" in unknown
    done = same_on_twins(cluster, "cg-off-a", "cg-off-b", "--delete-offsets", "--topic", f"{TOPIC}:0,1")
    assert "Request succeed for deleting offsets" in done and done.count("Successful") == 2
    described = same_on_twins(cluster, "cg-off-a", "cg-off-b", "--describe")
    assert [line.split()[2] for line in described.splitlines()[2:]] == ["2"]


def test_delete_groups(cluster: LocalCluster, groups: Consumer) -> None:
    assert "GroupNotEmptyException" in same(cluster, "--delete", "--group", "cg-live")
    assert "was successful" in same_on_twins(cluster, "cg-del-a", "cg-del-b", "--delete")
    assert "GroupIdNotFoundException" in same_on_twins(cluster, "cg-del-a", "cg-del-b", "--delete")


def test_refused_command_lines_fail_before_connecting(cluster: LocalCluster) -> None:
    for args in (["--describe"], ["--list", "--group", "g"], ["--reset-offsets", "--group", "g", "--to-earliest"],
                 ["--delete-offsets", "--group", "g"]):
        done = ours(cluster, *args)
        assert done.returncode == 1 and done.stderr.strip(), args
