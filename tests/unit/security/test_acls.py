"""The ACL model, its ZooKeeper encodings and the AclAuthorizer decision (odradek.security.acls),
checked against Kafka 2.8's AclEntry, ZkData and AclAuthorizer."""

from __future__ import annotations

import json

import pytest

from odradek.security.acls import (
    ACL_CHANGES_SEQUENCE_PREFIX,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    Acl,
    AclAuthorizer,
    KafkaPrincipal,
    Operation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    acl_change_path,
    acl_change_sequence_path,
    acl_root_path,
    decode_acl_change,
    decode_acls,
    encode_acl_change,
    encode_acls,
    implying_operations,
    matching_acls,
    parse_super_users,
    resource_path,
    resource_type_path,
)

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP


def acl(principal: KafkaPrincipal, permission: PermissionType, operation: Operation, host: str = "*") -> Acl:
    return Acl(principal, permission, host, operation)


def literal(name: str, resource_type: ResourceType = TOPIC) -> ResourcePattern:
    return ResourcePattern(resource_type, name, PatternType.LITERAL)


def prefixed(name: str, resource_type: ResourceType = TOPIC) -> ResourcePattern:
    return ResourcePattern(resource_type, name, PatternType.PREFIXED)


# --- principals -------------------------------------------------------------------------------------

def test_principal_parses_at_the_first_colon() -> None:
    assert KafkaPrincipal.parse("User:alice") == ALICE
    assert KafkaPrincipal.parse("User:CN=alice,OU=x:y") == KafkaPrincipal("User", "CN=alice,OU=x:y")
    assert KafkaPrincipal.parse("User:*") == WILDCARD_PRINCIPAL
    assert str(ALICE) == "User:alice"


@pytest.mark.parametrize("bad", ["alice", "", ":alice", "User:", ":"])
def test_bad_principal_strings_are_refused_clearly(bad: str) -> None:
    with pytest.raises(ValueError, match="principalType:principalName"):
        KafkaPrincipal.parse(bad)


def test_super_users_are_semicolon_separated() -> None:
    assert parse_super_users("User:admin; User:broker") == {KafkaPrincipal("User", "admin"),
                                                              KafkaPrincipal("User", "broker")}
    assert parse_super_users("") == frozenset()
    assert parse_super_users(None) == frozenset()
    with pytest.raises(ValueError):
        parse_super_users("admin")


# --- names ----------------------------------------------------------------------------------------

def test_names_follow_security_utils() -> None:
    assert [t.value for t in ResourceType] == ["Topic", "Group", "Cluster", "TransactionalId", "DelegationToken"]
    assert {o.value for o in Operation} == {"All", "Read", "Write", "Create", "Delete", "Alter", "Describe",
                                            "ClusterAction", "DescribeConfigs", "AlterConfigs", "IdempotentWrite"}
    assert Operation.parse("IdempotentWrite") is Operation.IDEMPOTENT_WRITE
    assert Operation.parse("IDEMPOTENT_WRITE") is Operation.IDEMPOTENT_WRITE
    assert ResourceType.parse("transactional_id") is ResourceType.TRANSACTIONAL_ID
    assert PermissionType.parse("Deny") is DENY
    with pytest.raises(ValueError, match="unknown operation 'Fly'"):
        Operation.parse("Fly")


# --- znode JSON -----------------------------------------------------------------------------------

KAFKA_SINGLE = b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}'


def test_acl_json_is_byte_compatible_with_kafka() -> None:
    acls = {acl(ALICE, ALLOW, Operation.READ)}
    assert encode_acls(acls) == KAFKA_SINGLE
    assert decode_acls(KAFKA_SINGLE) == acls


def test_acl_json_round_trips_every_operation_and_is_deterministic() -> None:
    acls = {acl(p, perm, op, host) for p in (ALICE, WILDCARD_PRINCIPAL) for perm in PermissionType
            for op in Operation for host in ("*", "10.0.0.1")}
    data = encode_acls(acls)
    assert decode_acls(data) == acls
    assert encode_acls(list(reversed(sorted(acls, key=Acl.sort_key)))) == data
    names = {entry["operation"] for entry in json.loads(data)["acls"]}
    assert "DescribeConfigs" in names and "ClusterAction" in names


