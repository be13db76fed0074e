"""ACLs written to ZooKeeper the way Kafka's ZkAclStore does (the resource's znode, then a
change notification), for tests of the brokers' authorizer; and the client settings of a test
principal.

The principal of these helpers is User:ANONYMOUS on PLAINTEXT (so raw requests can be checked
too); named SASL users are exercised in tests/integration/test_acls_sasl_users.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from odradek.local.cluster import LocalCluster
from odradek.security.acls import (
    ANONYMOUS,
    Acl,
    KafkaPrincipal,
    Operation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    acl_change_sequence_path,
    decode_acls,
    encode_acl_change,
    encode_acls,
    resource_path,
)

__all__ = ["ANONYMOUS", "CLUSTER", "AclWriter", "allow", "client_config", "deny", "group", "topic"]


def allow(operation: Operation, principal: KafkaPrincipal = ANONYMOUS, host: str = "*") -> Acl:
    return Acl(principal, PermissionType.ALLOW, host, operation)


def deny(operation: Operation, principal: KafkaPrincipal = ANONYMOUS, host: str = "*") -> Acl:
    return Acl(principal, PermissionType.DENY, host, operation)


def client_config(cluster: LocalCluster, principal: KafkaPrincipal = ANONYMOUS) -> dict[str, str]:
    """confluent-kafka settings that connect as ``principal``: ANONYMOUS on PLAINTEXT (named
    users log in over SASL: see test_acls_sasl_users.py)."""
    if principal != ANONYMOUS:
        raise ValueError(f"{principal}: only User:ANONYMOUS connects over PLAINTEXT")
    return {"bootstrap.servers": cluster.bootstrap_servers}


class AclWriter:
    """Adds and removes ACLs of resource patterns in a cluster's ZooKeeper, announcing each
    change through ``/kafka-acl-changes`` or ``/kafka-acl-extended-changes``."""

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk

    def _read(self, pattern: ResourcePattern) -> frozenset[Acl]:
        try:
            return decode_acls(self.zk.get(resource_path(pattern))[0])
        except NoNodeError:
            return frozenset()

    def set(self, pattern: ResourcePattern, acls: Iterable[Acl]) -> None:
        """Replace the pattern's ACLs (none: delete its znode) and notify the brokers."""
        acls = frozenset(acls)
        path = resource_path(pattern)
        if acls:
            if self.zk.exists(path):
                self.zk.set(path, encode_acls(acls))
            else:
                self.zk.create(path, encode_acls(acls), makepath=True)
        elif self.zk.exists(path):
            self.zk.delete(path)
        self.zk.create(acl_change_sequence_path(pattern.pattern_type), encode_acl_change(pattern),
                       sequence=True, makepath=True)

    def add(self, pattern: ResourcePattern, *acls: Acl) -> None:
        self.set(pattern, self._read(pattern) | set(acls))

    def remove(self, pattern: ResourcePattern, *acls: Acl) -> None:
        self.set(pattern, self._read(pattern) - set(acls))


def topic(name: str, pattern_type: PatternType = PatternType.LITERAL) -> ResourcePattern:
    return ResourcePattern(ResourceType.TOPIC, name, pattern_type)


def group(name: str) -> ResourcePattern:
    return ResourcePattern(ResourceType.GROUP, name)


CLUSTER = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster")
