"""A 3-member ZooKeeper ensemble under 3 brokers (real JVMs and broker processes).

Losing one member: every broker keeps its session (kazoo moves to another member), and the
time it takes is printed. Losing the majority: brokers keep serving produce and fetch on
their current leaders, the controller changes nothing, and all recovers with the quorum.
The state-change log says what happened."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.local.cluster import CLUSTER_JSON, LocalCluster
from odradek.local.zookeeper_failover import broker_sessions, kill_busiest_member, session_lines
from odradek.zk.zk_data import TopicPartitionStateZNode
from support import (
    consume_all,
    controller_of,
    create_topic,
    partition_state,
    produce,
    unique_topic,
    wait_until,
)


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("ensemble"), 3, zookeepers=3)
    with cluster:
        yield cluster


def _log(cluster: LocalCluster, broker_id: int) -> Path:
    return cluster.brokers[broker_id].config_path.parent / "state-change.log"


def _round_trip(cluster: LocalCluster, topic: str, partitions: int, count: int, already: int) -> None:
    produce(cluster.bootstrap_servers, topic, [(i % partitions, None, b"v%d" % i) for i in range(count)])
    assert len(consume_all(cluster.bootstrap_servers, topic, partitions, already + count)) == already + count


def test_cluster_json_lists_every_member(ensemble: LocalCluster) -> None:
    data = json.loads((ensemble.dir / CLUSTER_JSON).read_text())
    assert data["zookeeper"] == ",".join(f"127.0.0.1:{zk.port}" for zk in ensemble.zookeepers)
    assert len(data["zookeeper"].split(",")) == 3
    assert [(m["id"], m["port"], m["pid"]) for m in data["zookeepers"]] == [
        (zk.server_id, zk.port, zk.pid) for zk in ensemble.zookeepers]
    assert sorted(zk.mode() or "" for zk in ensemble.zookeepers) == ["follower", "follower", "leader"]


def test_losing_one_member_keeps_every_session(ensemble: LocalCluster) -> None:
    topic = unique_topic("zk-one")
    create_topic(ensemble, topic, partitions=3)
    _round_trip(ensemble, topic, 3, 30, 0)
    failover = kill_busiest_member(ensemble)
    try:
        assert failover.moved, "no broker was connected to the busiest member"
        for broker_id, seconds in sorted(failover.moved.items()):
            print(f"ZooKeeper failover: broker {broker_id} resumed session 0x{failover.sessions[broker_id]:x} "
                  f"{seconds * 1000:.0f} ms after member {failover.member_id} was killed")
        assert broker_sessions(ensemble) == failover.sessions  # same sessions own /brokers/ids/<id>
        _round_trip(ensemble, topic, 3, 30, 30)
        for broker_id in failover.moved:
            lost = session_lines(_log(ensemble, broker_id), 0, "ZooKeeper connection lost (was 127.0.0.1:")
            assert lost, f"broker {broker_id} did not log its lost connection"
    finally:
        ensemble.start_zookeeper(failover.member_id)
    assert ensemble.zookeepers[failover.member_id - 1].mode() in ("leader", "follower")


def test_losing_the_majority_freezes_the_controller_not_the_data(ensemble: LocalCluster) -> None:
    topic = unique_topic("zk-majority")
    create_topic(ensemble, topic, partitions=3, config={"min.insync.replicas": "2"})
    _round_trip(ensemble, topic, 3, 30, 0)
    controller, epoch = controller_of(ensemble)
    victim = next(b for b in ensemble.brokers if b != controller)
    led = {p: s for p in range(3) if (s := partition_state(ensemble, topic, p))["leader"] == victim}
    assert led, f"broker {victim} leads none of {topic}'s partitions"
    sessions = broker_sessions(ensemble)
    leader = next(zk for zk in ensemble.zookeepers if zk.mode() == "leader")
    doomed = [leader.server_id, next(zk.server_id for zk in ensemble.zookeepers if zk is not leader)]
    t0 = time.time()
    for member_id in doomed:
        ensemble.kill_zookeeper(member_id)
    restarted = False
    try:
        wait_until(lambda: session_lines(_log(ensemble, controller), t0,
                                         "ZooKeeper unreachable: no controller changes until it returns"),
                   timeout=20, message="the controller's line about ZooKeeper being unreachable")
        # No quorum: acks=all produce and fetch still work on the current leaders.
        _round_trip(ensemble, topic, 3, 30, 30)
        # A broker dies while ZooKeeper cannot notice: nothing may move until it can.
        ensemble.kill_broker(victim)
        quorum_back_earliest = time.time()
        for member_id in doomed:
            ensemble.start_zookeeper(member_id, wait=False)
        for member_id in doomed:
            ensemble.zookeepers[member_id - 1].wait_serving(60)
        restarted = True
        wait_until(lambda: all(zk.serving() for zk in ensemble.zookeepers), timeout=30, message="quorum")
        assert controller_of(ensemble) == (controller, epoch)
        # The dead broker's session is only now timed by the new quorum: its partitions are
        # still as they were (a leader move needs its session to expire first), or, on a slow
        # machine where the quorum came back a session timeout ago already, they moved no
        # sooner than a session timeout after the quorum could have come back.
        session_timeout_s = int(ensemble.overrides.get("zookeeper.session.timeout.ms", "18000")) / 1000
        for p, before in led.items():
            if partition_state(ensemble, topic, p) != before:
                _, stat = ensemble.zk_client().get(TopicPartitionStateZNode.path(topic, p))
                assert stat.mtime / 1000 >= quorum_back_earliest + session_timeout_s, (p, stat.mtime)
        # Every live broker kept its session through the outage.
        alive = {b: s for b, s in sessions.items() if b != victim}
        wait_until(lambda: {b: s for b, s in broker_sessions(ensemble).items() if b in alive} == alive,
                   timeout=20, message="the live brokers' sessions")
        # Then the usual path: the dead broker's session expires and its partitions move.
        wait_until(lambda: all(partition_state(ensemble, topic, p)["leader"] not in (victim, -1) for p in led),
                   timeout=40, message=f"leaders moved off broker {victim}")
        fresh = unique_topic("zk-after")
        assert create_topic(ensemble, fresh, partitions=2, replication_factor=2)
        produce(ensemble.bootstrap_servers, fresh, [(p, None, b"x") for p in (0, 1)])
        resumed = session_lines(_log(ensemble, controller), t0, f"ZooKeeper session 0x{sessions[controller]:x} resumed")
        assert resumed, "the controller did not log its session resumed"
        assert session_lines(_log(ensemble, controller), t0, "ZooKeeper reachable again: session kept")
    finally:
        if not restarted:
            for member_id in doomed:
                if not ensemble.zookeepers[member_id - 1].alive:
                    ensemble.start_zookeeper(member_id, wait=False)
        if not ensemble.brokers[victim].alive:
            ensemble.start_broker(victim)


def test_up_runs_a_three_member_ensemble(tmp_path: Path) -> None:
    directory = tmp_path / "up"
    proc = subprocess.Popen([sys.executable, "-m", "odradek", "up", "-n", "1", "--zookeepers", "3",
                             "--dir", str(directory)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: (directory / CLUSTER_JSON).exists(), timeout=90, message="cluster.json")
        data = json.loads((directory / CLUSTER_JSON).read_text())
        members = data["zookeepers"]
        assert [m["id"] for m in members] == [1, 2, 3]
        assert data["zookeeper"] == ",".join(f"{m['host']}:{m['port']}" for m in members)
        assert all(Path(m["dir"]).is_dir() and m["pid"] for m in members)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert b"ZooKeeper 3: 127.0.0.1:" in out