def test_acl_json_decodes_kafka_doc_example_with_spaces_and_other_key_order() -> None:
    # The example in ZkData's ZkAclStore doc comment.
    data = (b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Allow","operation": "Read",'
            b'"principal": "User:alice"}]}')
    assert decode_acls(data) == {acl(ALICE, ALLOW, Operation.READ, "host1")}


def test_acl_json_empty_and_bad() -> None:
    assert decode_acls(b"") == frozenset()
    assert decode_acls(None) == frozenset()
    assert encode_acls([]) == b'{"version":1,"acls":[]}'
    with pytest.raises(ValueError, match="version"):
        decode_acls(b'{"version":2,"acls":[]}')
    with pytest.raises(ValueError, match="not JSON"):
        decode_acls(b"{nope")
    with pytest.raises(ValueError, match="malformed"):
        decode_acls(b'{"version":1,"acls":[{"principal":"User:alice"}]}')
    with pytest.raises(ValueError, match="principalType:principalName"):
        decode_acls(b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow",'
                    b'"operation":"Read","host":"*"}]}')


# --- paths ----------------------------------------------------------------------------------------

def test_acl_paths() -> None:
    assert acl_root_path(PatternType.LITERAL) == "/kafka-acl"
    assert acl_root_path(PatternType.PREFIXED) == "/kafka-acl-extended/prefixed"
    assert resource_type_path(PatternType.LITERAL, ResourceType.TRANSACTIONAL_ID) == "/kafka-acl/TransactionalId"
    assert resource_path(literal("orders")) == "/kafka-acl/Topic/orders"
    assert resource_path(literal("*", GROUP)) == "/kafka-acl/Group/*"
    assert resource_path(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster")) == "/kafka-acl/Cluster/kafka-cluster"
    assert resource_path(prefixed("app-", GROUP)) == "/kafka-acl-extended/prefixed/Group/app-"


def test_change_paths() -> None:
    assert ACL_CHANGES_SEQUENCE_PREFIX == "acl_changes_"
    assert acl_change_path(PatternType.LITERAL) == "/kafka-acl-changes"
    assert acl_change_path(PatternType.PREFIXED) == "/kafka-acl-extended-changes"
    assert acl_change_sequence_path(PatternType.LITERAL) == "/kafka-acl-changes/acl_changes_"
    assert acl_change_sequence_path(PatternType.PREFIXED) == "/kafka-acl-extended-changes/acl_changes_"


# --- change notifications -------------------------------------------------------------------------

def test_literal_change_is_enum_constant_colon_name() -> None:
    resource = literal("my:topic", ResourceType.TRANSACTIONAL_ID)
    assert encode_acl_change(resource) == b"TRANSACTIONAL_ID:my:topic"
    assert decode_acl_change(PatternType.LITERAL, b"TRANSACTIONAL_ID:my:topic") == resource
    # Older brokers wrote the Pascal name; ResourceType.fromString takes any case.
    assert decode_acl_change(PatternType.LITERAL, b"Topic:orders") == literal("orders")
    with pytest.raises(ValueError, match="ResourceType:ResourceName"):
        decode_acl_change(PatternType.LITERAL, b"orders")


def test_extended_change_is_json_event() -> None:
    resource = prefixed("app-", GROUP)
    data = encode_acl_change(resource)
    assert data == b'{"version":1,"resourceType":"GROUP","name":"app-","patternType":"PREFIXED"}'
    assert decode_acl_change(PatternType.PREFIXED, data) == resource
    with pytest.raises(ValueError, match="unsupported version"):
        decode_acl_change(PatternType.PREFIXED,
                          b'{"version":2,"resourceType":"GROUP","name":"a","patternType":"PREFIXED"}')
    with pytest.raises(ValueError, match="failed to parse"):
        decode_acl_change(PatternType.PREFIXED, b"GROUP:a")


# --- matching -------------------------------------------------------------------------------------

def test_matching_literal_wildcard_and_prefixed() -> None:
    exact, star, pre, other_pre, other_type = (acl(ALICE, ALLOW, op) for op in (
        Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER))
    cache = {
        literal("orders"): {exact},
        literal("*"): {star},
        prefixed("ord"): {pre},
        prefixed("orders-eu"): {other_pre},  # longer than the name: no match
        literal("orders", GROUP): {other_type},
        literal("orders-eu"): {acl(BOB, ALLOW, Operation.READ)},
    }
    assert sorted(matching_acls(cache, TOPIC, "orders"), key=Acl.sort_key) == sorted(
        [exact, star, pre], key=Acl.sort_key)
    assert set(matching_acls(cache, TOPIC, "payments")) == {star}
    assert set(matching_acls(cache, GROUP, "orders")) == {other_type}
    assert literal("*").matches(TOPIC, "anything") and not literal("*").matches(GROUP, "anything")
    assert prefixed("ord").matches(TOPIC, "orders") and not prefixed("ord").matches(TOPIC, "or")
    # A prefixed "*" is a literal prefix, not a wildcard.
    assert not prefixed("*").matches(TOPIC, "orders")


def test_resource_name_must_not_be_empty() -> None:
    with pytest.raises(ValueError):
        literal("")


# --- the decision -----------------------------------------------------------------------------------

def test_implied_operations_table() -> None:
    assert implying_operations(Operation.DESCRIBE) == {Operation.DESCRIBE, Operation.READ, Operation.WRITE,
                                                       Operation.DELETE, Operation.ALTER, Operation.ALL}
    assert implying_operations(Operation.DESCRIBE_CONFIGS) == {Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
                                                               Operation.ALL}
    for op in (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.CLUSTER_ACTION,
               Operation.IDEMPOTENT_WRITE, Operation.ALTER_CONFIGS):
        assert implying_operations(op) == {op, Operation.ALL}


@pytest.mark.parametrize("granted", list(Operation))
@pytest.mark.parametrize("asked", [op for op in Operation if op is not Operation.ALL])
def test_implications_through_authorize(granted: Operation, asked: Operation) -> None:
    authorizer = AclAuthorizer({literal("t"): {acl(ALICE, ALLOW, granted)}})
    expected = (granted in (asked, Operation.ALL)
                or (asked is Operation.DESCRIBE and granted in (Operation.READ, Operation.WRITE, Operation.DELETE,
                                                                Operation.ALTER))
                or (asked is Operation.DESCRIBE_CONFIGS and granted is Operation.ALTER_CONFIGS))
    assert authorizer.authorize(ALICE, "1.2.3.4", asked, TOPIC, "t") is expected


def test_deny_does_not_imply() -> None:
    # Kafka matches DENY on the operation itself or All only: denying Read leaves Describe allowed.
    authorizer = AclAuthorizer({literal("t"): {acl(ALICE, ALLOW, Operation.ALL), acl(ALICE, DENY, Operation.READ)}})
    assert not authorizer.authorize(ALICE, "h", Operation.READ, TOPIC, "t")
    assert authorizer.authorize(ALICE, "h", Operation.DESCRIBE, TOPIC, "t")


def test_deny_wins_across_patterns_and_wildcards() -> None:
    cache = {
        literal("orders"): {acl(ALICE, ALLOW, Operation.READ)},
        prefixed("ord"): {acl(WILDCARD_PRINCIPAL, DENY, Operation.ALL, "10.0.0.9")},
    }
    authorizer = AclAuthorizer(cache)
    assert authorizer.authorize(ALICE, "10.0.0.1", Operation.READ, TOPIC, "orders")
    assert not authorizer.authorize(ALICE, "10.0.0.9", Operation.READ, TOPIC, "orders")
    cache[literal("*")] = {acl(ALICE, DENY, Operation.READ)}
    assert not authorizer.authorize(ALICE, "10.0.0.1", Operation.READ, TOPIC, "orders")


def test_wildcard_principal_and_host_filtering() -> None:
    authorizer = AclAuthorizer({
        literal("t"): {acl(WILDCARD_PRINCIPAL, ALLOW, Operation.READ, "10.0.0.1"),
                       acl(BOB, ALLOW, Operation.WRITE, WILDCARD_HOST)},
    })
    assert authorizer.authorize(ALICE, "10.0.0.1", Operation.READ, TOPIC, "t")
    assert not authorizer.authorize(ALICE, "10.0.0.2", Operation.READ, TOPIC, "t")
    assert authorizer.authorize(BOB, "10.0.0.2", Operation.WRITE, TOPIC, "t")
    assert not authorizer.authorize(ALICE, "10.0.0.1", Operation.WRITE, TOPIC, "t")
    # The principal type counts: a Group-typed "alice" is not User:alice.
    assert not authorizer.authorize(KafkaPrincipal("Group", "bob"), "10.0.0.2", Operation.WRITE, TOPIC, "t")


def test_super_users_bypass_deny() -> None:
    admin = KafkaPrincipal("User", "admin")
    authorizer = AclAuthorizer({literal("t"): {acl(WILDCARD_PRINCIPAL, DENY, Operation.ALL)}}, super_users={admin})
    assert authorizer.authorize(admin, "h", Operation.DELETE, TOPIC, "t")
    assert authorizer.authorize(admin, "h", Operation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster")
    assert not authorizer.authorize(ALICE, "h", Operation.READ, TOPIC, "t")


@pytest.mark.parametrize("allow_everyone", [True, False])
def test_allow_everyone_if_no_acl_found(allow_everyone: bool) -> None:
    cache = {literal("guarded"): {acl(BOB, ALLOW, Operation.READ)}, prefixed("x", GROUP): {acl(BOB, ALLOW,
                                                                                                 Operation.READ)}}
    authorizer = AclAuthorizer(cache, allow_everyone_if_no_acl_found=allow_everyone)
    assert authorizer.authorize(ALICE, "h", Operation.READ, TOPIC, "open") is allow_everyone
    assert authorizer.authorize(ALICE, "h", Operation.READ, GROUP, "y") is allow_everyone
    # Once any ACL matches the resource, the flag no longer applies.
    assert not authorizer.authorize(ALICE, "h", Operation.READ, TOPIC, "guarded")
    assert not authorizer.authorize(ALICE, "h", Operation.READ, GROUP, "xy")


def test_empty_acl_set_counts_as_no_acls() -> None:
    authorizer = AclAuthorizer({literal("t"): set()}, allow_everyone_if_no_acl_found=True)
    assert authorizer.authorize(ALICE, "h", Operation.WRITE, TOPIC, "t")


def test_from_config() -> None:
    authorizer = AclAuthorizer.from_config({}, {"super.users": "User:admin;User:broker",
                                                "allow.everyone.if.no.acl.found": "true"})
    assert authorizer.super_users == {KafkaPrincipal("User", "admin"), KafkaPrincipal("User", "broker")}
    assert authorizer.allow_everyone_if_no_acl_found
    default = AclAuthorizer.from_config({}, {})
    assert not default.allow_everyone_if_no_acl_found and not default.super_users
    assert not default.authorize(ALICE, "h", Operation.READ, TOPIC, "t")


def test_cache_is_read_live() -> None:
    cache: dict[ResourcePattern, set[Acl]] = {}
    authorizer = AclAuthorizer(cache)
    assert not authorizer.authorize(ALICE, "h", Operation.READ, TOPIC, "t")
    cache[prefixed("t")] = {acl(ALICE, ALLOW, Operation.READ)}
    assert authorizer.authorize(ALICE, "h", Operation.READ, TOPIC, "t")


# --- by resource type (KIP-679) ---------------------------------------------------------------------


def test_authorize_by_resource_type_needs_one_allowed_name_no_deny_covers() -> None:
    by_type = AclAuthorizer({}).authorize_by_resource_type
    assert not by_type(ALICE, "h", Operation.WRITE, TOPIC)
    cache = {literal("orders"): {acl(ALICE, ALLOW, Operation.WRITE)}, literal("x", GROUP): {acl(BOB, ALLOW, Operation.ALL)}}
    authorizer = AclAuthorizer(cache)
    assert authorizer.authorize_by_resource_type(ALICE, "h", Operation.WRITE, TOPIC)
    assert not authorizer.authorize_by_resource_type(ALICE, "h", Operation.READ, TOPIC)
    assert not authorizer.authorize_by_resource_type(BOB, "h", Operation.WRITE, TOPIC)  # a group, not a topic
    cache[prefixed("ord")] = {acl(ALICE, DENY, Operation.WRITE)}  # covers the one allowed name
    assert not authorizer.authorize_by_resource_type(ALICE, "h", Operation.WRITE, TOPIC)
    cache[prefixed("pay")] = {acl(ALICE, ALLOW, Operation.ALL)}  # a prefix no deny covers
    assert authorizer.authorize_by_resource_type(ALICE, "h", Operation.WRITE, TOPIC)
    cache[literal("*")] = {acl(WILDCARD_PRINCIPAL, DENY, Operation.WRITE)}  # denies every topic
    assert not authorizer.authorize_by_resource_type(ALICE, "h", Operation.WRITE, TOPIC)
    assert AclAuthorizer(cache, super_users={ALICE}).authorize_by_resource_type(ALICE, "h", Operation.WRITE, TOPIC)
