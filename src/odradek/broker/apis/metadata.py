"""Metadata (key 3): brokers, controller and partition leadership from the metadata cache.
Topics are named by name, or (v12) by id; the topics' and (v8-10) the cluster's authorized
operations (KIP-430) are given when asked for."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from odradek.broker.apis.authorization import (
    OMITTED_OPERATIONS,
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

_ZERO_UUID = uuid.UUID(int=0)



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
        topic_ids = [t.topic_id for t in body.topics if getattr(t, "topic_id", None) not in (None, _ZERO_UUID)]
        if version < 12 and (topic_ids or len(wanted) < len(body.topics)):
            # KafkaApis: v10-11 carry topic ids but may not use them (nor omit a name); the
            # whole request fails as MetadataRequest.getErrorResponse answers it.
            return respond(request, _invalid(request, body))
        if topic_ids:
            # KafkaApis (v12): topics named by id replace those named by name; an id this
            # broker does not know is UNKNOWN_TOPIC_ID, with no name.
            return respond(request, _by_topic_id(broker, request, body, topic_ids))
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
            if cache.contains_topic(topic):
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
    return respond(request, _response(broker, request, body, wanted, errors))


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


def _invalid(request: Request, body: Any) -> object:
    m = response_module(ApiKey.METADATA, request.api_version)
    return build(m.MetadataResponse, brokers=(), cluster_id=None, controller_id=-1, topics=tuple(
        build(m.MetadataResponseTopic, error_code=ErrorCode.invalid_request, name=t.name or "", topic_id=t.topic_id,
              is_internal=False, partitions=(), topic_authorized_operations=OMITTED_OPERATIONS)
        for t in body.topics), cluster_authorized_operations=OMITTED_OPERATIONS)


def _by_topic_id(broker: MetadataContext, request: Request, body: Any, topic_ids: list[uuid.UUID]) -> object:
    by_id = {topic_id: name for name, topic_id in broker.metadata_cache.topic_ids.items()}
    known = [by_id[i] for i in dict.fromkeys(topic_ids) if i in by_id]
    may_describe = authorized_names(broker, request, Operation.DESCRIBE, ResourceType.TOPIC, known)
    m = response_module(ApiKey.METADATA, request.api_version)
    unknown = tuple(build(m.MetadataResponseTopic, error_code=ErrorCode.unknown_topic_id, name=None, topic_id=i,
                          is_internal=False, partitions=(), topic_authorized_operations=OMITTED_OPERATIONS)
                    for i in dict.fromkeys(topic_ids) if i not in by_id)
    errors = {t: ErrorCode.topic_authorization_failed for t in known if t not in may_describe}
    return _response(broker, request, body, known, errors, leading=unknown, by_id=True)


def _response(broker: MetadataContext, request: Request, body: Any, topics: list[str],
              errors: dict[str, ErrorCode], leading: tuple[object, ...] = (), by_id: bool = False) -> object:
    """The answer for ``topics``; ``by_id``: they were asked for by id, so a refused one is
    named by its id alone (KafkaApis: ids are not secret, names may be)."""
    version = request.api_version
    m = response_module(ApiKey.METADATA, version)
    cache = broker.metadata_cache
    listener = request.connection.listener
    brokers = tuple(
        build(m.MetadataResponseBroker, node_id=broker_id, host=host, port=port, rack=rack)
        for broker_id, host, port, rack in cache.brokers_for_listener(listener))
    alive = set(cache.alive_brokers)
    with_operations = getattr(body, "include_topic_authorized_operations", False)

    def operations(topic: str) -> int:
        # KIP-430: asked for, each topic the principal may describe gets its operations.
        if not with_operations or errors.get(topic) == ErrorCode.topic_authorization_failed:
            return OMITTED_OPERATIONS
        return authorized_operations(broker, request, ResourceType.TOPIC, topic)

    topic_entries = list(leading)
    for topic in topics:
        if topic in errors:
            topic_entries.append(build(m.MetadataResponseTopic, error_code=errors[topic],
                                       name=None if by_id else topic, topic_id=cache.topic_id(topic) if by_id else None,
                                       is_internal=topic in INTERNAL_TOPICS and not by_id, partitions=(),
                                       topic_authorized_operations=operations(topic)))
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
            topic_authorized_operations=operations(topic)))
    controller = cache.controller_id if cache.controller_id is not None else -1
    cluster_operations = OMITTED_OPERATIONS
    if getattr(body, "include_cluster_authorized_operations", False):  # v8-10
        cluster_operations = (authorized_operations(broker, request, ResourceType.CLUSTER)
                              if cluster_authorized(broker, request, Operation.DESCRIBE) else 0)
    return build(
        m.MetadataResponse, throttle_time_ms=0, brokers=brokers, cluster_id=broker.cluster_id,
        controller_id=controller, topics=tuple(topic_entries), cluster_authorized_operations=cluster_operations,
        error_code=ErrorCode.none)
