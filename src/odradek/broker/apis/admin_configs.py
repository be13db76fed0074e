"""DescribeConfigs (key 32), AlterConfigs (key 33) and IncrementalAlterConfigs (key 44).

Topic configs live in ``/config/topics/<t>``; altering them writes that znode and a
``/config/changes`` notification (``KafkaZkClient.set_topic_config``), and every broker's
DynamicConfigManager applies the change to its open logs.

Broker configs (Kafka's DynamicBrokerConfig, ZooKeeper mode): the BROKER resource named
``""`` is the cluster-wide default (``/config/brokers/<default>``), one named by a broker id
that broker's own (``/config/brokers/<id>``); only config.DYNAMIC_BROKER_CONFIGS may be set.
As Kafka's ZkAdminManager, a key that needs a restart or a value that does not validate is
INVALID_REQUEST "Invalid config value for resource ConfigResource(type=BROKER, name='<n>'): ...".

Authorization (KafkaApis, Kafka 2.8): DescribeConfigs (AlterConfigs) on the topic for TOPIC
resources, on the cluster for BROKER and BROKER_LOGGER ones; a refused resource gets
TOPIC_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED and the others are still served.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, Any

from odradek.broker.apis.admin_topics import Outcome, outcome_of
from odradek.broker.apis.authorization import authorized, cluster_authorized
from odradek.broker.apis.configs_describe import (
    ConfigEntry,
    ResourceType,
    broker_config_entries,
    default_broker_config_entries,
    topic_config_entries,
)
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.common import validate_topic_name
from odradek.config import (
    BROKER_CONFIG,
    TOPIC_CONFIG,
    ConfigError,
    ConfigKey,
    Type,
    validate_dynamic_broker_config,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import (
    ErrorCode,
    InvalidConfigError,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
)
from odradek.security.acls import Operation
from odradek.security.acls import ResourceType as AclResourceType
from odradek.zk.zk_data import ConfigEntityZNode, TopicZNode

if TYPE_CHECKING:
    from odradek.broker.context import ConfigsContext
    from odradek.net.server import Request, Response

log = logging.getLogger(__name__)



def _resource_name(resource_type: int) -> str:
    try:
        return ResourceType(resource_type).name
    except ValueError:
        return str(resource_type)


async def _require_topic(broker: ConfigsContext, topic: str) -> None:
    """The topic must exist: in this broker's metadata cache or, if the cache has not heard
    of it yet, in ZooKeeper."""
    if broker.metadata_cache.contains_topic(topic):
        return
    if await broker.zk.exists(TopicZNode.path(topic)) is None:
        raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")


def _broker_resource_id(broker: ConfigsContext, name: str) -> int | None:
    """The broker id a BROKER resource names (None: the cluster-wide default, ``""``)."""
    if not name:
        return None
    try:
        broker_id = int(name)
    except ValueError:
        raise InvalidRequestError(f"Broker id must be an integer, but it is: {name}") from None
    if broker_id != broker.broker_id:
        raise InvalidRequestError(
            f"Unexpected broker id, expected {broker.broker_id} or empty string, but received {name}")
    return broker_id


def _refused(broker: ConfigsContext, request: Request, operation: Operation, resource_type: int,
             name: str) -> Outcome | None:
    """Kafka's configsAuthorizationApiError when ``operation`` on the resource is not allowed;
    None when it is (or the type is one the handler refuses anyway)."""
    if broker.authorizer is None:
        return None
    if resource_type == ResourceType.TOPIC:
        if not authorized(broker, request, operation, AclResourceType.TOPIC, name):
            return ErrorCode.topic_authorization_failed, "Topic authorization failed."
    elif (resource_type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER)
          and not cluster_authorized(broker, request, operation)):
        return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    return None


# ----------------------------------------------------------------------------- DescribeConfigs


@api(ApiKey.DESCRIBE_CONFIGS, "DescribeConfigs", 1, 4)
async def handle_describe_configs(broker: ConfigsContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.DESCRIBE_CONFIGS, request.api_version)
    synonyms = getattr(body, "include_synonyms", False)
    documentation = getattr(body, "include_documentation", False)
    results = []
    for resource in body.resources:
        keys = resource.configuration_keys
        entries: list[ConfigEntry] = []
        refused = _refused(broker, request, Operation.DESCRIBE_CONFIGS, resource.resource_type,
                           resource.resource_name)
        try:
            if refused is not None:
                error: Outcome = refused
            else:
                entries = await _describe(broker, resource.resource_type, resource.resource_name, keys)
                error = (ErrorCode.none, None)
        except Exception as e:
            error = outcome_of(e, f"describing configs of {resource.resource_name}")
        configs = tuple(
            build(m.DescribeConfigsResourceResult, name=e.name, value=e.value, read_only=e.read_only,
                  config_source=int(e.source), is_default=e.is_default, is_sensitive=e.sensitive,
                  synonyms=tuple(build(m.DescribeConfigsSynonym, name=n, value=v, source=int(s))
                                 for n, v, s in e.synonyms) if synonyms else (),
                  config_type=e.config_type, documentation=e.documentation if documentation else None)
            for e in entries)
        results.append(build(m.DescribeConfigsResult, error_code=error[0], error_message=error[1],
                             resource_type=resource.resource_type, resource_name=resource.resource_name,
                             configs=configs))
    return respond(request, build(m.DescribeConfigsResponse, results=tuple(results)))


async def _describe(broker: ConfigsContext, resource_type: int, name: str, keys: Any) -> list[ConfigEntry]:
    if resource_type == ResourceType.TOPIC:
        validate_topic_name(name)
        await _require_topic(broker, name)
        return topic_config_entries(broker.config, await broker.zk.get_topic_config(name), keys)
    if resource_type == ResourceType.BROKER:
        if _broker_resource_id(broker, name) is None:
            return default_broker_config_entries(broker.config, keys)
        return broker_config_entries(broker.config, keys)
    raise InvalidRequestError(f"Unsupported resource type {_resource_name(resource_type)} for DescribeConfigs; "
                              "odradek describes TOPIC and BROKER configs")


# ----------------------------------------------------------------------------- AlterConfigs


async def _alter_responses(broker: ConfigsContext, request: Request, api_key: int, incremental: bool) -> Any:
    body = decode_body(request)
    m = response_module(api_key, request.api_version)
    api_name = "IncrementalAlterConfigs" if incremental else "AlterConfigs"
    responses = []
    for resource in body.resources:
        name = resource.resource_name
        refused = _refused(broker, request, Operation.ALTER_CONFIGS, resource.resource_type, name)
        if refused is not None:
            responses.append(build(m.AlterConfigsResourceResponse, error_code=refused[0], error_message=refused[1],
                                   resource_type=resource.resource_type, resource_name=name))
            continue
        try:
            if resource.resource_type == ResourceType.TOPIC:
                await _alter_topic(broker, name, resource.configs, incremental, body.validate_only, api_name)
            elif resource.resource_type == ResourceType.BROKER:
                await _alter_broker(broker, name, resource.configs, incremental, body.validate_only, api_name)
            else:
                raise InvalidRequestError(f"{api_name} is only supported for topics and brokers, but resource "
                                          f"type is {_resource_name(resource.resource_type)}")
            outcome: Outcome = (ErrorCode.none, None)
        except Exception as e:
            outcome = outcome_of(e, f"altering configs of {name}")
        responses.append(build(m.AlterConfigsResourceResponse, error_code=outcome[0], error_message=outcome[1],
                               resource_type=resource.resource_type, resource_name=name))
    return m, tuple(responses)


def _requested(current: dict[str, str], configs: Any, incremental: bool,
               specs: dict[str, ConfigKey]) -> dict[str, str]:
    """The whole config after the request: AlterConfigs replaces it, IncrementalAlterConfigs
    applies its operations to ``current``."""
    if incremental:
        return apply_incremental_ops(current, configs, specs)
    nulls = [c.name for c in configs if c.value is None]
    if nulls:
        raise InvalidRequestError(f"Null value not supported for : {','.join(nulls)}")
    return {c.name: c.value for c in configs}


async def _alter_topic(broker: ConfigsContext, name: str, configs: Any, incremental: bool,
                       validate_only: bool, api_name: str) -> None:
    await _require_topic(broker, name)
    current = await broker.zk.get_topic_config(name) if incremental else {}
    config = _requested(current, configs, incremental, TOPIC_CONFIG)
    await broker.topic_admin.alter_topic_config(name, config, validate_only=validate_only)
    if not validate_only:
        log.info("%s set the config of topic %s to %s", api_name, name, config)


async def _alter_broker(broker: ConfigsContext, name: str, configs: Any, incremental: bool,
                        validate_only: bool, api_name: str) -> None:
    """Kafka's ZkAdminManager.alterBrokerConfigs: validate the new dynamic config against
    this broker's (DynamicBrokerConfig.validate), then write it and notify every broker."""
    broker_id = _broker_resource_id(broker, name)
    entity = ConfigEntityZNode.DEFAULT if broker_id is None else str(broker_id)
    current = await broker.zk.get_broker_config(entity) if incremental else {}
    config = _requested(current, configs, incremental, BROKER_CONFIG)
    try:
        checked = validate_dynamic_broker_config(config)
        now = broker.config
        new = now.with_dynamic(checked if broker_id is None else now.dynamic_default_configs,
                               now.dynamic_broker_configs if broker_id is None else checked)
        if new["log.cleaner.threads"] != now["log.cleaner.threads"]:
            now.cleaner_config().check_reconfiguration(new.cleaner_config())
    except ConfigError as e:
        raise InvalidRequestError(
            f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): {e}") from None
    if not validate_only:
        await broker.zk.set_broker_config(entity, checked)
        log.info("%s set the dynamic config of brokers/%s to %s", api_name, entity, checked)


