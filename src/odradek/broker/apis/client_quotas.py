"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), versions 0-1 (KIP-546).

As Kafka 2.8's ZkAdminManager: a quota entity is a user, a client id, or one client id of one
user, each a name or the default (a null name); its quotas are keys of the config map of
``/config/users/<user>``, ``/config/users/<user>/clients/<client>`` or
``/config/clients/<client>`` (names sanitized), beside a user's SCRAM credentials.  Any broker
answers (no controller is involved); an alteration rewrites the entity's map and writes a
``/config/changes`` notification, through which every broker's quota managers learn of it.

Describe needs DescribeConfigs on the Cluster, alter AlterConfigs (else
CLUSTER_AUTHORIZATION_FAILED).  A describe filter names each entity type at most once; a
component matches one name (exact), the default, or any name of its type; a type without a
component matches anything, or with ``strict`` only entities without that type.  Refusals are
Kafka's INVALID_REQUEST messages (an unknown type in a filter: UNSUPPORTED_VERSION), an
alteration's checked before anything is written.  IP entities (``connection_creation_rate``)
are not supported: a filter for them finds nothing and an alteration is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from odradek.broker.apis.authorization import cluster_authorized
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.broker.quota.quota_config import QUOTA_KEYS, QuotaConfigError, quota_value_string
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import Operation
from odradek.zk.client_quotas import read_client_quota_entities
from odradek.zk.zk_data import (
    ClientQuotaEntity,
    ConfigEntityZNode,
    desanitize_entity_name,
    sanitize_entity_name,
)

if TYPE_CHECKING:
    from odradek.broker.context import ClientQuotasContext
    from odradek.net.server import Request, Response

__all__ = ["CLIENT_ID", "IP", "USER"]

# ClientQuotaEntity's entity types.
USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
# DescribeClientQuotasRequest's match types.
_EXACT, _DEFAULT, _SPECIFIED = 0, 1, 2
_DEFAULT_NAME: Final = ConfigEntityZNode.DEFAULT
_CLUSTER_AUTHORIZATION = "Cluster authorization failed."


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _invalid(message: str) -> _Refused:
    return _Refused(ErrorCode.invalid_request, message)


# ----------------------------------------------------------------------------- describe


@dataclass(frozen=True, slots=True)
class _Match:
    """One filter component: a znode name to equal, or (``name`` None) any name."""

    name: str | None

    def matches(self, name: str | None) -> bool:
        return name is not None and (self.name is None or name == self.name)


def _filter(components: Iterable[Any]) -> tuple[dict[str, _Match], bool]:
    """The components by entity type, and whether IP entities were asked for."""
    by_type: dict[str, _Match] = {}
    for component in components:
        entity_type = component.entity_type
        if entity_type not in (USER, CLIENT_ID, IP):
            if not entity_type:
                raise _invalid("Unexpected empty filter component entity type")
            raise _Refused(ErrorCode.unsupported_version, f"Custom entity type '{entity_type}' not supported")
        if entity_type in by_type:
            raise _invalid(f"Duplicate {'client' if entity_type == CLIENT_ID else entity_type} filter component "
                           "entity type")
        if component.match_type == _EXACT:
            if component.match is None:
                raise _invalid(f"Filter component for entity type '{entity_type}' has no name to match exactly")
            by_type[entity_type] = _Match(sanitize_entity_name(component.match))
        elif component.match_type == _DEFAULT:
            by_type[entity_type] = _Match(_DEFAULT_NAME)
        elif component.match_type == _SPECIFIED:
            by_type[entity_type] = _Match(None)
        else:
            raise _invalid(f"Unexpected match type: {component.match_type}")
    if IP in by_type and (USER in by_type or CLIENT_ID in by_type):
        raise _invalid("Invalid entity filter component combination, IP filter component should not be used with "
                       "user or clientId filter component.")
    return by_type, IP in by_type


def _selected(entity: ClientQuotaEntity, by_type: Mapping[str, _Match], strict: bool) -> bool:
    for entity_type, name in ((USER, entity.user), (CLIENT_ID, entity.client_id)):
        match = by_type.get(entity_type)
        if match is not None:
            if not match.matches(name):
                return False
        elif strict and name is not None:
            return False
    return True


def _api_name(name: str) -> str | None:
    return None if name == _DEFAULT_NAME else desanitize_entity_name(name)


