"""The two clusters a module compares: Apache Kafka 3.9's brokers and odradek's, of the same
shape and the same broker settings, on the test run's ZooKeeper (one chroot each).  Kafka's
starts first and alone (a JVM broker takes ~20 s to start on a loaded machine)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

from oracle.side import Side

from odradek.local.cluster import LocalCluster
from odradek.local.security import ADMIN, CLIENT_USER
from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.perf.kafka_ref import KafkaRefCluster
from support.cluster import unique_chroot

__all__ = ["ORACLE_SETTINGS", "cluster_pair"]

# Broker settings both clusters get, beyond a local cluster's: no wait before a new group's
# first rebalance (Kafka's 3 s would only slow the group cases down).
ORACLE_SETTINGS = {"group.initial.rebalance.delay.ms": "0"}


@contextlib.contextmanager
def cluster_pair(zookeeper: EmbeddedZooKeeper, directory: Path, brokers: int, *,
                 overrides: Mapping[str, str] | None = None, security: str | None = None
                 ) -> Iterator[tuple[Side, Side]]:
    """(Kafka's side, odradek's side), each a cluster of ``brokers`` with ``overrides``, warmed up
    (internal topics created); with ``security`` each side's connections log in as the
    unprivileged ``client`` user of its cluster.  Both are stopped on exit."""
    settings = {**ORACLE_SETTINGS, **(overrides or {})}
    kafka = KafkaRefCluster(directory / "kafka", brokers, zookeeper_connect=unique_chroot(zookeeper, "oracle-kafka"),
                            overrides=settings, security=security)
    odradek = LocalCluster(directory / "odradek", brokers, zookeeper_connect=unique_chroot(zookeeper, "oracle"),
                           overrides=settings, security=security)
    with contextlib.ExitStack() as stack:
        for cluster in (kafka, odradek):
            stack.callback(cluster.stop)
            cluster.start(timeout_s=240)
        kafka_side, odradek_side = (
            Side(name, cluster, login=_login(cluster, CLIENT_USER), admin_login=_login(cluster, ADMIN))
            for name, cluster in (("kafka", kafka), ("odradek", odradek)))
        for side in (kafka_side, odradek_side):
            side.warm_up()
        yield kafka_side, odradek_side


def _login(cluster: LocalCluster, name: str) -> tuple[str, str] | None:
    if cluster.security is None:
        return None
    user = cluster.security.users[name]
    return user.name, user.password
