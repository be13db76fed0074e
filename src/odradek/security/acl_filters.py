"""ACL binding filters and the ACL enums' wire codes, sans IO.

Kafka's org.apache.kafka.common.acl.AclBindingFilter (a ResourcePatternFilter plus an
AccessControlEntryFilter) is what DescribeAcls and DeleteAcls carry, what ``kafka-acls.sh --list``
and ``--remove`` build, and what the ZooKeeper-backed store answers.  ``None`` stands for Kafka's
ANY (and, for names, principals and hosts, for the null that matches everything); the pattern
filter also knows MATCH (KIP-290): every pattern that would apply to a concrete resource name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass

from odradek.security.acls import (
    WILDCARD_RESOURCE,
    Acl,
    Operation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)

__all__ = [
    "ANY_CODE",
    "MATCH",
    "AclBindingFilter",
    "AclFilter",
    "ResourcePatternFilter",
    "matching_bindings",
    "operation_code",
    "operation_from_code",
    "pattern_type_code",
    "pattern_type_from_code",
    "permission_code",
    "permission_from_code",
    "resource_type_code",
    "resource_type_from_code",
]

# --- Wire codes (the ``byte code`` of Kafka's enums; 0 is UNKNOWN, 1 is ANY everywhere) ----------

ANY_CODE = 1
MATCH = "MATCH"  # PatternType.MATCH, a filter-only pattern type (code 2)
_RESOURCE_TYPE_CODES = {ResourceType.TOPIC: 2, ResourceType.GROUP: 3, ResourceType.CLUSTER: 4,
                        ResourceType.TRANSACTIONAL_ID: 5, ResourceType.DELEGATION_TOKEN: 6}
_PATTERN_TYPE_CODES: dict[PatternType | str, int] = {MATCH: 2, PatternType.LITERAL: 3, PatternType.PREFIXED: 4}
_OPERATION_CODES = {Operation.ALL: 2, Operation.READ: 3, Operation.WRITE: 4, Operation.CREATE: 5,
                    Operation.DELETE: 6, Operation.ALTER: 7, Operation.DESCRIBE: 8, Operation.CLUSTER_ACTION: 9,
                    Operation.DESCRIBE_CONFIGS: 10, Operation.ALTER_CONFIGS: 11, Operation.IDEMPOTENT_WRITE: 12}
_PERMISSION_CODES = {PermissionType.DENY: 2, PermissionType.ALLOW: 3}


def _inverse(codes: Mapping) -> dict:
    return {code: member for member, code in codes.items()}


_RESOURCE_TYPES, _PATTERN_TYPES = _inverse(_RESOURCE_TYPE_CODES), _inverse(_PATTERN_TYPE_CODES)
_OPERATIONS, _PERMISSIONS = _inverse(_OPERATION_CODES), _inverse(_PERMISSION_CODES)


def resource_type_code(value: ResourceType | None) -> int:
    return ANY_CODE if value is None else _RESOURCE_TYPE_CODES[value]


def pattern_type_code(value: PatternType | str | None) -> int:
    return ANY_CODE if value is None else _PATTERN_TYPE_CODES[value]


def operation_code(value: Operation | None) -> int:
    return ANY_CODE if value is None else _OPERATION_CODES[value]


def permission_code(value: PermissionType | None) -> int:
    return ANY_CODE if value is None else _PERMISSION_CODES[value]


def _from_code(table: Mapping, code: int, what: str, *, allow_any: bool):
    if allow_any and code == ANY_CODE:
        return None
    try:
        return table[code]
    except KeyError:
        raise ValueError(f"unknown {what} code {code}") from None


def resource_type_from_code(code: int, *, allow_any: bool = False) -> ResourceType | None:
    """The ResourceType of a wire code; None for ANY when ``allow_any``; ValueError for UNKNOWN."""
    return _from_code(_RESOURCE_TYPES, code, "resource type", allow_any=allow_any)


def pattern_type_from_code(code: int, *, allow_any: bool = False) -> PatternType | str | None:
    """LITERAL or PREFIXED; with ``allow_any`` also None (ANY) and :data:`MATCH`."""
    if not allow_any and code == _PATTERN_TYPE_CODES[MATCH]:
        raise ValueError("pattern type MATCH is only valid in a filter")
    return _from_code(_PATTERN_TYPES, code, "pattern type", allow_any=allow_any)


def operation_from_code(code: int, *, allow_any: bool = False) -> Operation | None:
    return _from_code(_OPERATIONS, code, "operation", allow_any=allow_any)


def permission_from_code(code: int, *, allow_any: bool = False) -> PermissionType | None:
    return _from_code(_PERMISSIONS, code, "permission type", allow_any=allow_any)


# --- Filters -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Kafka's ResourcePatternFilter: None is ANY (type, pattern type) or any name."""

    resource_type: ResourceType | None = None
    name: str | None = None
    pattern_type: PatternType | str | None = PatternType.LITERAL

    def matches(self, pattern: ResourcePattern) -> bool:
        """ResourcePatternFilter.matches: with MATCH, a literal pattern applies if it names the
        resource or is the wildcard, a prefixed one if the name starts with its prefix."""
        if self.resource_type is not None and self.resource_type is not pattern.resource_type:
            return False
        if self.pattern_type not in (None, MATCH) and self.pattern_type is not pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type is None or self.pattern_type is pattern.pattern_type:
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return pattern.name in (self.name, WILDCARD_RESOURCE)

    def __str__(self) -> str:
        """Kafka's ResourcePatternFilter.toString (kafka-acls.sh prints it)."""
        resource_type = "ANY" if self.resource_type is None else self.resource_type.name
        pattern_type = "ANY" if self.pattern_type is None else (
            self.pattern_type if isinstance(self.pattern_type, str) else self.pattern_type.name)
        name = "<any>" if self.name is None else self.name
        return f"ResourcePattern(resourceType={resource_type}, name={name}, patternType={pattern_type})"


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AccessControlEntryFilter: None matches anything; values match exactly (a filter
    for principal ``User:*`` finds the wildcard ACLs only, not every principal's)."""

    principal: str | None = None
    host: str | None = None
    operation: Operation | None = None
    permission: PermissionType | None = None

    def matches(self, acl: Acl) -> bool:
        return ((self.principal is None or self.principal == str(acl.principal))
                and (self.host is None or self.host == acl.host)
                and (self.operation is None or self.operation is acl.operation)
                and (self.permission is None or self.permission is acl.permission))

    @classmethod
    def exactly(cls, acl: Acl) -> AclFilter:
        """AccessControlEntry.toFilter."""
        return cls(str(acl.principal), acl.host, acl.operation, acl.permission)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter; the default matches every binding (AclBindingFilter.ANY)."""

    pattern: ResourcePatternFilter = ResourcePatternFilter(pattern_type=None)
    entry: AclFilter = AclFilter()

    def matches(self, pattern: ResourcePattern, acl: Acl) -> bool:
        return self.pattern.matches(pattern) and self.entry.matches(acl)


def matching_bindings(acls: Mapping[ResourcePattern, Set[Acl]], filters: Iterable[AclBindingFilter]
                      ) -> dict[ResourcePattern, frozenset[Acl]]:
    """The bindings any of ``filters`` matches, grouped by pattern (patterns left empty dropped)."""
    filters = list(filters)
    found: dict[ResourcePattern, frozenset[Acl]] = {}
    for pattern, entries in acls.items():
        wanted = frozenset(acl for acl in entries if any(f.matches(pattern, acl) for f in filters))
        if wanted:
            found[pattern] = wanted
    return found