@api(ApiKey.ALTER_CONFIGS, "AlterConfigs", 0, 2)
async def handle_alter_configs(broker: ConfigsContext, request: Request) -> Response:
    m, responses = await _alter_responses(broker, request, ApiKey.ALTER_CONFIGS, incremental=False)
    return respond(request, build(m.AlterConfigsResponse, responses=responses))


@api(ApiKey.INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1)
async def handle_incremental_alter_configs(broker: ConfigsContext, request: Request) -> Response:
    m, responses = await _alter_responses(broker, request, ApiKey.INCREMENTAL_ALTER_CONFIGS, incremental=True)
    return respond(request, build(m.IncrementalAlterConfigsResponse, responses=responses))


# IncrementalAlterConfigs operations (KIP-339).
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def apply_incremental_ops(current: dict[str, str], ops: Any,
                          specs: dict[str, ConfigKey] = TOPIC_CONFIG) -> dict[str, str]:
    """A topic's overrides (or a dynamic broker config, with ``specs=BROKER_CONFIG``) after
    KIP-339 operations: SET, DELETE, and APPEND / SUBTRACT on list configs (starting from the
    config's default when it is not set)."""
    if any(n > 1 for n in Counter(op.name for op in ops).values()):
        raise InvalidRequestError("Error due to duplicate config keys")
    nulls = [op.name for op in ops if op.value is None and op.config_operation != DELETE]
    if nulls:
        raise InvalidRequestError(f"Null value not supported for : {','.join(nulls)}")
    config = dict(current)
    for op in ops:
        if op.config_operation == SET:
            config[op.name] = op.value
        elif op.config_operation == DELETE:
            config.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            verb = "append" if op.config_operation == APPEND else "subtract"
            spec = specs.get(op.name)
            if spec is None or spec.type is not Type.LIST:
                raise InvalidConfigError(f"Config value {verb} is not allowed for config key: {op.name}")
            old = config.get(op.name)
            if old is None:
                old = spec.default if isinstance(spec.default, str) else ",".join(spec.default or ())
            items = [v.strip() for v in old.split(",") if v.strip()]
            given = [v.strip() for v in op.value.split(",") if v.strip()]
            if op.config_operation == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            config[op.name] = ",".join(items)
        else:
            raise InvalidRequestError(f"Unknown config operation {op.config_operation} for {op.name}")
    return config
