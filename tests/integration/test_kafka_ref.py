"""Apache Kafka's own brokers (odradek.perf.kafka_ref): they start on their ZooKeeper or on a
shared one, serve confluent-kafka clients, survive a killed broker, and leave no process behind."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.perf.harness import create_topic_admin
from odradek.perf.kafka_ref import (
    KafkaRefCluster,
    KafkaRefError,
    jvm_cache,
    jvm_classpath,
    jvm_settings,
)
from support import consume_all, create_topic, partition_state, produce, unique_chroot, wait_until


def test_jars_fetched_for_another_pom_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fetched = jvm_cache()
    (tmp_path / "kafka-3.9" / "lib").mkdir(parents=True)
    (tmp_path / "kafka-3.9" / "lib" / "kafka_2.13-3.9.0.jar").write_bytes(b"")
    (tmp_path / "pom.xml").write_bytes((fetched / "pom.xml").read_bytes())
    (tmp_path / "kafka-3.9" / "pom.xml").write_text("<project>an older pin</project>")
    monkeypatch.setenv("ODRADEK_JVM_CACHE", str(tmp_path))
    with pytest.raises(KafkaRefError, match=re.escape("fetched for another jvm/kafka-3.9/pom.xml")):
        jvm_classpath("kafka-3.9")
    with pytest.raises(KafkaRefError, match=re.escape("no jars of jvm/kafka-2.8")):
        jvm_classpath("kafka-2.8")


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def round_trip(cluster: KafkaRefCluster, topic: str, count: int, first: int = 0) -> None:
    """Produce ``count`` records with acks=all and read every record of the topic back."""
    records = [(None, f"k{i}".encode(), f"v{i}".encode()) for i in range(first, first + count)]
    produce(cluster.bootstrap_servers, topic, records)
    read = consume_all(cluster.bootstrap_servers, topic, 1, first + count)
    assert [m.value() for m in read] == [f"v{i}".encode() for i in range(first + count)]


@pytest.mark.parametrize("version", ["3.9", "2.8"])
def test_one_broker_on_its_own_zookeeper(tmp_path: Path, version: str) -> None:
    with KafkaRefCluster(tmp_path, 1, version=version) as cluster:
        assert cluster.kafka_version.startswith(version + ".")
        assert "-Xmx1G -Xms1G" in jvm_settings() and "-XX:+UseG1GC" in jvm_settings()
        pids = [cluster.brokers[0].pid, cluster.zookeeper.pid if cluster.zookeeper else None]
        # CreateTopics, as a benchmark does (support's create_topic asks Metadata v12, which 2.8 lacks).
        create_topic_admin(cluster.bootstrap_servers, "one", 1, 1)
        round_trip(cluster, "one", 50)
        assert (tmp_path / "broker-0" / "data" / "one-0").is_dir()
    assert all(pid is not None and gone(pid) for pid in pids)


@pytest.mark.slow
def test_three_brokers_survive_a_killed_broker(zookeeper: EmbeddedZooKeeper, tmp_path: Path) -> None:
    chroot = unique_chroot(zookeeper, "kafka")
    # 2.8's inter-broker protocol, as in a cluster that mixes Kafka and odradek brokers.
    cluster = KafkaRefCluster(tmp_path, 3, zookeeper_connect=chroot,
                              overrides={"min.insync.replicas": "2", "inter.broker.protocol.version": "2.8"})
    with cluster:
        config_dump = (tmp_path / "broker-0" / "server.log").read_text()  # KafkaConfig's, at start
        assert re.search(r"^\s+inter\.broker\.protocol\.version = 2\.8$", config_dump, re.MULTILINE)
        pids = {b.broker_id: b.pid for b in cluster.brokers.values()}
        create_topic(cluster, "orders", replication_factor=3)
        round_trip(cluster, "orders", 100)

        cluster.kill_broker(1)
        wait_until(lambda: not cluster.zk_client().exists("/brokers/ids/1"), timeout=30,
                   message="broker 1's registration to expire")
        round_trip(cluster, "orders", 100, first=100)  # two replicas left: min.insync.replicas holds

        cluster.start_broker(1)
        assert cluster.brokers[1].pid != pids[1]
        pids[-1] = cluster.brokers[1].pid
        wait_until(lambda: sorted(partition_state(cluster, "orders", 0)["isr"]) == [0, 1, 2], timeout=60,
                   message="broker 1 back in the ISR")
        create_topic(cluster, "after", replication_factor=3)  # needs all three again
        round_trip(cluster, "after", 10)
    assert all(pid is not None and gone(pid) for pid in pids.values())
