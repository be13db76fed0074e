"""Clusters the tests start, the ``odradek`` command, and what ZooKeeper says about them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kazoo.exceptions import NoNodeError

from odradek.local.cluster import BrokerProcess, LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.zk.zk_data import ControllerEpochZNode, ControllerZNode, TopicPartitionStateZNode

__all__ = [
    "ClusterFactory",
    "JbodCluster",
    "controller_of",
    "current_controller",
    "partition_state",
    "run_kafka_tool",
    "run_odradek",
    "unique_chroot",
    "zk_json",
]


def unique_chroot(zookeeper: EmbeddedZooKeeper, prefix: str) -> str:
    """A connect string with a chroot no other test uses."""
    return f"{zookeeper.connect_string}/{prefix}-{uuid.uuid4().hex[:12]}"


def run_kafka_tool(project: str, main_class: str, *args: str, timeout: float = 120,
                   input: str | None = None) -> subprocess.CompletedProcess[str]:
    """One of Kafka's own command-line tools (``main_class``, e.g. ``kafka.admin.LogDirsCommand``)
    from the jars of ``jvm/<project>`` (``kafka-2.8``, ...), ``input`` on its stdin; the test is
    skipped without them."""
    from odradek.local.zookeeper import find_java
    from odradek.perf.kafka_ref import KafkaRefError, jvm_classpath

    try:
        classpath = os.pathsep.join(map(str, jvm_classpath(project)))
    except KafkaRefError as e:
        pytest.skip(f"Kafka's jars are not here: {e}")
    return subprocess.run([find_java(), "-cp", classpath, main_class, *args], capture_output=True, text=True,
                          timeout=timeout, input=input, stdin=None if input is not None else subprocess.DEVNULL)


def run_odradek(*args: str, timeout: float = 120, env: dict[str, str] | None = None,
                input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real ``odradek`` command in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args], capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})}, input=input, stdin=None if input is not None else subprocess.DEVNULL,
    )


class ClusterFactory:
    """Starts clusters of real broker processes, each in its own ZooKeeper chroot and
    directory under ``base``; ``stop_all`` stops every one it started."""

    def __init__(self, zookeeper: EmbeddedZooKeeper, base: Path) -> None:
        self.zookeeper = zookeeper
        self.base = base
        self.clusters: list[LocalCluster] = []

    def __call__(self, num_brokers: int = 3, *, cluster_class: type[LocalCluster] = LocalCluster,
                 **kwargs: object) -> LocalCluster:
        directory = self.base / f"cluster{len(self.clusters)}"
        cluster = cluster_class(directory, num_brokers, zookeeper_connect=unique_chroot(self.zookeeper, "c"),
                                **kwargs)  # type: ignore[arg-type]
        self.clusters.append(cluster)
        cluster.start()
        return cluster

    def stop_all(self) -> None:
        for cluster in self.clusters:
            cluster.stop()

    def log_tails(self, lines: int = 40) -> str:
        """The last ``lines`` of every broker's server.log, for a failed test's report."""
        out = []
        for cluster in self.clusters:
            for broker_id, broker in cluster.brokers.items():
                log = broker.log_path
                tail = log.read_text(errors="replace").splitlines()[-lines:] if log.exists() else ["(no log)"]
                out.append(f"--- {cluster.dir} broker {broker_id}\n" + "\n".join(tail))
        return "\n".join(out)


class JbodCluster(LocalCluster):
    """A LocalCluster whose brokers each have two log directories, ``data-a`` and ``data-b``."""

    def log_dirs(self, broker_id: int) -> list[Path]:
        home = self.brokers[broker_id].config_path.parent
        return [home / "data-a", home / "data-b"]

    def broker_properties(self, broker: BrokerProcess) -> dict[str, str]:
        return {**super().broker_properties(broker),
                "log.dirs": ",".join(map(str, self.log_dirs(broker.broker_id)))}


def controller_of(cluster: LocalCluster) -> tuple[int, int]:
    """(controller broker id, controller epoch) as ZooKeeper says."""
    current = current_controller(cluster)
    assert current is not None, "no controller"
    return current


def current_controller(cluster: LocalCluster) -> tuple[int, int] | None:
    """(controller broker id, controller epoch), or None while no broker holds /controller
    (its node vanishes when the controller dies, also between two reads)."""
    zk = cluster.zk_client()
    try:
        data, _ = zk.get(ControllerZNode.path)
    except NoNodeError:
        return None
    epoch, _ = zk.get(ControllerEpochZNode.path)
    broker_id = ControllerZNode.decode(data)
    assert broker_id is not None, f"unreadable {ControllerZNode.path}: {data!r}"
    return broker_id, ControllerEpochZNode.decode(epoch)


def zk_json(cluster: LocalCluster, path: str) -> dict | None:
    """The znode's JSON, or None when it does not exist (the controller may delete it at any moment)."""
    try:
        return json.loads(cluster.zk_client().get(path)[0])
    except NoNodeError:
        return None


def partition_state(cluster: LocalCluster, topic: str, partition: int) -> dict | None:
    """The partition's leader and ISR znode (``/brokers/topics/<t>/partitions/<p>/state``)."""
    return zk_json(cluster, TopicPartitionStateZNode.path(topic, partition))
