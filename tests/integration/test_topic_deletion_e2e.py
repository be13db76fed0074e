"""Topic deletion end to end (Kafka's TopicDeletionManager): markers, StopReplica(delete),
renamed directories removed after file.delete.delay.ms, brokers that are down,
delete.topic.enable=false."""

from __future__ import annotations

import re

from confluent_kafka import Producer

from odradek.local.cluster import LocalCluster
from support import create_topic, run_odradek, wait_until

DELETE_DIR = re.compile(r"^(?P<tp>.+-\d+)\.[0-9a-f]{32}-delete$")


def delete(cluster: LocalCluster, topic: str) -> None:
    result = run_odradek("topics", "--zookeeper", cluster.zookeeper_connect, "--delete", "--topic", topic)
    assert result.returncode == 0, result.stderr


def data_dir(cluster: LocalCluster, broker_id: int):
    return cluster.brokers[broker_id].config_path.parent / "data"


def dirs(cluster: LocalCluster, broker_id: int, topic: str) -> tuple[list[str], list[str]]:
    """(live partition dirs, renamed -delete dirs) of ``topic`` on a broker."""
    names = [p.name for p in data_dir(cluster, broker_id).iterdir() if p.is_dir()]
    live = sorted(n for n in names if re.fullmatch(rf"{re.escape(topic)}-\d+", n))
    deleting = sorted(n for n in names if (m := DELETE_DIR.match(n)) and m["tp"].rsplit("-", 1)[0] == topic)
    return live, deleting


def fill(cluster: LocalCluster, topic: str, partitions: int) -> None:
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"}) as p:
        for i in range(100):
            p.produce(topic, value=b"x" * 100, partition=i % partitions)
        assert p.flush(30) == 0


def test_delete_renames_then_removes_the_logs(cluster_factory) -> None:
    cluster = cluster_factory(3, overrides={"log.segment.delete.delay.ms": "3000"})
    create_topic(cluster, "doomed", 2, 3)
    fill(cluster, "doomed", 2)
    assert all(dirs(cluster, b, "doomed")[0] == ["doomed-0", "doomed-1"] for b in range(3))
    delete(cluster, "doomed")
    zk = cluster.zk_client()
    wait_until(lambda: not zk.exists("/brokers/topics/doomed"), message="znodes removed")
    assert not zk.exists("/config/topics/doomed") and not zk.exists("/admin/delete_topics/doomed")
    # At once: renamed to <topic>-<partition>.<uuid>-delete and no longer served.
    for b in range(3):
        live, deleting = dirs(cluster, b, "doomed")
        assert live == []
        assert sorted(DELETE_DIR.match(n)["tp"] for n in deleting) == ["doomed-0", "doomed-1"] or deleting == []
    # After file.delete.delay.ms: gone.
    wait_until(lambda: all(dirs(cluster, b, "doomed") == ([], []) for b in range(3)), timeout=30,
               message="delete dirs removed")
    def state_logs() -> str:
        return "".join((b.config_path.parent / "state-change.log").read_text() for b in cluster.brokers.values())

    wanted = [f"to {state}" for state in ("OfflineReplica", "ReplicaDeletionStarted", "ReplicaDeletionSuccessful",
                                          "NonExistentReplica", "NonExistentPartition")]
    wait_until(lambda: all(w in state_logs() for w in wanted), message="the deletion's transitions in the state-change log")


def test_restart_between_rename_and_removal_still_removes(cluster_factory) -> None:
    cluster = cluster_factory(2, overrides={"log.segment.delete.delay.ms": "600000"})
    create_topic(cluster, "restart-me", 1, 2)
    fill(cluster, "restart-me", 1)
    delete(cluster, "restart-me")
    wait_until(lambda: dirs(cluster, 1, "restart-me")[1] != [], message="renamed")
    cluster.stop_broker(1)
    # The restarted broker finds the -delete directory and schedules it; a short delay now.
    props = cluster.brokers[1].config_path
    props.write_text(props.read_text().replace("log.segment.delete.delay.ms=600000", "log.segment.delete.delay.ms=500"))
    cluster.start_broker(1)
    wait_until(lambda: dirs(cluster, 1, "restart-me") == ([], []), timeout=30, message="removed after restart")
    assert dirs(cluster, 0, "restart-me")[0] == []


def test_deletion_waits_for_a_dead_broker_and_completes_when_it_returns(cluster_factory) -> None:
    cluster = cluster_factory(3)
    zk = cluster.zk_client()
    create_topic(cluster, "patient", 1, 3)
    controller = int(__import__("json").loads(zk.get("/controller")[0])["brokerid"])
    down = next(b for b in range(3) if b != controller)
    cluster.kill_broker(down)
    wait_until(lambda: not zk.exists(f"/brokers/ids/{down}"), timeout=30, message="broker down")
    delete(cluster, "patient")
    live_brokers = [b for b in range(3) if b != down]
    wait_until(lambda: all(dirs(cluster, b, "patient")[0] == [] for b in live_brokers), message="live replicas deleted")
    assert zk.exists("/brokers/topics/patient")  # waiting for the dead broker's replica
    assert zk.exists("/admin/delete_topics/patient")
    controller_log = cluster.brokers[controller].config_path.parent / "state-change.log"
    wait_until(lambda: f"Changed state of replica {down} for partition patient-0 from OfflineReplica to "
                       "ReplicaDeletionIneligible" in controller_log.read_text(), message="ineligible replica")
    assert dirs(cluster, down, "patient")[0] == ["patient-0"]
    cluster.start_broker(down)
    wait_until(lambda: not zk.exists("/brokers/topics/patient"), timeout=60, message="deletion completed")
    wait_until(lambda: dirs(cluster, down, "patient")[0] == [], message="returned broker deleted its replica")


def test_delete_topic_disabled_keeps_the_topic(cluster_factory) -> None:
    cluster = cluster_factory(2, overrides={"delete.topic.enable": "false"})
    create_topic(cluster, "keeper", 1, 2)
    delete(cluster, "keeper")
    zk = cluster.zk_client()
    wait_until(lambda: not zk.exists("/admin/delete_topics/keeper"), message="marker cleared")
    assert zk.exists("/brokers/topics/keeper")
    assert all(dirs(cluster, b, "keeper")[0] == ["keeper-0"] for b in range(2))
    listed = run_odradek("topics", "--zookeeper", cluster.zookeeper_connect, "--list").stdout.splitlines()
    assert "keeper" in listed
