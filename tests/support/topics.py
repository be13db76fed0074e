"""Topics on a test cluster: created (and awaited) through ZooKeeper as ``odradek topics
--zookeeper`` does, their configs altered the same way, and their end offsets read."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence

from confluent_kafka import Consumer, TopicPartition

from odradek.local.cluster import LocalCluster
from odradek.zk.admin_zk_client import AdminZkClient
from odradek.zk.client import KafkaZkClient
from support.waiting import wait_until
from support.wire import PartitionInfo, address_of, partitions_of

__all__ = ["alter_topic_config", "create_topic", "end_offsets", "unique_topic"]


def unique_topic(prefix: str) -> str:
    """A topic name no other test uses (for clusters that tests share)."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(cluster: LocalCluster, topic: str, partitions: int = 1, replication_factor: int = 3,
                 config: Mapping[str, str] | None = None, *,
                 assignment: Sequence[Sequence[int]] | None = None) -> dict[int, PartitionInfo]:
    """Create a topic over ZooKeeper (``assignment``, when given, places partition ``i`` on
    ``assignment[i]`` and overrides ``partitions`` and ``replication_factor``) and wait until
    every running broker's own metadata shows each partition with a leader and a full ISR, so
    whichever broker a client asks knows it; returns that metadata."""
    placed = None if assignment is None else {p: list(replicas) for p, replicas in enumerate(assignment)}
    _with_zk_admin(cluster, lambda admin: admin.create_topic(
        topic, partitions, replication_factor, assignment=placed, config=dict(config or {})))
    count = partitions if placed is None else len(placed)
    wanted = {p: replication_factor for p in range(count)} if placed is None else {
        p: len(replicas) for p, replicas in placed.items()}

    security = cluster.client_security()  # the admin's, on a secure cluster

    def ready() -> dict[int, PartitionInfo] | None:
        seen = None
        for broker_id, broker in cluster.brokers.items():
            if not broker.alive:
                continue
            info = partitions_of(address_of(cluster, broker_id), topic, security=security)
            if info is None or {p: len(i.replicas) for p, i in info.items()} != wanted or any(
                    p.leader < 0 or set(p.isr) != set(p.replicas) for p in info.values()):
                return None
            if seen is not None and info != seen:
                return None
            seen = info
        return seen

    return wait_until(ready, timeout=60, message=f"leaders and full ISRs for {topic}")  # type: ignore[return-value]


def alter_topic_config(cluster: LocalCluster, topic: str, config: Mapping[str, str]) -> None:
    """Replace a topic's config overrides over ZooKeeper (brokers apply them as they see the change)."""
    _with_zk_admin(cluster, lambda admin: admin.alter_topic_config(topic, config))


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's log end offset (its high watermark, as ListOffsets(latest) with
    read_uncommitted isolation answers it), asked of its leader."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "odradek-tests-end-offsets",
                         "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


def _with_zk_admin(cluster: LocalCluster, action: Callable[[AdminZkClient], Awaitable[object]]) -> None:
    async def run() -> None:
        zk = KafkaZkClient(cluster.zookeeper_connect, session_timeout_ms=30000)
        await zk.start()
        try:
            await action(AdminZkClient(zk))
        finally:
            await zk.close()

    asyncio.run(run())
