"""``odradek configs``: kafka-configs.sh (Kafka 2.8's ConfigCommand) for topics, brokers,
users (SCRAM credentials and quotas) and clients (quotas), without the printing; the quotas'
own part is :mod:`odradek.admin.client_quotas`.

Over ZooKeeper (``--zookeeper``) the command reads and replaces ``/config/<type>/<entity>`` and
writes the ``/config/changes`` notification, as ConfigCommand.alterConfigWithZk: user configs
are SCRAM credentials only (``SCRAM-SHA-512=[iterations=8192,password=...]`` becomes Kafka's
stored credential string), broker configs only while the brokers concerned are down.  Over the
Kafka protocol (``--bootstrap-server``) topics and brokers go through DescribeConfigs and
IncrementalAlterConfigs and users through Describe/AlterUserScramCredentials, with the password
salted here and never sent.  Output lines are kafka-configs.sh's.
"""

from __future__ import annotations

import re
import secrets
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.admin.client import AdminConnection
from odradek.admin.client_quotas import (
    USERS,
    EntityPart,
    alter_quotas_over_bootstrap,
    check_quota_alteration,
    describe_quotas_over_bootstrap,
    is_quota_alteration,
)
from odradek.config import ConfigError, validate_dynamic_broker_config
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError, for_code
from odradek.protocol.messages import build
from odradek.security.scram import MIN_ITERATIONS, ScramCredential, salted_password
from odradek.zk.admin_zk_client import AdminZkClient
from odradek.zk.client import KafkaZkClient
from odradek.zk.zk_data import ConfigEntityZNode, desanitize_entity_name, sanitize_entity_name

__all__ = [
    "ConfigCommandError",
    "ConfigEntity",
    "ConfigsAdminConnection",
    "alter_over_bootstrap",
    "alter_over_zookeeper",
    "alter_users_and_clients_over_bootstrap",
    "describe_over_bootstrap",
    "describe_over_zookeeper",
    "describe_users_and_clients_over_bootstrap",
    "parse_add_config",
    "parse_delete_config",
    "scram_iterations_and_password",
]

ENTITY_TYPES = ("topics", "brokers", "users", "clients")
DEFAULT_SCRAM_ITERATIONS = 4096  # ConfigCommand.DefaultScramIterations
_MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_TOPIC, _BROKER = 2, 4  # ConfigResource.Type
_SET, _DELETE = 0, 1  # AlterConfigOp.OpType
_SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
            4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}


class ConfigCommandError(Exception):
    """Bad input or a refusal; one line."""


@dataclass(frozen=True, slots=True)
class ConfigEntity:
    """One entity (``name`` None: every entity of the type; ``<default>``: the broker default)."""

    entity_type: str
    name: str | None

    @property
    def is_default(self) -> bool:
        return self.name == ConfigEntityZNode.DEFAULT

    def __str__(self) -> str:
        """ConfigCommand.Entity.toString: ``topic 'orders'``, ``user-principal 'alice'``, ``default brokers``."""
        type_name = {"users": "user-principal", "topics": "topic"}.get(self.entity_type, self.entity_type)
        if self.is_default:
            return f"default {type_name}"
        return type_name if self.name is None else f"{type_name} '{self.name}'"


# --- Parsing ---------------------------------------------------------------------------------------

# A comma or an equals sign outside square brackets (ConfigCommand.parseConfigsToBeAdded's lookahead).
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def parse_add_config(text: str) -> dict[str, str]:
    """``k1=v1,k2=[a,b]`` as ConfigCommand reads ``--add-config``: split at commas outside
    brackets, then at the first ``=`` outside brackets; brackets are dropped from values."""
    configs: dict[str, str] = {}
    for item in re.split("," + _OUTSIDE_BRACKETS, text):
        pair = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
        if len(pair) != 2 or not pair[0].strip():
            raise ConfigCommandError('Invalid entity config: all configs to be added must be in the format "key=val".')
        configs[pair[0].strip()] = re.sub(r"[\[\]]", "", pair[1]).strip()
    return configs


def parse_delete_config(text: str) -> list[str]:
    """``--delete-config k1,k2``."""
    return [key.strip() for key in text.split(",") if key.strip()]


_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)


