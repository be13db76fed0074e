"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), version 0.

As Kafka 2.8's ZkAdminManager: credentials live in ``/config/users/<user>`` (the name URL-encoded, Kafka's Sanitizer) under the mechanism
names (``SCRAM-SHA-256``, ``SCRAM-SHA-512``), in ScramCredentialUtils' string form.  Describe
needs Describe on the Cluster, alter Alter on the Cluster and the active controller (any other
broker answers NOT_CONTROLLER).  Alterations are checked before anything is written: an empty
user name or iterations outside 4096..16384 are UNACCEPTABLE_CREDENTIAL, an unknown mechanism
UNSUPPORTED_SASL_MECHANISM, two alterations of one user's mechanism DUPLICATE_RESOURCE and the
deletion of a credential that does not exist RESOURCE_NOT_FOUND; each such user is refused as
a whole, the others are written (one znode write and one ``/config/changes`` notification each).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from odradek.broker.apis.authorization import cluster_authorized
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import Operation
from odradek.security.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential
from odradek.zk.zk_data import ConfigEntityTypeZNode, desanitize_entity_name, sanitize_entity_name

if TYPE_CHECKING:
    from odradek.broker.context import ScramContext
    from odradek.net.server import Request, Response

__all__ = ["MECHANISM_CODES", "USERS"]

USERS = "users"  # ConfigType.User
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # org.apache.kafka.clients.admin.ScramMechanism
_MECHANISMS = {code: name for name, code in MECHANISM_CODES.items()}
_CLUSTER_AUTHORIZATION = "Cluster authorization failed."

_UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"
_TOO_FEW_ITERATIONS = "Too few iterations"
_TOO_MANY_ITERATIONS = "Too many iterations"
_EMPTY_USER = "Username must not be empty"


@api(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials", 0, 0)
async def handle_describe_user_scram_credentials(broker: ScramContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request.api_version)
    if not cluster_authorized(broker, request, Operation.DESCRIBE):
        return respond(request, build(m.DescribeUserScramCredentialsResponse, throttle_time=0,
                                      error_code=ErrorCode.cluster_authorization_failed,
                                      error_message=_CLUSTER_AUTHORIZATION, results=()))
    results: list[Any] = []

    def result(user: str, code: ErrorCode, message: str | None, infos: tuple[Any, ...] = ()) -> None:
        results.append(build(m.DescribeUserScramCredentialsResult, user=user, error_code=code,
                             error_message=message, credential_infos=infos))

    def add_if_has_credential(user: str, config: dict[str, str] | None, explicit: bool) -> None:
        stored = {name: value for name, value in (config or {}).items() if name in MECHANISM_CODES}
        if not stored:
            if explicit:
                result(user, ErrorCode.resource_not_found,
                       f"Attempt to describe a user credential that does not exist: {user}")
            return
        try:
            infos = tuple(build(m.CredentialInfo, mechanism=MECHANISM_CODES[name],
                                iterations=ScramCredential.from_string(stored[name]).iterations)
                          for name in sorted(stored))
        except ValueError as e:
            result(user, ErrorCode.unknown_server_error, f"Error retrieving credentials for user {user}: {e}")
            return
        result(user, ErrorCode.none, None, infos)

    users = [u.name for u in body.users] if body.users else []
    if not users:
        for entity in sorted(await broker.zk.get_children(ConfigEntityTypeZNode.path(USERS)) or []):
            add_if_has_credential(desanitize_entity_name(entity), await broker.zk.get_entity_config(USERS, entity),
                                  explicit=False)
    else:
        counts = Counter(users)
        for user in sorted({u for u in users if not u}):
            result(user, ErrorCode.resource_not_found, "Cannot describe SCRAM credentials for empty user name")
        for user in sorted(u for u, n in counts.items() if n > 1 and u):
            result(user, ErrorCode.duplicate_resource,
                   f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}")
        for user in users:
            if user and counts[user] == 1:
                add_if_has_credential(user, await broker.zk.get_entity_config(USERS, sanitize_entity_name(user)),
                                      explicit=True)
    return respond(request, build(m.DescribeUserScramCredentialsResponse, throttle_time=0,
                                  error_code=ErrorCode.none, error_message=None, results=tuple(results)))


def _invalid_upsertion(upsertion: Any) -> str | None:
    if not upsertion.name:
        return _EMPTY_USER
    if upsertion.mechanism not in _MECHANISMS:
        return _UNKNOWN_MECHANISM
    if upsertion.iterations > MAX_ITERATIONS:
        return _TOO_MANY_ITERATIONS
    if upsertion.iterations < MIN_ITERATIONS:
        return _TOO_FEW_ITERATIONS
    return None


def _invalid_deletion(deletion: Any) -> str | None:
    if not deletion.name:
        return _EMPTY_USER
    return None if deletion.mechanism in _MECHANISMS else _UNKNOWN_MECHANISM


@api(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", 0, 0)
async def handle_alter_user_scram_credentials(broker: ScramContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request.api_version)
    results: list[Any] = []

    def result(user: str, code: ErrorCode, message: str | None = None) -> None:
        results.append(build(m.AlterUserScramCredentialsResult, user=user, error_code=code, error_message=message))

    refusal = None
    if not broker.controller.is_active:
        refusal = (ErrorCode.not_controller, "This is not the correct controller for this cluster.")
    elif not cluster_authorized(broker, request, Operation.ALTER):
        refusal = (ErrorCode.cluster_authorization_failed, _CLUSTER_AUTHORIZATION)
    if refusal is not None:
        code, message = refusal
        for user in dict.fromkeys(a.name for a in (*body.upsertions, *body.deletions)):
            result(user, code, message)
        return respond(request, build(m.AlterUserScramCredentialsResponse, throttle_time=0, results=tuple(results)))

    invalid: dict[str, str] = {}
    for upsertion in body.upsertions:
        if (reason := _invalid_upsertion(upsertion)) is not None:
            invalid.setdefault(upsertion.name, reason)
    for deletion in body.deletions:
        if (reason := _invalid_deletion(deletion)) is not None:
            invalid.setdefault(deletion.name, reason)
    for user, reason in invalid.items():
        result(user, ErrorCode.unsupported_sasl_mechanism if reason == _UNKNOWN_MECHANISM
               else ErrorCode.unacceptable_credential, reason)

    pairs = Counter((a.name, a.mechanism) for a in (*body.upsertions, *body.deletions) if a.name not in invalid)
    duplicated = dict.fromkeys(user for (user, _), n in pairs.items() if n > 1)
    for user in duplicated:
        result(user, ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")

    candidates = [u for u in dict.fromkeys(user for user, _ in pairs) if u not in duplicated]
    configs = {user: dict(await broker.zk.get_entity_config(USERS, sanitize_entity_name(user)) or {})
               for user in candidates}
    missing = dict.fromkeys(d.name for d in body.deletions
                            if d.name in configs and _MECHANISMS[d.mechanism] not in configs[d.name])
    for user in missing:
        result(user, ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")

    for user in (u for u in candidates if u not in missing):
        config = configs[user]
        for deletion in (d for d in body.deletions if d.name == user):
            config.pop(_MECHANISMS[deletion.mechanism], None)
        for upsertion in (u for u in body.upsertions if u.name == user):
            mechanism = _MECHANISMS[upsertion.mechanism]
            config[mechanism] = ScramCredential.from_salted_password(
                mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations).to_string()
        await broker.zk.set_entity_config(USERS, sanitize_entity_name(user), config)
        result(user, ErrorCode.none)
    return respond(request, build(m.AlterUserScramCredentialsResponse, throttle_time=0, results=tuple(results)))
