"""Metadata (key 3): brokers, controller and partition leadership from the metadata cache."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from odradek.broker.apis.authorization import (
    authorized_names,
    authorized_operations,
    cluster_authorized,
)
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.common import INTERNAL_TOPICS, validate_topic_name
from odradek.net.server import CloseConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import (
    ErrorCode,
    InvalidTopicError,
    KafkaError,
    TopicAlreadyExistsError,
)
from odradek.security.acls import Operation, ResourceType

if TYPE_CHECKING:
    from odradek.broker.context import MetadataContext
    from odradek.net.server import Request, Response

log = logging.getLogger(__name__)

_OMITTED = -2147483648  # authorized operations not asked for
# Kafka's AclOperation codes of the operations a TOPIC resource supports (KIP-430).
_TOPIC_OPERATION_CODES = {Operation.READ: 3, Operation.WRITE: 4, Operation.CREATE: 5, Operation.DELETE: 6,
                          Operation.ALTER: 7, Operation.DESCRIBE: 8, Operation.DESCRIBE_CONFIGS: 10,
                          Operation.ALTER_CONFIGS: 11}


@api(ApiKey.METADATA, "Metadata", 0, 12)
async def handle_metadata(broker: MetadataContext, request: Request) -> Response:
    body = decode_body(request)
    version = request.api_version
    cache = broker.metadata_cache
    initialized = await cache.wait_initialized()
    if body.topics is None or (version == 0 and not body.topics):
        if not initialized:
            # An empty list would tell the client every topic it knows is gone (librdkafka then
            # fails produce() with "Unknown topic"); let it ask another broker instead.
            raise CloseConnection("asked for all topics before the controller sent any metadata")
        # KafkaApis.handleTopicMetadataRequest: all topics means those the principal may Describe.
        wanted = cache.topics()
        if broker.authorizer is not None:
            may_describe = authorized_names(broker, request, Operation.DESCRIBE, ResourceType.TOPIC, wanted)
            wanted = [t for t in wanted if t in may_describe]
        explicit = False
    else:
        wanted = [t.name for t in body.topics if t.name is not None]
        explicit = True
    # Metadata v12 (KIP-516): a request naming any topic id asks by id and its names are ignored
    # (Java clients send "" beside an id); an unknown id is answered UNKNOWN_TOPIC_ID.
    by_id: dict[str, uuid.UUID] = {}
    unknown_ids: list[uuid.UUID] = []
    topic_ids = [t.topic_id for t in body.topics or () if getattr(t, "topic_id", None) and t.topic_id.int]
    if topic_ids:
        wanted = []
        for topic_id in topic_ids:
            name = cache.topic_name(topic_id)
            if name is None:
                unknown_ids.append(topic_id)
            else:
                wanted.append(name)
                by_id[name] = topic_id
    allow_auto = version < 4 or getattr(body, "allow_auto_topic_creation", True)
    created: set[str] = set()
    errors: dict[str, ErrorCode] = {}
    if explicit:
        # Named topics without Describe are refused whether they exist or not (so existence does
        # not leak); auto-creating one needs Create on the cluster or on the topic.
        may_describe = authorized_names(broker, request, Operation.DESCRIBE, ResourceType.TOPIC, wanted)
        may_create: set[str] | None = None
        for topic in wanted:
            if topic not in may_describe:
                errors[topic] = ErrorCode.topic_authorization_failed
                continue
            if cache.contains_topic(topic) or topic in by_id:
                continue
            if not initialized:
                # The controller has not told us about any topic yet: "try again", not "no such topic".
                errors[topic] = ErrorCode.leader_not_available
                continue
            try:
                validate_topic_name(topic)
            except InvalidTopicError:
                errors[topic] = ErrorCode.invalid_topic_exception
                continue
            if allow_auto and broker.config["auto.create.topics.enable"]:
                if may_create is None:
                    may_create = (set(wanted) if cluster_authorized(broker, request, Operation.CREATE) else
                                  authorized_names(broker, request, Operation.CREATE, ResourceType.TOPIC, wanted))
                if topic not in may_create:
                    errors[topic] = ErrorCode.topic_authorization_failed
                    continue
                errors[topic] = await _auto_create(broker, topic)
                created.add(topic)
            else:
                errors[topic] = ErrorCode.unknown_topic_or_partition
    include_operations = version >= 8 and body.include_topic_authorized_operations
    return respond(request, _response(broker, request, wanted, errors, include_operations, by_id, unknown_ids))


async def _auto_create(broker: MetadataContext, topic: str) -> ErrorCode:
    """Kafka's auto topic creation: default partitions and replication factor; the client is
    told LEADER_NOT_AVAILABLE and asks again once the controller has brought it online."""
    try:
        await broker.topic_admin.create_topic(
            topic, broker.config["num.partitions"], broker.config["default.replication.factor"])
        log.info("Auto-created topic %s", topic)
    except TopicAlreadyExistsError:
        pass
    except KafkaError as e:
        log.info("Could not auto-create topic %s: %s", topic, e)
        return e.code
    return ErrorCode.leader_not_available


def _response(broker: MetadataContext, request: Request, topics: list[str], errors: dict[str, ErrorCode],
              include_operations: bool, by_id: dict[str, uuid.UUID], unknown_ids: list[uuid.UUID]) -> object:
    version = request.api_version
    m = response_module(ApiKey.METADATA, version)
    cache = broker.metadata_cache
    listener = request.connection.listener
    brokers = tuple(
        build(m.MetadataResponseBroker, node_id=broker_id, host=host, port=port, rack=rack)
        for broker_id, host, port, rack in cache.brokers_for_listener(listener))
    alive = set(cache.alive_brokers)
    topic_entries = []
    for topic in topics:
        # KafkaApis: every topic of the answer gets the operations allowed on it when asked.
        operations = (authorized_operations(broker, request, ResourceType.TOPIC, topic, _TOPIC_OPERATION_CODES)
                      if include_operations else _OMITTED)
        if topic in errors:
            # A topic asked for by id is refused by id (ids are not secret; names may be).
            topic_entries.append(build(m.MetadataResponseTopic, error_code=errors[topic],
                                       name=None if topic in by_id else topic, topic_id=by_id.get(topic),
                                       is_internal=False, partitions=(), topic_authorized_operations=operations))
            continue
        partitions = []
        for p, meta in sorted(cache.partitions_of(topic).items()):
            if meta.leader < 0 or meta.leader not in alive:
                error = ErrorCode.leader_not_available
            elif any(r not in alive for r in meta.replicas) and version == 0:
                error = ErrorCode.replica_not_available
            else:
                error = ErrorCode.none
            partitions.append(build(
                m.MetadataResponsePartition, error_code=error, partition_index=p,
                leader_id=meta.leader if meta.leader in alive else -1, leader_epoch=meta.leader_epoch,
                replica_nodes=meta.replicas, isr_nodes=meta.isr, offline_replicas=meta.offline_replicas))
        topic_entries.append(build(
            m.MetadataResponseTopic, error_code=ErrorCode.none, name=topic, topic_id=cache.topic_id(topic),
            is_internal=topic in INTERNAL_TOPICS, partitions=tuple(partitions),
            topic_authorized_operations=operations))
    topic_entries += [build(m.MetadataResponseTopic, error_code=ErrorCode.unknown_topic_id, name=None, topic_id=topic_id,
                            is_internal=False, partitions=(), topic_authorized_operations=_OMITTED)
                      for topic_id in unknown_ids]
    controller = cache.controller_id if cache.controller_id is not None else -1
    return build(
        m.MetadataResponse, throttle_time_ms=0, brokers=brokers, cluster_id=broker.cluster_id,
        controller_id=controller, topics=tuple(topic_entries), cluster_authorized_operations=_OMITTED,
        error_code=ErrorCode.none)
