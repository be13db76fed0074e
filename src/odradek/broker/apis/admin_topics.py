"""CreateTopics (key 19), DeleteTopics (key 20) and CreatePartitions (key 37).

The active controller answers them (any other broker: NOT_CONTROLLER for each topic, as
Kafka's KafkaApis in ZooKeeper mode; clients send them to the controller Metadata names).  The
work is a ZooKeeper write through :class:`AdminZkClient` (the same validation and placement as
``odradek topics --zookeeper``), after which the controller brings the partitions online or
deletes them.  As Kafka's DelayedCreatePartitions and
DelayedDeleteTopics do, the answer waits (up to the request's timeout) until this broker's
metadata cache shows the outcome — every partition with a live leader, or the topic gone — so
a client can use the result at once.  A timeout of 0 answers right after the write.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from odradek.broker.apis.authorization import authorized_names, cluster_authorized
from odradek.broker.apis.configs_describe import topic_config_entries
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import (
    ErrorCode,
    InvalidRequestError,
    KafkaError,
    UnknownTopicOrPartitionError,
)
from odradek.security.acls import Operation, ResourceType

if TYPE_CHECKING:
    from odradek.broker.context import TopicAdminContext
    from odradek.net.server import Request, Response

log = logging.getLogger(__name__)


_POLL_S = 0.02
_ZERO_UUID = uuid.UUID(int=0)

# (error code, message) of one topic; (ErrorCode.none, None) is success.
Outcome = tuple[ErrorCode, str | None]
_OK: Outcome = (ErrorCode.none, None)


def outcome_of(exc: Exception, what: str) -> Outcome:
    """Map an exception to a Kafka error at the API edge (unexpected ones are logged)."""
    if isinstance(exc, KafkaError):
        return exc.code, str(exc) or None
    log.exception("%s failed", what)
    return ErrorCode.unknown_server_error, f"{type(exc).__name__}: {exc}"


def _timeout_ms(body: Any) -> int:
    return int(body.timeout.total_seconds() * 1000)


async def await_metadata(broker: TopicAdminContext, done: Callable[[], bool], timeout_ms: int) -> bool:
    """Wait until ``done()`` holds for this broker's metadata cache; False on timeout.

    The cache changes only when an UpdateMetadata arrives, so re-checking after a short
    sleep is cheap (there is no listener hook on the cache to wake us instead)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    seen = -1
    while True:
        version = broker.metadata_cache.version
        if version != seen:
            if done():
                return True
            seen = version
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(_POLL_S, remaining))


def _partitions_online(broker: TopicAdminContext, topic: str, count: int) -> bool:
    cache = broker.metadata_cache
    parts = cache.partitions_of(topic)
    alive = cache.alive_brokers
    return all(p in parts and parts[p].leader >= 0 and parts[p].leader in alive for p in range(count))


async def _await_all(broker: TopicAdminContext, timeout_ms: int, pending: dict[str, Callable[[], bool]],
                     results: dict[str, Outcome], message: str) -> None:
    """Wait for every pending topic's condition; those still false at the deadline get
    REQUEST_TIMED_OUT."""
    if not pending or timeout_ms <= 0:
        return
    await await_metadata(broker, lambda: all(check() for check in pending.values()), timeout_ms)
    for topic, check in pending.items():
        if not check():
            results[topic] = (ErrorCode.request_timed_out, message)


def _duplicates(names: Iterable[str | None]) -> set[str | None]:
    return {name for name, n in Counter(names).items() if n > 1}


# ----------------------------------------------------------------------------- CreateTopics


