"""``odradek topics --zookeeper``: the topic service over ZooKeeper (Kafka's
TopicCommand.ZookeeperTopicService), a thin layer over AdminZkClient.

The command writes znodes and leaves the rest to the controller: a created topic's
partitions come online, and a deleted topic goes away, after the command has returned.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

from odradek.admin.topic_command import TopicDeletion, TopicListing
from odradek.zk.admin_zk_client import AdminZkClient, RackAwareMode, TopicDescription
from odradek.zk.client import KafkaZkClient

__all__ = ["ZookeeperTopicService", "zookeeper_topic_service"]

SESSION_TIMEOUT_MS = 30_000
CONNECTION_TIMEOUT_MS = 10_000


class ZookeeperTopicService:
    """The TopicService of ``--zookeeper``."""

    def __init__(self, admin: AdminZkClient) -> None:
        self.admin = admin

    async def list_topics(self) -> TopicListing:
        names, marked = await self.admin.list_topics()
        return TopicListing(tuple(names), frozenset(marked))

    async def describe_topics(self, names: Sequence[str]) -> list[TopicDescription]:
        return await self.admin.describe_topics(names)

    async def live_broker_ids(self) -> set[int]:
        return await self.admin.live_broker_ids()

    async def create_topic(self, topic: str, partitions: int | None, replication_factor: int | None,
                           assignment: Mapping[int, Sequence[int]] | None, config: Mapping[str, str],
                           rack_aware_mode: RackAwareMode) -> None:
        await self.admin.create_topic(topic, partitions, replication_factor, assignment=assignment,
                                      config=config, rack_aware_mode=rack_aware_mode)

    async def alter_topic_config(self, topic: str, to_set: Mapping[str, str], to_delete: Sequence[str]) -> None:
        # /config/topics/<t> holds every override: write the merged whole (Kafka's changeTopicConfig).
        described = await self.admin.describe_topics([topic])
        current = described[0].config if described else {}
        merged = {k: v for k, v in {**current, **to_set}.items() if k not in to_delete}
        await self.admin.alter_topic_config(topic, merged)

    async def create_partitions(self, topic: str, count: int, assignment: Mapping[int, Sequence[int]] | None,
                                rack_aware_mode: RackAwareMode) -> None:
        await self.admin.add_partitions(topic, count, assignment, rack_aware_mode=rack_aware_mode)

    async def delete_topic(self, topic: str) -> TopicDeletion:
        return TopicDeletion.MARKED if await self.admin.delete_topic(topic) else TopicDeletion.ALREADY_MARKED


@asynccontextmanager
async def zookeeper_topic_service(connect: str) -> AsyncIterator[ZookeeperTopicService]:
    """A ZookeeperTopicService on a new ZooKeeper session to ``connect``, closed on exit;
    raises ZkConnectionError if ZooKeeper cannot be reached."""
    zk = KafkaZkClient(connect, session_timeout_ms=SESSION_TIMEOUT_MS, connection_timeout_ms=CONNECTION_TIMEOUT_MS)
    await zk.start()
    try:
        yield ZookeeperTopicService(AdminZkClient(zk))
    finally:
        await zk.close()
