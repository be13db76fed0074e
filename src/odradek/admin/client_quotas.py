"""``odradek configs`` for client quotas: kafka-configs.sh (Kafka 2.8's ConfigCommand) with
``--entity-type users`` and/or ``clients``, without the printing.

An entity is one or two (entity type, name) pairs as the command line gave them: a name, ``""``
for the default (``--entity-default``, ``--user-defaults``, ``--client-defaults``), or (describe
only) None for every entity of that type.  Over the Kafka protocol, describe asks
DescribeClientQuotas for exactly those entity types (``strict``) and prints Kafka's
``Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1024.0``
lines, values as Java prints doubles and in the order Kafka's tool iterates its hash maps; alter
reads the entity's quotas first (deleting a key it does not have is refused) and sends one
AlterClientQuotas.  Over ZooKeeper the command rewrites ``/config/users/<user>``,
``/config/users/<user>/clients/<client>`` or ``/config/clients/<client>`` and notifies, as
Kafka 2.8's ``--zookeeper`` path does (a user's SCRAM credentials stay beside its quotas).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from odradek.admin.client import AdminConnection
from odradek.admin.java_order import hash_map_order, java_map_hash, java_string_hash
from odradek.broker.quota.quota_config import QUOTA_KEYS, java_double_string
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, for_code
from odradek.protocol.messages import build
from odradek.security.scram import MECHANISMS
from odradek.zk.client import KafkaZkClient
from odradek.zk.zk_data import (
    ClientQuotaEntity,
    ConfigEntityTypeZNode,
    ConfigEntityZNode,
    desanitize_entity_name,
    sanitize_entity_name,
)

__all__ = ["CLIENTS", "USERS", "QuotaCommandError", "alter_quotas_over_bootstrap", "alter_quotas_over_zookeeper",
           "check_quota_alteration", "describe_quotas_over_bootstrap", "describe_quotas_over_zookeeper",
           "is_quota_alteration"]

USERS: Final = "users"
CLIENTS: Final = "clients"
_API_TYPES: Final = {USERS: "user", CLIENTS: "client-id"}
_DISPLAY: Final = {"user": "user-principal", "client-id": "client-id"}
_EXACT, _DEFAULT, _SPECIFIED = 0, 1, 2
_DEFAULT_NAME: Final = ConfigEntityZNode.DEFAULT

# (entity type, name): name "" is the default, None (describe) any
EntityPart = tuple[str, str | None]


class QuotaCommandError(Exception):
    """Bad input or a refusal; one line."""


def _scala_set(names: Sequence[str]) -> str:
    return f"Set({', '.join(dict.fromkeys(names))})"


def is_quota_alteration(parts: Sequence[EntityPart], to_add: Mapping[str, str], to_delete: Sequence[str]) -> bool:
    """Whether an alteration of users or clients is about quotas (else: a user's SCRAM credentials)."""
    return CLIENTS in {t for t, _ in parts} or any(k in QUOTA_KEYS for k in (*to_add, *to_delete))


def check_quota_alteration(parts: Sequence[EntityPart], to_add: Mapping[str, str], to_delete: Sequence[str]) -> None:
    """ConfigCommand.alterConfig's checks for users and clients over ``--bootstrap-server``."""
    head = parts[0][0]
    unknown_add = [k for k in to_add if k not in QUOTA_KEYS and k not in MECHANISMS]
    unknown_delete = [k for k in to_delete if k not in QUOTA_KEYS and k not in MECHANISMS]
    scram_add = [k for k in to_add if k in MECHANISMS]
    scram_delete = [k for k in to_delete if k in MECHANISMS]
    if head == CLIENTS or len(parts) == 2:
        if unknown_add or scram_add:
            raise QuotaCommandError("Only quota configs can be added for 'clients' using --bootstrap-server. "
                                    f"Unexpected config names: {_scala_set(unknown_add + scram_add)}")
        if unknown_delete or scram_delete:
            raise QuotaCommandError("Only quota configs can be deleted for 'clients' using --bootstrap-server. "
                                    f"Unexpected config names: ArrayBuffer({', '.join(unknown_delete + scram_delete)})")
        return
    if unknown_add:
        raise QuotaCommandError("Only quota configs and SCRAM credentials can be added for 'users' using "
                                f"--bootstrap-server. Unexpected config names: {_scala_set(unknown_add)}")
    if unknown_delete:
        raise QuotaCommandError("Only quota configs and SCRAM credentials can be deleted for 'users' using "
                                f"--bootstrap-server. Unexpected config names: ArrayBuffer({', '.join(unknown_delete)})")
    if scram_add or scram_delete:
        if any(name == "" for _, name in parts):
            raise QuotaCommandError("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                                    "Credentials using --bootstrap-server.")
        if len(scram_add) < len(to_add) or len(scram_delete) < len(to_delete):
            raise QuotaCommandError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' "
                                    "using --bootstrap-server.")
    for key, value in to_add.items():
        if key in QUOTA_KEYS:
            _quota_value(key, value)


def _quota_value(key: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise QuotaCommandError(f"Cannot parse quota configuration value for {key}: {value}") from None


def _raise_for(code: int, message: str | None) -> None:
    if code != ErrorCode.none:
        error = ErrorCode(code)
        raise for_code(error)(message or error.name.upper())


# --- The Kafka protocol ----------------------------------------------------------------------------

def _entity_description(parts: Sequence[tuple[str, str | None]]) -> str:
    """``user-principal 'alice', client-id 'app'``, ``the default user-principal`` (ConfigCommand's)."""
    by_type = dict(parts)
    return ", ".join(f"{_DISPLAY[t]} '{by_type[t]}'" if by_type[t] is not None else f"the default {_DISPLAY[t]}"
                     for t in ("user", "client-id") if t in by_type)


async def _described(admin: AdminConnection, parts: Sequence[EntityPart]) -> list[tuple[list[tuple[str, str | None]],
                                                                                      list[tuple[str, float]]]]:
    """DescribeClientQuotas for exactly these entity types: each entry's entity and values, as sent."""
    def body(m: types.ModuleType, version: int) -> Any:
        components = []
        for entity_type, name in parts:
            match_type = _SPECIFIED if name is None else _DEFAULT if name == "" else _EXACT
            components.append(build(m.ComponentData, entity_type=_API_TYPES[entity_type], match_type=match_type,
                                    match=name or None))
        return build(m.DescribeClientQuotasRequest, components=tuple(components), strict=True)

    response = await admin.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, body)
    _raise_for(response.error_code, response.error_message)
    return [([(e.entity_type, e.entity_name) for e in entry.entity], [(v.key, v.value) for v in entry.values])
            for entry in response.entries or ()]


async def describe_quotas_over_bootstrap(admin: AdminConnection, parts: Sequence[EntityPart],
                                         echo: Callable[[str], None]) -> None:
    """ConfigCommand.describeClientQuotaAndUserScramCredentialConfigs' quota lines, in the order
    Kafka's tool prints them (its admin client's HashMaps: entities keyed by ClientQuotaEntity,
    whose hash code is ``Objects.hash(entries)``, values by key)."""
    entries = await _described(admin, parts)
    entity_hashes = [(31 + java_map_hash(entity)) & 0xFFFFFFFF for entity, _ in entries]
    for entity, values in hash_map_order(entries, entity_hashes, len(entries)):
        ordered = hash_map_order(values, [java_string_hash(k) for k, _ in values], len(values))
        echo(f"Quota configs for {_entity_description(entity)} are "
             f"{', '.join(f'{k}={java_double_string(v)}' for k, v in ordered)}")


async def alter_quotas_over_bootstrap(admin: AdminConnection, parts: Sequence[EntityPart], to_add: Mapping[str, str],
                                      to_delete: Sequence[str]) -> None:
    """ConfigCommand.alterQuotaConfigs: the entity's current quotas, then one AlterClientQuotas."""
    current = {k for _, values in await _described(admin, parts) for k, _ in values}
    missing = [key for key in to_delete if key not in current]
    if missing:
        raise QuotaCommandError(f"Invalid config(s): {','.join(missing)}")
    ops = [(key, _quota_value(key, value), False) for key, value in to_add.items()]
    ops += [(key, 0.0, True) for key in to_delete]

    def body(m: types.ModuleType, version: int) -> Any:
        entity = tuple(build(m.EntityData, entity_type=_API_TYPES[t], entity_name=name or None) for t, name in parts)
        return build(m.AlterClientQuotasRequest, validate_only=False, entries=(build(
            m.EntryData, entity=entity, ops=tuple(build(m.OpData, key=k, value=v, remove=r) for k, v, r in ops)),))

    for entry in (await admin.request(ApiKey.ALTER_CLIENT_QUOTAS, body)).entries:
        _raise_for(entry.error_code, entry.error_message)


# --- ZooKeeper -------------------------------------------------------------------------------------

def _zk_name(name: str) -> str:
    return _DEFAULT_NAME if name == "" else sanitize_entity_name(name)


def _zk_entity(parts: Sequence[EntityPart]) -> ClientQuotaEntity:
    names = {t: _zk_name(n) for t, n in parts if n is not None}
    return ClientQuotaEntity(names.get(USERS), names.get(CLIENTS))


def _zk_description(entity: ClientQuotaEntity) -> str:
    """``user-principal 'alice', client-id 'app'``, ``default client-id`` (the --zookeeper path's)."""
    described = []
    for kind, name in (("user-principal", entity.user), ("client-id", entity.client_id)):
        if name is not None:
            described.append(f"default {kind}" if name == _DEFAULT_NAME else f"{kind} '{desanitize_entity_name(name)}'")
    return ", ".join(described)


def _zk_validated(to_add: Mapping[str, str], user_entity: bool) -> None:
    """DynamicConfig.Client / User validation of the --zookeeper path."""
    for key, value in to_add.items():
        spec = QUOTA_KEYS.get(key)
        if spec is None:
            if user_entity and key in MECHANISMS:
                raise QuotaCommandError("Cannot alter both quota and SCRAM credential configs simultaneously for "
                                        "'users'.")
            raise QuotaCommandError(f"Unknown Dynamic Configuration '{key}'.")
        parse = int if spec.integral else float
        try:
            parse(value.strip())
        except ValueError:
            kind = "LONG" if spec.integral else "DOUBLE"
            raise QuotaCommandError(f"Invalid value {value} for configuration {key}: Not a number of type {kind}") \
                from None


async def alter_quotas_over_zookeeper(zk: KafkaZkClient, parts: Sequence[EntityPart], to_add: Mapping[str, str],
                                      to_delete: Sequence[str], echo: Callable[[str], None]) -> None:
    """ConfigCommand.alterConfigWithZk for users and clients: merge into the stored map, replace it, notify."""
    entity = _zk_entity(parts)
    _zk_validated(to_add, entity.client_id is None)
    entity_type, entity_name = entity.config_entity()
    stored = await zk.get_entity_config(entity_type, entity_name) or {}
    missing = [key for key in to_delete if key not in stored]
    if missing:
        raise QuotaCommandError(f"Invalid config(s): {','.join(missing)}")
    merged = {k: v for k, v in {**stored, **to_add}.items() if k not in to_delete}
    await zk.set_entity_config(entity_type, entity_name, merged)
    echo(f"Completed updating config for entity: {_zk_description(entity)}.")


async def describe_quotas_over_zookeeper(zk: KafkaZkClient, parts: Sequence[EntityPart],
                                         echo: Callable[[str], None]) -> None:
    """ConfigCommand.describeConfig (``--zookeeper``) for clients, or users and clients:
    ``Configs for <entity> are k=v,...``; a type without a name means all its entities, in name order."""
    by_type = dict(parts)
    users: list[str | None] = [None]
    if USERS in by_type:
        user = by_type[USERS]
        users = [_zk_name(user)] if user is not None else sorted(
            await zk.get_children(ConfigEntityTypeZNode.path(USERS)) or [])
    client = by_type.get(CLIENTS)
    entities: list[ClientQuotaEntity] = []
    for entity_user in users:
        if client is not None:
            entities.append(ClientQuotaEntity(entity_user, _zk_name(client)))
            continue
        parent = (ConfigEntityZNode.path(USERS, f"{entity_user}/clients") if entity_user is not None
                  else ConfigEntityTypeZNode.path(CLIENTS))
        entities += [ClientQuotaEntity(entity_user, c) for c in sorted(await zk.get_children(parent) or [])]
    every = any(name is None for _, name in parts)
    for entity in entities:
        config = await zk.get_entity_config(*entity.config_entity())
        if every and not config:
            continue  # listing every entity leaves out znodes without configs, as Kafka
        echo(f"Configs for {_zk_description(entity)} are {','.join(f'{k}={v}' for k, v in (config or {}).items())}")