@api(ApiKey.CREATE_TOPICS, "CreateTopics", 2, 7)
async def handle_create_topics(broker: TopicAdminContext, request: Request) -> Response:
    body = decode_body(request)
    if not broker.controller.is_active:
        m = response_module(ApiKey.CREATE_TOPICS, request.api_version)
        return respond(request, build(m.CreateTopicsResponse, topics=tuple(
            build(m.CreatableTopicResult, name=t.name, error_code=ErrorCode.not_controller, error_message=None,
                  topic_id=_ZERO_UUID, configs=()) for t in body.topics)))
    timeout_ms = _timeout_ms(body)
    duplicates = _duplicates(t.name for t in body.topics)
    # KafkaApis.handleCreateTopicsRequest: Create on the cluster allows every topic, else Create
    # on each topic; the new topic's configs are returned only with DescribeConfigs on it.
    names = [t.name for t in body.topics]
    may_create = (set(names) if cluster_authorized(broker, request, Operation.CREATE)
                  else authorized_names(broker, request, Operation.CREATE, ResourceType.TOPIC, names))
    may_describe_configs = authorized_names(broker, request, Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names)
    results: dict[str, Outcome] = {}
    created: dict[str, dict[int, list[int]]] = {}
    configs: dict[str, dict[str, str]] = {}
    for topic in body.topics:
        name = topic.name
        if name in results:
            continue
        if name in duplicates:
            results[name] = (ErrorCode.invalid_request, "Found multiple entries for this topic.")
            continue
        if name not in may_create:
            results[name] = (ErrorCode.topic_authorization_failed, "Authorization failed.")
            continue
        try:
            config, assignment = _creatable(topic)
            partitions = topic.num_partitions if topic.num_partitions != -1 else broker.config["num.partitions"]
            rf = (topic.replication_factor if topic.replication_factor != -1
                  else broker.config["default.replication.factor"])
            created[name] = await broker.topic_admin.create_topic(
                name, partitions, rf, assignment=assignment, config=config, validate_only=body.validate_only)
            configs[name] = config
            results[name] = _OK
            if not body.validate_only:
                log.info("Created topic %s with %d partitions (request from %s)", name, len(created[name]),
                         request.header.client_id)
        except Exception as e:
            results[name] = outcome_of(e, f"creating topic {name}")
    if not body.validate_only:
        pending = {name: (lambda n=name: _partitions_online(broker, n, len(created[n]))) for name in created}
        await _await_all(broker, timeout_ms, pending, results,
                         "Timed out waiting for the new partitions to get leaders; the topic was created.")
    m = response_module(ApiKey.CREATE_TOPICS, request.api_version)
    entries = []
    # One result per requested topic, as Kafka's multi-collection holds them: a topic named
    # twice is answered twice.
    for name in (t.name for t in body.topics):
        error, message = results[name]
        fields: dict[str, Any] = {"name": name, "error_code": error, "error_message": message,
                                  "topic_id": _ZERO_UUID, "configs": ()}
        if name not in may_describe_configs:
            # Kafka: without DescribeConfigs on a topic, its result (created or not) says so and
            # holds nothing of the topic: no id, counts or configs.
            fields["topic_config_error_code"] = ErrorCode.topic_authorization_failed
        elif name in created and error in (ErrorCode.none, ErrorCode.request_timed_out):
            assignment = created[name]
            fields["num_partitions"] = len(assignment)
            fields["replication_factor"] = len(assignment[min(assignment)])
            if request.api_version >= 5:
                fields["configs"] = tuple(
                    build(m.CreatableTopicConfigs, name=e.name, value=e.value, read_only=e.read_only,
                          config_source=e.source, is_sensitive=e.sensitive)
                    for e in topic_config_entries(broker.config, configs[name]))
            if not body.validate_only:
                fields["topic_id"] = broker.metadata_cache.topic_id(name)
        entries.append(build(m.CreatableTopicResult, **fields))
    return respond(request, build(m.CreateTopicsResponse, topics=tuple(entries)))


def _creatable(topic: Any) -> tuple[dict[str, str], dict[int, list[int]] | None]:
    """The configs and explicit assignment of one CreatableTopic, checked as Kafka does."""
    if topic.assignments and (topic.num_partitions != -1 or topic.replication_factor != -1):
        raise InvalidRequestError("Both numPartitions or replicationFactor and replicasAssignments were set. "
                                  "Both cannot be used at the same time.")
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:
        raise InvalidRequestError(f"Null value not supported for topic configs: {','.join(nulls)}")
    config = {c.name: c.value for c in topic.configs}
    assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments} or None
    return config, assignment


# ----------------------------------------------------------------------------- DeleteTopics