def scram_iterations_and_password(mechanism: str, value: str) -> tuple[int, str]:
    """``iterations=8192,password=secret`` (iterations optional, 4096 by default)."""
    match = _CREDENTIAL.fullmatch(value)
    if match is None:
        raise ConfigCommandError(f"Invalid credential property {mechanism}={value}")
    iterations = int(match[1]) if match[1] and match[1] != "-1" else DEFAULT_SCRAM_ITERATIONS
    if iterations < MIN_ITERATIONS:
        raise ConfigCommandError(f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS} "
                                 f"required for {mechanism}")
    return iterations, match[2]


def _format_configs(configs: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in configs.items())


# --- ZooKeeper -------------------------------------------------------------------------------------

async def describe_over_zookeeper(zk: KafkaZkClient, entity: ConfigEntity, echo: Callable[[str], None]) -> None:
    """ConfigCommand.describeConfig (``--zookeeper``): ``Configs for <entity> are k=v,...``."""
    names = [entity.name] if entity.name is not None else sorted(
        _unsanitized(entity.entity_type, n) for n in await zk.get_children(f"/config/{entity.entity_type}") or [])
    for name in names:
        configs = await zk.get_entity_config(entity.entity_type, _sanitized(entity.entity_type, name)) or {}
        # Describing every user leaves out user nodes without configs, as Kafka.
        if configs or entity.name is not None or entity.entity_type != "users":
            echo(f"Configs for {ConfigEntity(entity.entity_type, name)} are {_format_configs(configs)}")


def _sanitized(entity_type: str, name: str) -> str:
    """User names are URL-encoded in znode names (Kafka's Sanitizer); topics and broker ids are not."""
    return sanitize_entity_name(name) if entity_type == "users" else name


def _unsanitized(entity_type: str, name: str) -> str:
    return desanitize_entity_name(name) if entity_type == "users" else name


async def alter_over_zookeeper(zk: KafkaZkClient, entity: ConfigEntity, to_add: Mapping[str, str],
                               to_delete: Sequence[str], echo: Callable[[str], None]) -> None:
    """ConfigCommand.alterConfigWithZk: merge into the stored config, replace it, notify."""
    assert entity.name is not None
    refused = (f"--bootstrap-server option must be specified to update {entity.entity_type} configs: "
               f"{{add: {dict(to_add)}, delete: {list(to_delete)}}}")
    to_add = dict(to_add)
    if entity.entity_type == "users":  # SCRAM credentials (quotas: client_quotas.alter_quotas_over_zookeeper)
        for mechanism, value in to_add.items():
            iterations, password = scram_iterations_and_password(mechanism, value)
            try:
                to_add[mechanism] = ScramCredential.from_password(mechanism, password, iterations).to_string()
            except ValueError as e:
                raise ConfigCommandError(str(e)) from None
    elif entity.entity_type == "brokers":
        await _require_brokers_down(zk, entity, refused)
        try:
            validate_dynamic_broker_config(to_add)
        except (ConfigError, ValueError) as e:
            raise ConfigCommandError(str(e)) from None
    znode_name = _sanitized(entity.entity_type, entity.name)
    stored = await zk.get_entity_config(entity.entity_type, znode_name) or {}
    missing = [key for key in to_delete if key not in stored]
    if missing:
        raise ConfigCommandError(f"Invalid config(s): {','.join(missing)}")
    merged = {k: v for k, v in {**stored, **to_add}.items() if k not in to_delete}
    if entity.entity_type == "topics":
        try:
            await AdminZkClient(zk).alter_topic_config(entity.name, merged)
        except KafkaError as e:
            raise ConfigCommandError(str(e)) from None
    else:
        await zk.set_entity_config(entity.entity_type, znode_name, merged)
    echo(f"Completed updating config for entity: {entity}.")


async def _require_brokers_down(zk: KafkaZkClient, entity: ConfigEntity, refused: str) -> None:
    """ConfigCommand.validateBrokersNotRunning: a running broker would not see the change the
    way it sees AlterConfigs (and could not validate it)."""
    info = "Broker configuration operations using ZooKeeper are only supported if the affected broker(s) are not running."
    running = await zk.get_all_broker_ids()
    if entity.is_default:
        if running:
            raise ConfigCommandError(f"{refused} - {len(running)} brokers are running. {info}")
        return
    assert entity.name is not None
    if not entity.name.isdigit():
        raise ConfigCommandError(f"Invalid broker id {entity.name!r}: expected an integer or --entity-default")
    if int(entity.name) in running:
        raise ConfigCommandError(f"{refused} - broker {entity.name} is running. {info}")


