"""Kafka's ACL model, its ZooKeeper encodings and the AclAuthorizer decision, sans IO.

Mirrors Kafka 2.8: org.apache.kafka.common.acl / resource (AclOperation, AclPermissionType,
ResourceType, PatternType, ResourcePattern, KIP-290 prefixed patterns), KafkaPrincipal,
kafka.security.authorizer.AclEntry (the znode JSON), kafka.zk.ZkAclStore / ZkAclChangeStore (the
paths and change notifications) and AclAuthorizer.authorizeAction (the decision).  Nothing here
touches ZooKeeper or the network: the broker supplies an ACL cache (a mapping from ResourcePattern
to a set of Acl), for now an in-memory dict, later one kept in step with ZooKeeper.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "ACL_CHANGES_SEQUENCE_PREFIX",
    "ANONYMOUS",
    "CLUSTER_RESOURCE_NAME",
    "EXTENDED_ACL_CHANGES_PATH",
    "EXTENDED_ACL_ROOT",
    "LITERAL_ACL_CHANGES_PATH",
    "LITERAL_ACL_ROOT",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "Acl",
    "AclAuthorizer",
    "KafkaPrincipal",
    "Operation",
    "PatternType",
    "PermissionType",
    "ResourcePattern",
    "ResourceType",
    "acl_change_path",
    "acl_change_sequence_path",
    "acl_root_path",
    "decode_acl_change",
    "decode_acls",
    "encode_acl_change",
    "encode_acls",
    "implying_operations",
    "matching_acls",
    "parse_super_users",
    "resource_path",
    "resource_type_path",
]

_E = TypeVar("_E", bound=enum.Enum)


class ResourceType(enum.Enum):
    """org.apache.kafka.common.resource.ResourceType; the value is SecurityUtils.resourceTypeName
    (the znode directory and JSON spelling), ``.name`` the Java enum constant."""

    TOPIC = "Topic"
    GROUP = "Group"
    CLUSTER = "Cluster"
    TRANSACTIONAL_ID = "TransactionalId"
    DELEGATION_TOKEN = "DelegationToken"

    @classmethod
    def parse(cls, text: str) -> ResourceType:
        """Kafka's ResourceType.fromString accepts any case of the constant ("TOPIC", "topic");
        SecurityUtils.resourceType the Pascal name ("Topic").  Both are accepted here."""
        return _parse_enum(cls, text, "resource type")


class PatternType(enum.Enum):
    """org.apache.kafka.common.resource.PatternType, the specific kinds only (KIP-290)."""

    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"

    @classmethod
    def parse(cls, text: str) -> PatternType:
        return _parse_enum(cls, text, "pattern type")


class Operation(enum.Enum):
    """org.apache.kafka.common.acl.AclOperation; the value is SecurityUtils.operationName."""

    ALL = "All"
    READ = "Read"
    WRITE = "Write"
    CREATE = "Create"
    DELETE = "Delete"
    ALTER = "Alter"
    DESCRIBE = "Describe"
    CLUSTER_ACTION = "ClusterAction"
    DESCRIBE_CONFIGS = "DescribeConfigs"
    ALTER_CONFIGS = "AlterConfigs"
    IDEMPOTENT_WRITE = "IdempotentWrite"

    @classmethod
    def parse(cls, text: str) -> Operation:
        return _parse_enum(cls, text, "operation")


class PermissionType(enum.Enum):
    """org.apache.kafka.common.acl.AclPermissionType; the value is SecurityUtils.permissionTypeName."""

    ALLOW = "Allow"
    DENY = "Deny"

    @classmethod
    def parse(cls, text: str) -> PermissionType:
        return _parse_enum(cls, text, "permission type")


def _parse_enum(cls: type[_E], text: str, what: str) -> _E:
    if isinstance(text, str):
        folded = text.replace("_", "").casefold()
        for member in cls:
            if folded in (member.value.casefold(), member.name.replace("_", "").casefold()):
                return member
    names = ", ".join(m.value for m in cls)
    raise ValueError(f"unknown {what} {text!r}; expected one of {names}")


@dataclass(frozen=True, slots=True, order=True)
class KafkaPrincipal:
    """org.apache.kafka.common.security.auth.KafkaPrincipal, written ``type:name`` (``User:alice``)."""

    principal_type: str
    name: str

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """SecurityUtils.parseKafkaPrincipal: split at the first colon.  Unlike Kafka, an empty type
        or name is refused too, so that ``User:`` or ``:alice`` cannot grant anything by accident."""
        if not isinstance(text, str):
            raise ValueError(f"expected a principal string in format principalType:principalName, got {text!r}")
        principal_type, colon, name = text.partition(":")
        if not colon or not principal_type or not name:
            raise ValueError(f"expected a principal in format principalType:principalName (e.g. User:alice), "
                             f"got {text!r}")
        return cls(principal_type, name)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")  # KafkaPrincipal.ANONYMOUS: PLAINTEXT, and SSL without a client certificate
WILDCARD_PRINCIPAL = KafkaPrincipal("User", "*")  # AclEntry.WildcardPrincipal
WILDCARD_HOST = "*"  # AclEntry.WildcardHost
WILDCARD_RESOURCE = "*"  # ResourcePattern.WILDCARD_RESOURCE
CLUSTER_RESOURCE_NAME = "kafka-cluster"  # org.apache.kafka.common.resource.Resource.CLUSTER_NAME


@dataclass(frozen=True, slots=True)
class Acl:
    """One access control entry (Kafka's AclEntry / AccessControlEntry)."""

    principal: KafkaPrincipal
    permission: PermissionType
    host: str
    operation: Operation

    def sort_key(self) -> tuple[str, str, str, str]:
        return (str(self.principal), self.permission.value, self.operation.value, self.host)


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """org.apache.kafka.common.resource.ResourcePattern: a literal name (``*`` is the wildcard) or a
    prefix (KIP-290)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("resource name must not be empty")

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this pattern covers the concrete resource, as AclAuthorizer.matchingAcls decides."""
        if resource_type is not self.resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name in (name, WILDCARD_RESOURCE)


# --- ZooKeeper paths (kafka.zk.ZkData: LiteralAclStore, ExtendedAclStore, ZkAclChangeStore) ------

LITERAL_ACL_ROOT = "/kafka-acl"
EXTENDED_ACL_ROOT = "/kafka-acl-extended"
LITERAL_ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGES_SEQUENCE_PREFIX = "acl_changes_"


def acl_root_path(pattern_type: PatternType) -> str:
    """ZkAclStore.aclPath: ``/kafka-acl`` for literal patterns, ``/kafka-acl-extended/prefixed``
    (the pattern type's name in lower case) for the others."""
    if pattern_type is PatternType.LITERAL:
        return LITERAL_ACL_ROOT
    return f"{EXTENDED_ACL_ROOT}/{pattern_type.name.lower()}"


def resource_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    """ZkAclStore.path(resourceType), e.g. ``/kafka-acl/Topic``."""
    return f"{acl_root_path(pattern_type)}/{resource_type.value}"


def resource_path(resource: ResourcePattern) -> str:
    """ResourceZNode.path, e.g. ``/kafka-acl/Topic/orders`` or ``/kafka-acl-extended/prefixed/Group/app-``."""
    return f"{resource_type_path(resource.pattern_type, resource.resource_type)}/{resource.name}"


def acl_change_path(pattern_type: PatternType) -> str:
    """ZkAclChangeStore.aclChangePath: literal and extended changes are announced apart."""
    return LITERAL_ACL_CHANGES_PATH if pattern_type is PatternType.LITERAL else EXTENDED_ACL_CHANGES_PATH


def acl_change_sequence_path(pattern_type: PatternType) -> str:
    """ZkAclChangeStore.createPath: the prefix of the persistent sequential change node."""
    return f"{acl_change_path(pattern_type)}/{ACL_CHANGES_SEQUENCE_PREFIX}"


# --- Znode contents -------------------------------------------------------------------------------

_ACL_JSON_VERSION = 1  # AclEntry.CurrentVersion
_CHANGE_EVENT_VERSION = 1  # ExtendedAclChangeEvent.currentVersion


def _dumps(value: object) -> bytes:
    """Jackson's compact output, as kafka.utils.Json.encodeAsBytes writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def encode_acls(acls: Iterable[Acl]) -> bytes:
    """ResourceZNode.encode / AclEntry.toJsonCompatibleMap:
    ``{"version":1,"acls":[{"principal":..,"permissionType":..,"operation":..,"host":..}]}``.
    Kafka writes a Scala Set in no fixed order; the entries are sorted here so equal sets give equal bytes."""
    entries = [{"principal": str(acl.principal), "permissionType": acl.permission.value,
                "operation": acl.operation.value, "host": acl.host}
               for acl in sorted(set(acls), key=Acl.sort_key)]
    return _dumps({"version": _ACL_JSON_VERSION, "acls": entries})


def decode_acls(data: bytes | None) -> frozenset[Acl]:
    """AclEntry.fromBytes: no data (or empty data) is the empty set; version must be 1."""
    if not data:
        return frozenset()
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"ACL znode is not JSON: {exc}") from exc
    if document is None:
        return frozenset()
    if not isinstance(document, dict) or document.get("version") != _ACL_JSON_VERSION:
        raise ValueError(f"unsupported ACL znode content {data!r}: expected version {_ACL_JSON_VERSION}")
    entries = document.get("acls")
    if not isinstance(entries, list):
        raise ValueError(f"ACL znode content {data!r} has no acls list")
    acls = set()
    for entry in entries:
        try:
            principal, permission = entry["principal"], entry["permissionType"]
            operation, host = entry["operation"], entry["host"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed ACL entry {entry!r}") from exc
        if not isinstance(host, str):
            raise ValueError(f"malformed ACL entry {entry!r}: host must be a string")
        acls.add(Acl(KafkaPrincipal.parse(principal), PermissionType.parse(permission), host,
                     Operation.parse(operation)))
    return frozenset(acls)


def encode_acl_change(resource: ResourcePattern) -> bytes:
    """The content of an ``acl_changes_`` node.  LiteralAclChangeStore writes
    ``resourceType.toString + ":" + name`` where toString is the Java enum constant (``TOPIC:orders``);
    ExtendedAclChangeStore writes an ExtendedAclChangeEvent,
    ``{"version":1,"resourceType":"TOPIC","name":"app-","patternType":"PREFIXED"}``."""
    if resource.pattern_type is PatternType.LITERAL:
        return f"{resource.resource_type.name}:{resource.name}".encode()
    return _dumps({"version": _CHANGE_EVENT_VERSION, "resourceType": resource.resource_type.name,
                   "name": resource.name, "patternType": resource.pattern_type.name})


def decode_acl_change(pattern_type: PatternType, data: bytes) -> ResourcePattern:
    """The resource a change node under ``acl_change_path(pattern_type)`` names.  Literal nodes are
    split at the first colon and their type read case-insensitively (ResourceType.fromString), so
    the ``Topic:orders`` of older brokers decodes as well as ``TOPIC:orders``."""
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise ValueError(f"ACL change node is not UTF-8: {data!r}") from exc
    if pattern_type is PatternType.LITERAL:
        type_text, colon, name = text.partition(":")
        if not colon:
            raise ValueError(f"expected a string in format ResourceType:ResourceName but got {text!r}")
        return ResourcePattern(ResourceType.parse(type_text), name, PatternType.LITERAL)
    try:
        event = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"failed to parse ACL change event {text!r}") from exc
    if not isinstance(event, dict):
        raise ValueError(f"failed to parse ACL change event {text!r}")
    version = event.get("version")
    if not isinstance(version, int) or version > _CHANGE_EVENT_VERSION:
        raise ValueError(f"ACL change event received for unsupported version: {version!r}")
    try:
        resource_type, name, event_pattern = event["resourceType"], event["name"], event["patternType"]
    except KeyError as exc:
        raise ValueError(f"ACL change event {text!r} lacks {exc}") from exc
    if not isinstance(name, str):
        raise ValueError(f"ACL change event {text!r} has no resource name")
    return ResourcePattern(ResourceType.parse(resource_type), name, PatternType.parse(event_pattern))


# --- The decision (kafka.security.authorizer.AclAuthorizer) ---------------------------------------

_IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE,
                                   Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}


def implying_operations(operation: Operation) -> frozenset[Operation]:
    """The ALLOW operations that grant ``operation`` (AclAuthorizer.allowAclExists, AclOperation's
    javadoc): Describe is implied by Read, Write, Delete and Alter, DescribeConfigs by AlterConfigs,
    and an ACL for All grants anything."""
    return _IMPLIED_BY.get(operation, frozenset({operation})) | {Operation.ALL}


def matching_acls(cache: Mapping[ResourcePattern, Set[Acl]], resource_type: ResourceType,
                  name: str) -> list[Acl]:
    """AclAuthorizer.matchingAcls: the ACLs of the literal pattern for ``name``, of the literal
    wildcard ``*`` and of every prefixed pattern ``name`` starts with."""
    found: list[Acl] = []
    for literal in {name, WILDCARD_RESOURCE}:
        found.extend(cache.get(ResourcePattern(resource_type, literal, PatternType.LITERAL), ()))
    for pattern, acls in cache.items():
        if (pattern.pattern_type is PatternType.PREFIXED and pattern.resource_type is resource_type
                and name.startswith(pattern.name)):
            found.extend(acls)
    return found


def _matches(acl: Acl, permission: PermissionType, principal: KafkaPrincipal, host: str,
             operations: frozenset[Operation]) -> bool:
    """AclAuthorizer.matchingAclExists (``operations`` already includes All)."""
    return (acl.permission is permission
            and acl.principal in (principal, WILDCARD_PRINCIPAL)
            and acl.operation in operations
            and acl.host in (host, WILDCARD_HOST))


def parse_super_users(value: str | None) -> frozenset[KafkaPrincipal]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    if not value or not value.strip():
        return frozenset()
    return frozenset(KafkaPrincipal.parse(part.strip()) for part in value.split(";") if part.strip())


class AclAuthorizer:
    """AclAuthorizer.authorize for one action, over an ACL cache the caller owns and keeps current.

    ``super_users`` are always allowed.  Otherwise, with no ACL matching the resource at all the
    answer is ``allow.everyone.if.no.acl.found``; with some, a matching DENY refuses and else a
    matching ALLOW (with implied operations) is required.
    """

    def __init__(self, cache: Mapping[ResourcePattern, Set[Acl]], *,
                 super_users: Iterable[KafkaPrincipal] = (), allow_everyone_if_no_acl_found: bool = False) -> None:
        self.cache = cache
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found

    @classmethod
    def from_config(cls, cache: Mapping[ResourcePattern, Set[Acl]], config: Mapping[str, object]) -> AclAuthorizer:
        """Reads ``super.users`` and ``allow.everyone.if.no.acl.found`` (default false) as Kafka does."""
        allow = config.get("allow.everyone.if.no.acl.found", False)
        if isinstance(allow, str):
            allow = allow.strip().lower() == "true"
        super_users = config.get("super.users")
        return cls(cache, super_users=parse_super_users(super_users if isinstance(super_users, str) else None),
                   allow_everyone_if_no_acl_found=bool(allow))

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return principal in self.super_users

    def authorize(self, principal: KafkaPrincipal, host: str, operation: Operation,
                  resource_type: ResourceType, name: str) -> bool:
        """Whether ``principal`` connecting from ``host`` (the client's IP address as text) may
        perform ``operation`` on the concrete resource ``resource_type``/``name``."""
        if self.is_super_user(principal):
            return True
        acls = matching_acls(self.cache, resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        if any(_matches(acl, PermissionType.DENY, principal, host, frozenset({operation, Operation.ALL}))
               for acl in acls):
            return False
        allowing = implying_operations(operation)
        return any(_matches(acl, PermissionType.ALLOW, principal, host, allowing) for acl in acls)

    def authorize_by_resource_type(self, principal: KafkaPrincipal, host: str, operation: Operation,
                                   resource_type: ResourceType) -> bool:
        """KIP-679's authorizeByResourceType: whether ``principal`` may perform ``operation`` on
        at least one resource of ``resource_type``: an ALLOW ACL on some literal name or prefix
        that no DENY covers (a DENY on the literal wildcard ``*`` covers every one)."""
        if self.is_super_user(principal):
            return True
        operations = frozenset({operation, Operation.ALL})
        allowed: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        denied: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        for pattern, acls in self.cache.items():
            if pattern.resource_type is not resource_type:
                continue
            for acl in acls:
                if _matches(acl, PermissionType.DENY, principal, host, operations):
                    denied[pattern.pattern_type].add(pattern.name)
                elif _matches(acl, PermissionType.ALLOW, principal, host, operations):
                    allowed[pattern.pattern_type].add(pattern.name)
        if WILDCARD_RESOURCE in denied[PatternType.LITERAL]:
            return False

        def covered(name: str) -> bool:
            return any(name.startswith(prefix) for prefix in denied[PatternType.PREFIXED])

        return (any(not covered(prefix) for prefix in allowed[PatternType.PREFIXED])
                or any(name == WILDCARD_RESOURCE or (name not in denied[PatternType.LITERAL] and not covered(name))
                       for name in allowed[PatternType.LITERAL]))