@api(ApiKey.DELETE_TOPICS, "DeleteTopics", 1, 6)
async def handle_delete_topics(broker: TopicAdminContext, request: Request) -> Response:
    body = decode_body(request)
    version = request.api_version
    cache = broker.metadata_cache
    if version >= 6:
        wanted = [(t.name, t.topic_id if t.topic_id is not None and t.topic_id != _ZERO_UUID else None)
                  for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    if not broker.controller.is_active:
        m = response_module(ApiKey.DELETE_TOPICS, version)
        return respond(request, build(m.DeleteTopicsResponse, responses=tuple(
            build(m.DeletableTopicResult, name=name, topic_id=topic_id or _ZERO_UUID,
                  error_code=ErrorCode.not_controller, error_message=None) for name, topic_id in wanted)))
    results: list[tuple[str | None, uuid.UUID | None, Outcome]] = []
    to_delete: list[str] = []
    by_id = {topic_id: name for name, topic_id in cache.topic_ids.items()}
    # KafkaApis.handleDeleteTopicsRequest: Delete on each topic; a topic named by id without
    # Describe on it is refused without its name, which the client must not learn.
    named = [name if name is not None else by_id.get(topic_id) for name, topic_id in wanted]  # type: ignore[arg-type]
    may_describe = authorized_names(broker, request, Operation.DESCRIBE, ResourceType.TOPIC, named)
    may_delete = authorized_names(broker, request, Operation.DELETE, ResourceType.TOPIC, named)
    for name, topic_id in wanted:
        if name is not None and topic_id is not None:
            results.append((name, topic_id, (ErrorCode.invalid_request,
                                             "You may not specify both topic name and topic id.")))
            continue
        if name is None:
            name = by_id.get(topic_id)  # type: ignore[arg-type]
            if name is None:
                results.append((None, topic_id, (ErrorCode.unknown_topic_id, "Unknown topic id.")))
                continue
            if name not in may_describe:
                results.append((None, topic_id, (ErrorCode.topic_authorization_failed, "Authorization failed.")))
                continue
        if name not in may_delete:
            results.append((name, topic_id, (ErrorCode.topic_authorization_failed, "Authorization failed.")))
            continue
        results.append((name, topic_id, _OK))
        to_delete.append(name)
    duplicates = _duplicates(to_delete)
    outcomes: dict[str, Outcome] = {}
    for name in dict.fromkeys(to_delete):
        if name in duplicates:
            outcomes[name] = (ErrorCode.invalid_request, "Duplicate topic in request.")
        elif not broker.config["delete.topic.enable"]:
            # Kafka answered INVALID_REQUEST before TOPIC_DELETION_DISABLED existed (v3).
            code = ErrorCode.topic_deletion_disabled if version >= 3 else ErrorCode.invalid_request
            outcomes[name] = (code, "Topic deletion is disabled.")
        else:
            try:
                if not await broker.topic_admin.delete_topic(name):
                    log.info("Topic %s is already marked for deletion", name)
                outcomes[name] = _OK
            except Exception as e:
                outcomes[name] = outcome_of(e, f"deleting topic {name}")
    pending = {name: (lambda n=name: not cache.contains_topic(n))
               for name, outcome in outcomes.items() if outcome == _OK}
    await _await_all(broker, _timeout_ms(body), pending, outcomes,
                     "Timed out waiting for the topic deletion to complete; the topic is marked for deletion.")
    m = response_module(ApiKey.DELETE_TOPICS, version)
    entries = []
    for name, topic_id, outcome in results:
        error, message = outcome if name is None or outcome != _OK else outcomes[name]
        # The topic id is the request's (zero for a topic named by name), as Kafka echoes it.
        entries.append(build(m.DeletableTopicResult, name=name, topic_id=topic_id or _ZERO_UUID,
                             error_code=error, error_message=message))
    return respond(request, build(m.DeleteTopicsResponse, responses=tuple(entries)))


# ----------------------------------------------------------------------------- CreatePartitions


@api(ApiKey.CREATE_PARTITIONS, "CreatePartitions", 0, 3)
async def handle_create_partitions(broker: TopicAdminContext, request: Request) -> Response:
    body = decode_body(request)
    if not broker.controller.is_active:
        m = response_module(ApiKey.CREATE_PARTITIONS, request.api_version)
        return respond(request, build(m.CreatePartitionsResponse, results=tuple(
            build(m.CreatePartitionsTopicResult, name=name, error_code=ErrorCode.not_controller,
                  error_message="This is not the correct controller for this cluster.")
            for name in dict.fromkeys(t.name for t in body.topics))))
    duplicates = _duplicates(t.name for t in body.topics)
    # KafkaApis.handleCreatePartitionsRequest: Alter on each topic.
    may_alter = authorized_names(broker, request, Operation.ALTER, ResourceType.TOPIC, (t.name for t in body.topics))
    results: dict[str, Outcome] = {}
    counts: dict[str, int] = {}
    for topic in body.topics:
        name = topic.name
        if name in results:
            continue
        if name in duplicates:
            results[name] = (ErrorCode.invalid_request, "Duplicate topic in request.")
            continue
        if name not in may_alter:
            results[name] = (ErrorCode.topic_authorization_failed, "The topic authorization is failed.")
            continue
        try:
            assignment = None
            if topic.assignments is not None:
                # The new partitions' ids, counted back from the new count; a list of the wrong
                # length is refused by add_partitions as Kafka refuses it.
                first = topic.count - len(topic.assignments)
                assignment = {first + i: list(a.broker_ids) for i, a in enumerate(topic.assignments)}
            await broker.topic_admin.add_partitions(name, topic.count, assignment,
                                                    validate_only=body.validate_only)
            counts[name] = topic.count
            results[name] = _OK
        except UnknownTopicOrPartitionError:  # in ZkAdminManager.createPartitions' words
            results[name] = (ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        except Exception as e:
            results[name] = outcome_of(e, f"adding partitions to {name}")
    if not body.validate_only:
        pending = {name: (lambda n=name: _partitions_online(broker, n, counts[n])) for name in counts}
        await _await_all(broker, _timeout_ms(body), pending, results,
                         "Timed out waiting for the new partitions to get leaders; they were created.")
    m = response_module(ApiKey.CREATE_PARTITIONS, request.api_version)
    entries = tuple(build(m.CreatePartitionsTopicResult, name=name, error_code=error, error_message=message)
                    for name, (error, message) in results.items())
    return respond(request, build(m.CreatePartitionsResponse, results=entries))
