"""FindCoordinator's answer for a key, and the creation of the internal topic behind it
(``__consumer_offsets`` for groups, ``__transaction_state`` for transactional ids), as
Kafka's ``KafkaApis.getOrCreateInternalTopic`` does for both: the coordinator of a key is the
leader of its partition; a topic that does not exist yet is created (not while fewer
brokers are alive than its replication factor) and the client is told to retry."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from odradek.protocol.errors import ErrorCode, KafkaError, TopicAlreadyExistsError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from odradek.broker.context import InternalTopicsContext
    from odradek.net.server import Request

log = logging.getLogger(__name__)

__all__ = ["CoordinatorAnswer", "InternalTopic", "find_coordinator"]

# (error, message, node id, host, port)
CoordinatorAnswer = tuple[ErrorCode, "str | None", int, str, int]


@dataclass(frozen=True, slots=True)
class InternalTopic:
    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]
    description: str                # as Kafka's log line names it: "offsets topic"
    replication_factor_key: str     # the config key that sets replication_factor


class CreationHolder(Protocol):
    # The topic's creation while one is under way (one per broker, shared by requests).
    topic_creation: asyncio.Future[Any] | None


async def find_coordinator(broker: InternalTopicsContext, request: Request, topic: InternalTopic, partition: int,
                           holder: CreationHolder) -> CoordinatorAnswer:
    """The leader of ``partition`` of ``topic`` at the listener the request came in on."""
    def failed(error: ErrorCode) -> CoordinatorAnswer:
        return error, None, -1, "", -1

    cache = broker.metadata_cache
    if not await cache.wait_initialized():
        return failed(ErrorCode.coordinator_not_available)
    if not cache.contains_topic(topic.name):
        await _create(broker, topic, holder)
        return failed(ErrorCode.coordinator_not_available)
    meta = cache.partition(topic.name, partition)
    if meta is None or meta.leader < 0:
        return failed(ErrorCode.coordinator_not_available)
    endpoint = cache.endpoint(meta.leader, request.connection.listener)
    if endpoint is None:
        return failed(ErrorCode.coordinator_not_available)
    return ErrorCode.none, None, meta.leader, endpoint[0], endpoint[1]


async def _create(broker: InternalTopicsContext, topic: InternalTopic, holder: CreationHolder) -> None:
    alive = len(broker.metadata_cache.alive_brokers)
    if alive < topic.replication_factor:
        log.error("Number of alive brokers '%d' does not meet the required replication factor '%d' for the "
                  "%s (configured via '%s'). This error can be ignored if the cluster is starting up and not all "
                  "brokers are up yet.", alive, topic.replication_factor, topic.description,
                  topic.replication_factor_key)
        return

    async def create() -> None:
        try:
            await broker.topic_admin.create_topic(topic.name, topic.partitions, topic.replication_factor,
                                                  config=dict(topic.configs))
        except TopicAlreadyExistsError:
            return
        except KafkaError as e:
            log.warning("Could not create topic %s: %s", topic.name, e)
            return
        log.info("Created topic %s with %d partitions and replication factor %d", topic.name, topic.partitions,
                 topic.replication_factor)

    if holder.topic_creation is None or holder.topic_creation.done():
        holder.topic_creation = asyncio.ensure_future(create())
    await asyncio.shield(holder.topic_creation)
