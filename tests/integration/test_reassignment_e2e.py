"""Partition reassignment through /admin/reassign_partitions, and deletion of a topic whose
partitions are being reassigned (ineligible until the reassignment completes)."""

from __future__ import annotations

import json
import signal

from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.local.cluster import LocalCluster
from support import controller_of, create_topic, partition_state, run_odradek, wait_until


def assignment(cluster: LocalCluster, topic: str) -> dict:
    return json.loads(cluster.zk_client().get(f"/brokers/topics/{topic}")[0])


def replica_dir(cluster: LocalCluster, broker: int, topic: str):
    return cluster.brokers[broker].config_path.parent / "data" / f"{topic}-0"


def reassign(cluster: LocalCluster, tmp_path, topic: str, replicas: list[int], *flags: str):
    plan = tmp_path / f"{topic}-plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]}))
    return run_odradek("reassign-partitions", "--zookeeper", cluster.zookeeper_connect,
                       "--reassignment-json-file", str(plan), *flags)


def test_reassignment_moves_a_replica_and_keeps_the_data(cluster_factory, tmp_path) -> None:
    cluster = cluster_factory(3)
    controller, _ = controller_of(cluster)
    a, b = (x for x in range(3) if x != controller)
    create_topic(cluster, "moving", assignment=[[a, controller]])
    wait_until(lambda: (s := partition_state(cluster, "moving", 0)) is not None and s["leader"] == a)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"}) as p:
        for i in range(200):
            p.produce("moving", value=f"v{i}".encode(), partition=0)
        assert p.flush(30) == 0
    result = reassign(cluster, tmp_path, "moving", [b, controller], "--execute")
    assert result.returncode == 0, result.stderr
    assert "Successfully started partition reassignments for moving-0" in result.stdout
    assert f'"replicas":[{a},{controller}]' in result.stdout  # the rollback plan
    wait_until(lambda: assignment(cluster, "moving")["partitions"]["0"] == [b, controller]
               and not cluster.zk_client().exists("/admin/reassign_partitions"), timeout=60,
               message="reassignment complete")
    final = assignment(cluster, "moving")
    assert final["adding_replicas"] == {} and final["removing_replicas"] == {}
    state = partition_state(cluster, "moving", 0)
    assert sorted(state["isr"]) == sorted([b, controller])
    assert state["leader"] in (b, controller)
    wait_until(lambda: not replica_dir(cluster, a, "moving").exists(), message="removed replica deleted")
    verify = reassign(cluster, tmp_path, "moving", [b, controller], "--verify")
    assert verify.returncode == 0 and "Reassignment of partition moving-0 is complete." in verify.stdout
    got = []
    with Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "r", "enable.auto.commit": False}) as c:
        c.assign([TopicPartition("moving", 0, 0)])
        wait_until(lambda: got.extend(m.value() for m in c.consume(500, 0.5) if not m.error()) or len(got) >= 200,
                   message="the 200 records read back")
    assert got == [f"v{i}".encode() for i in range(200)]


def test_topic_being_reassigned_is_deleted_only_after_the_reassignment(cluster_factory, tmp_path) -> None:
    cluster = cluster_factory(3, overrides={"zookeeper.session.timeout.ms": "30000"})
    zk = cluster.zk_client()
    controller, _ = controller_of(cluster)
    a, b = (x for x in range(3) if x != controller)
    create_topic(cluster, "busy", assignment=[[a, controller]])
    wait_until(lambda: (s := partition_state(cluster, "busy", 0)) is not None and s["leader"] == a)
    # The target replica's broker is paused (still registered): it cannot catch up, so the
    # reassignment stays in progress until it resumes.
    cluster.signal_broker(b, signal.SIGSTOP)
    try:
        assert reassign(cluster, tmp_path, "busy", [b, controller], "--execute").returncode == 0
        wait_until(lambda: assignment(cluster, "busy").get("adding_replicas") == {"0": [b]}, message="phase 1")
        assert run_odradek("topics", "--zookeeper", cluster.zookeeper_connect, "--delete", "--topic",
                           "busy").returncode == 0
        log = cluster.brokers[controller].config_path.parent / "state-change.log"
        server_log = cluster.brokers[controller].log_path
        wait_until(lambda: "due to partition reassignment in progress" in server_log.read_text(),
                   message="deletion halted while reassigning")
        assert zk.exists("/brokers/topics/busy")
        assert zk.exists("/admin/delete_topics/busy")
    finally:
        cluster.signal_broker(b, signal.SIGCONT)
    wait_until(lambda: not zk.exists("/brokers/topics/busy"), timeout=90, message="deleted after the reassignment")
    wait_until(lambda: "Completed reassignment of partition busy-0" in log.read_text(), message="state-change log")


def test_bad_reassignment_plans_are_refused(cluster_factory, tmp_path) -> None:
    cluster = cluster_factory(2)
    create_topic(cluster, "fixed", assignment=[[0, 1]])
    for replicas, message in (([0, 0], "duplicate replicas"), ([7], "unknown broker id(s) [7]"), ([], "empty")):
        result = reassign(cluster, tmp_path, "fixed", replicas, "--execute")
        assert result.returncode != 0
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert not cluster.zk_client().exists("/admin/reassign_partitions")
    missing = reassign(cluster, tmp_path, "nosuch", [0], "--execute")
    assert missing.returncode != 0 and "does not exist" in missing.stderr