# --- The Kafka protocol ----------------------------------------------------------------------------

class ConfigsAdminConnection(AdminConnection):
    """An AdminConnection that speaks the SCRAM credential and client quota APIs too."""

    max_versions = {**AdminConnection.max_versions, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0,
                    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0, ApiKey.DESCRIBE_CLIENT_QUOTAS: 1,
                    ApiKey.ALTER_CLIENT_QUOTAS: 1}
    api_names = {**AdminConnection.api_names,
                 ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: "DescribeUserScramCredentials",
                 ApiKey.ALTER_USER_SCRAM_CREDENTIALS: "AlterUserScramCredentials",
                 ApiKey.DESCRIBE_CLIENT_QUOTAS: "DescribeClientQuotas",
                 ApiKey.ALTER_CLIENT_QUOTAS: "AlterClientQuotas"}


def _raise_for(code: int, message: str | None) -> None:
    if code != ErrorCode.none:
        error = ErrorCode(code)
        raise for_code(error)(message or error.name.upper())


def _resource(entity: ConfigEntity, name: str) -> tuple[int, str]:
    if entity.entity_type == "topics":
        return _TOPIC, name
    return _BROKER, "" if name == ConfigEntityZNode.DEFAULT else name


def _node(resource_type: int, resource_name: str) -> int | None:
    """The broker a request about this resource goes to: a broker's own configs to that
    broker, as Kafka's AdminClient sends them (a broker refuses another's); None: any."""
    return int(resource_name) if resource_type == _BROKER and resource_name.isdigit() else None


async def _describe_resource(admin: AdminConnection, entity: ConfigEntity, name: str) -> list[Any]:
    resource_type, resource_name = _resource(entity, name)

    def body(m: types.ModuleType, version: int) -> Any:
        return build(m.DescribeConfigsRequest, include_synonyms=True, include_documentation=False,
                     resources=(build(m.DescribeConfigsResource, resource_type=resource_type,
                                      resource_name=resource_name, configuration_keys=None),))

    result = (await admin.request(ApiKey.DESCRIBE_CONFIGS, body, node=_node(resource_type, resource_name))).results[0]
    _raise_for(result.error_code, result.error_message)
    wanted = 1 if resource_type == _TOPIC else 3 if not resource_name else 2  # the dynamic source
    return sorted((c for c in result.configs if c.config_source == wanted), key=lambda c: c.name)


async def describe_over_bootstrap(admin: AdminConnection, entity: ConfigEntity, echo: Callable[[str], None]) -> None:
    """ConfigCommand.describeResourceConfig (``--bootstrap-server``) for topics and brokers."""
    if entity.name is not None:
        names = [entity.name]
    elif entity.entity_type == "topics":
        view = await admin.metadata(None)
        names = sorted(t.name for t in view.topics if t.error_code == ErrorCode.none)
    else:
        names = [str(b) for b in sorted((await admin.metadata([])).brokers)] + [ConfigEntityZNode.DEFAULT]
    for name in names:
        if name == ConfigEntityZNode.DEFAULT:
            echo(f"Default configs for {entity.entity_type} in the cluster are:")
        else:
            echo(f"Dynamic configs for {entity.entity_type[:-1]} {name} are:")
        for c in await _describe_resource(admin, entity, name):
            synonyms = ", ".join(f"{_SOURCES.get(s.source, s.source)}:{s.name}={s.value}"
                                 for s in getattr(c, "synonyms", ()))
            echo(f"  {c.name}={c.value} sensitive={str(c.is_sensitive).lower()} synonyms={{{synonyms}}}")


async def _describe_users(admin: AdminConnection, entity: ConfigEntity, echo: Callable[[str], None]) -> None:
    def body(m: types.ModuleType, version: int) -> Any:
        users = None if entity.name is None else (build(m.UserName, name=entity.name),)
        return build(m.DescribeUserScramCredentialsRequest, users=users)

    response = await admin.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body)
    _raise_for(response.error_code, response.error_message)
    names = {code: name for name, code in _MECHANISM_CODES.items()}
    for result in response.results:
        if result.error_code == ErrorCode.resource_not_found:
            continue  # a user without credentials has nothing to show, as Kafka
        _raise_for(result.error_code, result.error_message)
        infos = ", ".join(f"{names.get(i.mechanism, i.mechanism)}=iterations={i.iterations}"
                          for i in result.credential_infos)
        echo(f"SCRAM credential configs for user-principal '{result.user}' are {infos}")


