"""ACL binding filters (Kafka's ResourcePatternFilter / AccessControlEntryFilter) and wire codes."""

from __future__ import annotations

import pytest

from odradek.security.acl_filters import (
    MATCH,
    AclBindingFilter,
    AclFilter,
    ResourcePatternFilter,
    matching_bindings,
    operation_code,
    operation_from_code,
    pattern_type_from_code,
    resource_type_code,
    resource_type_from_code,
)
from odradek.security.acls import (
    Acl,
    KafkaPrincipal,
    Operation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)

LITERAL = ResourcePattern(ResourceType.TOPIC, "orders")
WILDCARD = ResourcePattern(ResourceType.TOPIC, "*")
PREFIX = ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED)
OTHER_PREFIX = ResourcePattern(ResourceType.TOPIC, "x", PatternType.PREFIXED)
GROUP = ResourcePattern(ResourceType.GROUP, "orders")
ALL_PATTERNS = (LITERAL, WILDCARD, PREFIX, OTHER_PREFIX, GROUP)


@pytest.mark.parametrize(("pattern_filter", "expected"), [
    (ResourcePatternFilter(ResourceType.TOPIC, "orders", MATCH), {LITERAL, WILDCARD, PREFIX}),
    (ResourcePatternFilter(ResourceType.TOPIC, "orders", None), {LITERAL}),
    (ResourcePatternFilter(ResourceType.TOPIC, "ord", None), {PREFIX}),
    (ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL), {LITERAL}),
    (ResourcePatternFilter(ResourceType.TOPIC, None, PatternType.PREFIXED), {PREFIX, OTHER_PREFIX}),
    (ResourcePatternFilter(None, "orders", None), {LITERAL, GROUP}),
    (ResourcePatternFilter(None, None, None), set(ALL_PATTERNS)),
])
def test_pattern_filters(pattern_filter: ResourcePatternFilter, expected: set[ResourcePattern]) -> None:
    assert {p for p in ALL_PATTERNS if pattern_filter.matches(p)} == expected


def test_entry_filter_matches_exactly() -> None:
    alice = Acl(KafkaPrincipal("User", "alice"), PermissionType.ALLOW, "*", Operation.READ)
    anyone = Acl(KafkaPrincipal("User", "*"), PermissionType.ALLOW, "*", Operation.READ)
    assert AclFilter(principal="User:alice").matches(alice)
    assert not AclFilter(principal="User:*").matches(alice)
    assert AclFilter(principal="User:*").matches(anyone)
    assert not AclFilter(operation=Operation.ALL).matches(alice)  # a filter names ACLs, it does not authorize
    assert AclFilter.exactly(alice).matches(alice) and not AclFilter.exactly(alice).matches(anyone)
    found = matching_bindings({LITERAL: {alice, anyone}, GROUP: {alice}},
                              [AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, None, None),
                                                AclFilter(principal="User:alice"))])
    assert found == {LITERAL: frozenset({alice})}


def test_codes_round_trip_and_refuse_unknown() -> None:
    for member in ResourceType:
        assert resource_type_from_code(resource_type_code(member)) is member
    for op in Operation:
        assert operation_from_code(operation_code(op)) is op
    assert resource_type_from_code(1, allow_any=True) is None
    assert pattern_type_from_code(2, allow_any=True) == MATCH
    with pytest.raises(ValueError, match="only valid in a filter"):
        pattern_type_from_code(2)
    with pytest.raises(ValueError, match="unknown operation code 0"):
        operation_from_code(0, allow_any=True)
    with pytest.raises(ValueError, match="unknown resource type code 1"):
        resource_type_from_code(1)