@api(ApiKey.DESCRIBE_CLIENT_QUOTAS, "DescribeClientQuotas", 0, 1)
async def handle_describe_client_quotas(broker: ClientQuotasContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.DESCRIBE_CLIENT_QUOTAS, request.api_version)

    def refused(code: ErrorCode, message: str) -> Response:
        return respond(request, build(m.DescribeClientQuotasResponse, throttle_time=0, error_code=code,
                                      error_message=message, entries=None))

    if not cluster_authorized(broker, request, Operation.DESCRIBE_CONFIGS):
        return refused(ErrorCode.cluster_authorization_failed, _CLUSTER_AUTHORIZATION)
    try:
        by_type, wants_ips = _filter(body.components)
    except _Refused as e:
        return refused(e.code, str(e))
    entries = []
    if not wants_ips:
        for entity, config in (await read_client_quota_entities(broker.zk)).items():
            quotas = {key: float(value) for key, value in config.items() if key in QUOTA_KEYS}
            if not quotas or not _selected(entity, by_type, body.strict):
                continue
            parts = [(t, n) for t, n in ((USER, entity.user), (CLIENT_ID, entity.client_id)) if n is not None]
            entries.append(build(
                m.EntryData,
                entity=tuple(build(m.EntityData, entity_type=t, entity_name=_api_name(n)) for t, n in parts),
                values=tuple(build(m.ValueData, key=k, value=v) for k, v in sorted(quotas.items()))))
    return respond(request, build(m.DescribeClientQuotasResponse, throttle_time=0, error_code=ErrorCode.none,
                                  error_message=None, entries=tuple(entries)))


# ----------------------------------------------------------------------------- alter


def _entity(components: Iterable[Any]) -> ClientQuotaEntity:
    """A request's entity (a type named twice: the last name counts, as in Kafka)."""
    names: dict[str, str | None] = {}
    for component in components:
        names[component.entity_type] = component.entity_name
    if not names:
        raise _invalid("Invalid empty client quota entity")
    for entity_type in names:
        if entity_type not in (USER, CLIENT_ID, IP):
            raise _invalid(f"Unhandled client quota entity type: {entity_type}")
    if IP in names:
        if len(names) > 1:
            raise _invalid("Invalid quota entity combination, IP entity should not be used with user/client ID entity.")
        raise _invalid("IP quotas (connection_creation_rate) are not supported")
    parts = []
    for entity_type, what in ((USER, "user"), (CLIENT_ID, "client-id")):
        if entity_type not in names:
            parts.append(None)
            continue
        name = names[entity_type]
        if name == "":
            raise _invalid(f"Empty {what} not supported")
        parts.append(_DEFAULT_NAME if name is None else sanitize_entity_name(name))
    return ClientQuotaEntity(parts[0], parts[1])


def _altered(stored: Mapping[str, str], ops: Iterable[Any]) -> dict[str, str]:
    config = dict(stored)
    for op in ops:
        if op.remove:
            config.pop(op.key, None)
        else:
            try:
                config[op.key] = quota_value_string(op.key, op.value)
            except QuotaConfigError as e:
                raise _invalid(str(e)) from None
    return config


@api(ApiKey.ALTER_CLIENT_QUOTAS, "AlterClientQuotas", 0, 1)
async def handle_alter_client_quotas(broker: ClientQuotasContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.ALTER_CLIENT_QUOTAS, request.api_version)
    authorized = cluster_authorized(broker, request, Operation.ALTER_CONFIGS)
    # One answer per entity as the request spelled it (an entity given twice: the last outcome).
    outcomes: dict[tuple[tuple[str, str | None], ...], tuple[ErrorCode, str | None]] = {}
    for entry in body.entries:
        spelled = tuple((c.entity_type, c.entity_name) for c in entry.entity)
        if not authorized:
            outcomes[spelled] = (ErrorCode.cluster_authorization_failed, _CLUSTER_AUTHORIZATION)
            continue
        try:
            entity = _entity(entry.entity)
            entity_type, entity_name = entity.config_entity()
            stored = await broker.zk.get_entity_config(entity_type, entity_name) or {}
            config = _altered(stored, entry.ops)
        except _Refused as e:
            outcomes[spelled] = (e.code, str(e))
            continue
        if not body.validate_only:
            await broker.zk.set_entity_config(entity_type, entity_name, config)
        outcomes[spelled] = (ErrorCode.none, None)
    return respond(request, build(m.AlterClientQuotasResponse, throttle_time=0, entries=tuple(
        build(m.EntryData, error_code=code, error_message=message, entity=tuple(
            build(m.EntityData, entity_type=t, entity_name=n) for t, n in spelled))
        for spelled, (code, message) in outcomes.items())))
