"""ZkAclStore: the ACLs of each resource pattern in ZooKeeper, written as Kafka's AclAuthorizer does.

One znode per pattern (``/kafka-acl/Topic/orders``, ``/kafka-acl-extended/prefixed/Group/app-``)
holds the pattern's whole ACL set in Kafka's JSON (security.acls.encode_acls).  A change is a
read-modify-write guarded by the znode's version, retried when another writer got there first
(AclAuthorizer.updateResourceAcls with conditionalSetAclsForResource / createAclsForResourceIfNotExists);
a set that becomes empty deletes its znode; each change that wrote something creates one
``acl_changes_`` sequence node under ``/kafka-acl-changes`` or ``/kafka-acl-extended-changes``
so that every broker reloads that pattern (AclAuthorizer.updateAclChangedFlag).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from odradek.security.acl_filters import AclBindingFilter, matching_bindings
from odradek.security.acls import (
    Acl,
    PatternType,
    ResourcePattern,
    ResourceType,
    acl_change_sequence_path,
    decode_acls,
    encode_acl_change,
    encode_acls,
    resource_path,
    resource_type_path,
)
from odradek.zk.client import KafkaZkClient

__all__ = ["AclUpdateConflict", "ZkAclStore"]

# AclAuthorizer retries a conflicting update with a random back-off until it succeeds; a bound
# here turns a livelock into an error the caller reports.
_MAX_UPDATE_ATTEMPTS = 20
_RETRY_BACKOFF_S = 0.02


class AclUpdateConflict(Exception):
    """Concurrent writers kept changing a resource's ACLs; the update was not applied."""


class ZkAclStore:
    """Reads and writes ACLs in ZooKeeper; no cache (the broker's authorizer keeps its own)."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self.zk = zk

    async def get_acls(self, resource: ResourcePattern) -> tuple[frozenset[Acl], int]:
        """The pattern's ACLs and the znode version (-1: no znode)."""
        got = await self.zk.get(resource_path(resource))
        if got is None:
            return frozenset(), -1
        data, stat = got
        return decode_acls(data), stat.version

    async def resources(self) -> list[ResourcePattern]:
        """Every pattern with a znode (KafkaZkClient.getResources over both stores)."""
        patterns = []
        for pattern_type in PatternType:
            for resource_type in ResourceType:
                names = await self.zk.get_children(resource_type_path(pattern_type, resource_type)) or []
                patterns.extend(ResourcePattern(resource_type, name, pattern_type) for name in names)
        return patterns

    async def all_acls(self) -> dict[ResourcePattern, frozenset[Acl]]:
        """Every pattern's ACLs (patterns whose znode is empty or vanished are left out)."""
        patterns = await self.resources()
        got = await self.zk.get_many([resource_path(p) for p in patterns])
        return {p: acls for p, item in zip(patterns, got, strict=True)
                if item is not None and (acls := decode_acls(item[0]))}

    async def describe(self, filters: Iterable[AclBindingFilter]) -> dict[ResourcePattern, frozenset[Acl]]:
        """The bindings any filter matches, by pattern."""
        return matching_bindings(await self.all_acls(), filters)

    async def add(self, resource: ResourcePattern, acls: Iterable[Acl]) -> frozenset[Acl]:
        """Add ``acls`` to the pattern's set; returns the new set."""
        new = frozenset(acls)
        return await self.update(resource, lambda current: current | new)

    async def remove(self, resource: ResourcePattern, acls: Iterable[Acl]) -> frozenset[Acl]:
        """Remove ``acls`` from the pattern's set; returns the new set."""
        gone = frozenset(acls)
        return await self.update(resource, lambda current: current - gone)

    async def update(self, resource: ResourcePattern,
                     change: Callable[[frozenset[Acl]], frozenset[Acl]]) -> frozenset[Acl]:
        """Apply ``change`` to the pattern's current set, fenced by the znode version and retried
        on a conflict; notify brokers if anything changed.  Returns the set now stored."""
        path = resource_path(resource)
        for _ in range(_MAX_UPDATE_ATTEMPTS):
            current, version = await self.get_acls(resource)
            new = change(current)
            if new == current and (new or version < 0):
                return current
            try:
                await self._write(path, new, version)
            except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
                await asyncio.sleep(_RETRY_BACKOFF_S)
                continue
            await self.zk.create(acl_change_sequence_path(resource.pattern_type), encode_acl_change(resource),
                                 sequence=True, makepath=True)
            return new
        raise AclUpdateConflict(f"ACLs of {resource_path(resource)} kept changing under concurrent updates; "
                                "nothing was written")

    async def _write(self, path: str, acls: frozenset[Acl], version: int) -> None:
        if not acls:
            if version >= 0:
                await self.zk.delete(path, version)
        elif version < 0:
            await self.zk.create(path, encode_acls(acls), makepath=True)
        else:
            await self.zk.set(path, encode_acls(acls), version)

    async def delete_matching(self, filters: Iterable[AclBindingFilter]
                              ) -> dict[AclBindingFilter, dict[ResourcePattern, frozenset[Acl]]]:
        """AclAuthorizer.deleteAcls: remove every binding a filter matches; for each filter the
        bindings it removed (a binding two filters match is reported for both, as Kafka)."""
        filters = list(filters)
        removed: dict[AclBindingFilter, dict[ResourcePattern, frozenset[Acl]]] = {f: {} for f in filters}
        for pattern in await self.resources():
            if not any(f.pattern.matches(pattern) for f in filters):
                continue
            taken: dict[AclBindingFilter, frozenset[Acl]] = {}

            def change(current: frozenset[Acl], pattern: ResourcePattern = pattern,
                       taken: dict[AclBindingFilter, frozenset[Acl]] = taken) -> frozenset[Acl]:
                taken.clear()
                for f in filters:
                    hits = frozenset(acl for acl in current if f.matches(pattern, acl))
                    if hits:
                        taken[f] = hits
                return current.difference(*taken.values())

            await self.update(pattern, change)
            for f, hits in taken.items():
                removed[f][pattern] = hits
        return removed

