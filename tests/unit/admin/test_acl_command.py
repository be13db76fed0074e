"""kafka-acls.sh's flag checks and the ACLs its flags stand for (odradek.admin.acls), sans IO."""

from __future__ import annotations

import pytest

from odradek.admin.acls import (
    AclAction,
    AclCommandError,
    AclCommandOptions,
    bindings_to_add,
    filters_to_remove,
    format_acl,
)
from odradek.admin.configs import (
    ConfigCommandError,
    parse_add_config,
    scram_iterations_and_password,
)
from odradek.security.acl_filters import ResourcePatternFilter
from odradek.security.acls import (
    Acl,
    KafkaPrincipal,
    Operation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)

ALICE = KafkaPrincipal("User", "alice")


def allow(op: Operation, host: str = "*") -> Acl:
    return Acl(ALICE, PermissionType.ALLOW, host, op)


def test_plain_add_defaults_to_all_from_any_host() -> None:
    opts = AclCommandOptions(AclAction.ADD, topics=("t",), allow_principals=("User:alice",))
    opts.check()
    assert bindings_to_add(opts) == {ResourcePattern(ResourceType.TOPIC, "t"): frozenset({allow(Operation.ALL)})}


def test_hosts_operations_and_deny() -> None:
    opts = AclCommandOptions(AclAction.ADD, groups=("g",), allow_principals=("User:alice",),
                             allow_hosts=("10.0.0.1", "10.0.0.2"), deny_principals=("User:bob",),
                             operations=("Read", "describe"))
    opts.check()
    acls = bindings_to_add(opts)[ResourcePattern(ResourceType.GROUP, "g")]
    assert len(acls) == 6
    assert Acl(KafkaPrincipal("User", "bob"), PermissionType.DENY, "*", Operation.DESCRIBE) in acls
    assert allow(Operation.READ, "10.0.0.2") in acls


def test_producer_and_consumer_acls() -> None:
    opts = AclCommandOptions(AclAction.ADD, topics=("t",), groups=("g",), transactional_ids=("tx",),
                             allow_principals=("User:alice",), producer=True, consumer=True, idempotent=True)
    opts.check()
    got = bindings_to_add(opts)
    assert got[ResourcePattern(ResourceType.TOPIC, "t")] == {
        allow(op) for op in (Operation.WRITE, Operation.DESCRIBE, Operation.CREATE, Operation.READ)}
    assert got[ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx")] == {
        allow(Operation.WRITE), allow(Operation.DESCRIBE)}
    assert got[ResourcePattern(ResourceType.GROUP, "g")] == {allow(Operation.READ)}
    assert got[ResourcePattern(ResourceType.CLUSTER, "kafka-cluster")] == {allow(Operation.IDEMPOTENT_WRITE)}


def test_prefixed_pattern() -> None:
    opts = AclCommandOptions(AclAction.ADD, topics=("app-",), allow_principals=("User:alice",),
                             resource_pattern_type="PREFIXED")
    opts.check()
    assert list(bindings_to_add(opts)) == [ResourcePattern(ResourceType.TOPIC, "app-", PatternType.PREFIXED)]


def test_remove_without_principal_removes_everything_of_the_filter() -> None:
    opts = AclCommandOptions(AclAction.REMOVE, topics=("t",), resource_pattern_type="any")
    opts.check()
    assert filters_to_remove(opts) == {ResourcePatternFilter(ResourceType.TOPIC, "t", None): frozenset()}


@pytest.mark.parametrize(("opts", "message"), [
    (AclCommandOptions(AclAction.ADD, allow_principals=("User:a",)), "at least one resource"),
    (AclCommandOptions(AclAction.ADD, topics=("t",)), "--allow-principal, --deny-principal"),
    (AclCommandOptions(AclAction.ADD, topics=("t",), allow_principals=("User:a",), resource_pattern_type="match"),
     "'MATCH' is not valid when adding acls"),
    (AclCommandOptions(AclAction.ADD, topics=("t",), allow_principals=("User:a",), resource_pattern_type="glob"),
     "Invalid --resource-pattern-type"),
    (AclCommandOptions(AclAction.ADD, cluster=True, allow_principals=("User:a",), operations=("Read",)),
     "ResourceType CLUSTER only supports operations CREATE,CLUSTER_ACTION"),
    (AclCommandOptions(AclAction.ADD, transactional_ids=("x",), allow_principals=("User:a",), operations=("Read",)),
     "ResourceType TRANSACTIONAL_ID only supports"),
    (AclCommandOptions(AclAction.LIST, allow_principals=("User:a",)), "can't be used with option \"--allow-principal\""),
    (AclCommandOptions(AclAction.ADD, topics=("t",), allow_principals=("User:a",), producer=True,
                       deny_principals=("User:b",)), "can't be used with option \"--deny-principal\""),
    (AclCommandOptions(AclAction.ADD, topics=("t",), groups=("g",), cluster=True, allow_principals=("User:a",),
                       consumer=True), "no --cluster or --transactional-id"),
    (AclCommandOptions(AclAction.ADD, topics=("t",), allow_principals=("User:",)), "principalType:principalName"),
    (AclCommandOptions(AclAction.ADD, topics=(" ",), allow_principals=("User:a",)), "must not be empty"),
])
def test_bad_combinations(opts: AclCommandOptions, message: str) -> None:
    with pytest.raises(AclCommandError, match=None) as err:
        opts.check()
    assert message in str(err.value)


def test_acl_text_is_kafkas() -> None:
    assert format_acl(allow(Operation.IDEMPOTENT_WRITE)) == \
        "(principal=User:alice, host=*, operation=IDEMPOTENT_WRITE, permissionType=ALLOW)"
    assert str(ResourcePatternFilter(None, None, None)) == "ResourcePattern(resourceType=ANY, name=<any>, patternType=ANY)"


def test_add_config_parsing() -> None:
    assert parse_add_config("SCRAM-SHA-512=[iterations=8192,password=a=b,c],retention.ms = 5") == {
        "SCRAM-SHA-512": "iterations=8192,password=a=b,c", "retention.ms": "5"}
    assert parse_add_config("ssl.endpoint.identification.algorithm=") == {"ssl.endpoint.identification.algorithm": ""}
    with pytest.raises(ConfigCommandError, match="key=val"):
        parse_add_config("a=1,b")
    assert scram_iterations_and_password("SCRAM-SHA-256", "password=p,w") == (4096, "p,w")
    with pytest.raises(ConfigCommandError, match="less than the minimum 4096"):
        scram_iterations_and_password("SCRAM-SHA-256", "iterations=10,password=x")