async def alter_over_bootstrap(admin: AdminConnection, entity: ConfigEntity, to_add: Mapping[str, str],
                               to_delete: Sequence[str], echo: Callable[[str], None]) -> None:
    """ConfigCommand.alterConfig (``--bootstrap-server``) for topics and brokers."""
    assert entity.name is not None
    current = {c.name for c in await _describe_resource(admin, entity, entity.name)}
    missing = [key for key in to_delete if key not in current]
    if missing:
        raise ConfigCommandError(f"Invalid config(s): {','.join(missing)}")
    resource_type, resource_name = _resource(entity, entity.name)
    ops = [(k, _SET, v) for k, v in to_add.items()] + [(k, _DELETE, None) for k in to_delete]

    def body(m: types.ModuleType, version: int) -> Any:
        return build(m.IncrementalAlterConfigsRequest, validate_only=False, resources=(build(
            m.AlterConfigsResource, resource_type=resource_type, resource_name=resource_name, configs=tuple(
                build(m.AlterableConfig, name=k, config_operation=op, value=v) for k, op, v in ops)),))

    result = (await admin.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body,
                                  node=_node(resource_type, resource_name))).responses[0]
    _raise_for(result.error_code, result.error_message)
    if entity.is_default:
        echo(f"Completed updating default config for {entity.entity_type} in the cluster.")
    else:
        echo(f"Completed updating config for {entity.entity_type[:-1]} {entity.name}.")


async def _alter_users(admin: AdminConnection, user: str, to_add: Mapping[str, str], to_delete: Sequence[str]) -> None:
    """A user's SCRAM credentials (the password salted here, never sent)."""
    upsertions = []
    for mechanism, value in to_add.items():
        iterations, password = scram_iterations_and_password(mechanism, value)
        salt = secrets.token_bytes(32)
        upsertions.append((mechanism, iterations, salt, salted_password(mechanism, password, salt, iterations)))

    def body(m: types.ModuleType, version: int) -> Any:
        return build(m.AlterUserScramCredentialsRequest,
                     deletions=tuple(build(m.ScramCredentialDeletion, name=user, mechanism=_MECHANISM_CODES[k])
                                     for k in to_delete),
                     upsertions=tuple(build(m.ScramCredentialUpsertion, name=user, mechanism=_MECHANISM_CODES[k],
                                            iterations=i, salt=salt, salted_password=salted)
                                      for k, i, salt, salted in upsertions))

    for result in (await admin.controller_request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body)).results:
        _raise_for(result.error_code, result.error_message)


async def describe_users_and_clients_over_bootstrap(admin: AdminConnection, parts: Sequence[EntityPart],
                                                    echo: Callable[[str], None]) -> None:
    """ConfigCommand.describeClientQuotaAndUserScramCredentialConfigs: the quota lines, then
    (users alone, not the default) the SCRAM credential lines."""
    await describe_quotas_over_bootstrap(admin, parts, echo)
    if [t for t, _ in parts] == [USERS] and parts[0][1] != "":
        await _describe_users(admin, ConfigEntity(USERS, parts[0][1]), echo)


async def alter_users_and_clients_over_bootstrap(admin: AdminConnection, parts: Sequence[EntityPart],
                                                 to_add: Mapping[str, str], to_delete: Sequence[str],
                                                 echo: Callable[[str], None]) -> None:
    """ConfigCommand.alterConfig for users and clients: quotas (AlterClientQuotas) or a user's
    SCRAM credentials (AlterUserScramCredentials), never both at once."""
    check_quota_alteration(parts, to_add, to_delete)
    head_type, head_name = parts[0]
    if is_quota_alteration(parts, to_add, to_delete):
        await alter_quotas_over_bootstrap(admin, parts, to_add, to_delete)
    else:
        assert head_name
        await _alter_users(admin, head_name, to_add, to_delete)
    if head_name:
        echo(f"Completed updating config for {head_type[:-1]} {head_name}.")
    else:
        echo(f"Completed updating default config for {head_type} in the cluster.")
