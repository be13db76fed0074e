"""The broker's ACL cache, kept in step with ZooKeeper, and the authorizer built over it.

As Kafka 2.8's kafka.security.authorizer.AclAuthorizer (configure/loadCache) with its two
ZkNodeChangeNotificationListeners: at start-up every ACL znode under ``/kafka-acl`` (literal
patterns) and ``/kafka-acl-extended/prefixed`` is read into one mapping from ResourcePattern
to its ACLs; whoever changes a resource's ACLs then creates a sequential
``/kafka-acl-changes/acl_changes_<seq>`` (literal) or ``/kafka-acl-extended-changes/...``
(prefixed) node naming the resource, and every broker re-reads that one resource.  Executed
notifications older than 15 minutes are deleted (every broker tries; the first one wins).

The decision itself (super users, DENY before ALLOW, implied operations) is
:class:`odradek.security.acls.AclAuthorizer`'s; it reads the mapping this cache mutates in
place on the event loop, so a change is visible to the next request without any copy.

The ZooKeeper watches only wake one asyncio task per change path; all reads happen there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.broker.change_notifications import (
    NotificationFollower,
    purge_executed,
    sequence_number,
)
from odradek.common import now_ms
from odradek.config import KafkaConfig
from odradek.security.acls import (
    ACL_CHANGES_SEQUENCE_PREFIX,
    Acl,
    AclAuthorizer,
    PatternType,
    ResourcePattern,
    ResourceType,
    acl_change_path,
    acl_root_path,
    decode_acl_change,
    decode_acls,
    resource_path,
    resource_type_path,
)
from odradek.zk.client import KafkaZkClient

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

__all__ = ["ACL_AUTHORIZER_CLASS_NAMES", "AclCacheError", "ZkAclCache", "authorizer_enabled"]

# authorizer.class.name values that mean "Kafka's ZooKeeper ACL authorizer" (2.8's class and the
# pre-2.4 name it replaced, which Kafka still accepted as an alias).
ACL_AUTHORIZER_CLASS_NAMES = frozenset({"kafka.security.authorizer.AclAuthorizer",
                                        "kafka.security.auth.SimpleAclAuthorizer"})
_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)


class AclCacheError(RuntimeError):
    """The stored ACLs cannot be loaded (the message names the znode)."""


def authorizer_enabled(config: KafkaConfig) -> bool:
    """Whether ``authorizer.class.name`` turns on the ACL authorizer.  Raises ValueError with one
    line for a class odradek does not have (Kafka would fail to load it)."""
    name = (config["authorizer.class.name"] or "").strip()
    if not name:
        return False
    if name not in ACL_AUTHORIZER_CLASS_NAMES:
        raise ValueError(f"authorizer.class.name={name} is not supported; use "
                         "kafka.security.authorizer.AclAuthorizer (or leave it empty for no authorization)")
    return True


def sequence_of(name: str) -> int | None:
    """The sequence number of an ``acl_changes_<seq>`` child, or None for other names."""
    return sequence_number(name, ACL_CHANGES_SEQUENCE_PREFIX)


class ZkAclCache:
    """Every ACL of the cluster, by resource pattern, following ZooKeeper's change notifications."""

    def __init__(self, zk: KafkaZkClient, *, time_ms: Callable[[], int] = now_ms) -> None:
        self.zk = zk
        self.acls: dict[ResourcePattern, frozenset[Acl]] = {}
        self._time_ms = time_ms
        self._listeners = [_ChangeListener(self, pattern_type) for pattern_type in _PATTERN_TYPES]

    def authorizer(self, config: KafkaConfig) -> AclAuthorizer:
        """An AclAuthorizer deciding over this cache with the broker's ``super.users`` and
        ``allow.everyone.if.no.acl.found``."""
        return AclAuthorizer.from_config(self.acls, {
            "super.users": config["super.users"],
            "allow.everyone.if.no.acl.found": config["allow.everyone.if.no.acl.found"]})

    async def startup(self) -> None:
        """Create the ACL paths, load every stored ACL, then follow both change paths.  Raises
        AclCacheError when a stored ACL znode does not decode (Kafka's broker fails to start too:
        guessing would either lock everyone out or let everyone in)."""
        for pattern_type in _PATTERN_TYPES:
            await self.zk.ensure_path(acl_change_path(pattern_type))
            for resource_type in ResourceType:
                await self.zk.ensure_path(resource_type_path(pattern_type, resource_type))
        # Notifications present now describe ACLs the load below reads; later ones are replayed.
        for listener in self._listeners:
            await listener.skip_existing()
        await self._load_all()
        for listener in self._listeners:
            listener.start()

    async def shutdown(self) -> None:
        for listener in self._listeners:
            await listener.stop()

    async def _load_all(self) -> None:
        for pattern_type in _PATTERN_TYPES:
            for resource_type in ResourceType:
                names = await self.zk.get_children(resource_type_path(pattern_type, resource_type)) or []
                patterns = [ResourcePattern(resource_type, name, pattern_type) for name in names]
                found = await self.zk.get_many([resource_path(p) for p in patterns])
                for pattern, got in zip(patterns, found, strict=True):
                    try:
                        acls = decode_acls(got[0] if got else None)
                    except ValueError as e:
                        raise AclCacheError(f"cannot load the ACLs in {resource_path(pattern)}: {e}") from None
                    self._set(pattern, acls)
        log.info("Loaded %d ACLs of %d resource patterns from %s and %s",
                 sum(len(a) for a in self.acls.values()), len(self.acls),
                 acl_root_path(PatternType.LITERAL), acl_root_path(PatternType.PREFIXED))

    async def reload(self, pattern: ResourcePattern) -> None:
        """Re-read one resource's ACLs (AclAuthorizer.processAclChangeNotification).  A znode
        that does not decode leaves the resource's previous ACLs in force."""
        got = await self.zk.get(resource_path(pattern))
        try:
            acls = decode_acls(got[0] if got else None)
        except ValueError as e:
            log.error("Keeping the previous ACLs of %s: %s does not decode: %s", pattern, resource_path(pattern), e)
            return
        self._set(pattern, acls)
        log.info("Processed ACL change for %s %s (%s): %d ACLs", pattern.resource_type.value, pattern.name,
                 pattern.pattern_type.name, len(acls))

    def _set(self, pattern: ResourcePattern, acls: frozenset[Acl]) -> None:
        if acls:
            self.acls[pattern] = acls
        else:
            self.acls.pop(pattern, None)


class _ChangeListener:
    """ZkNodeChangeNotificationListener for one change path: executes each ``acl_changes_``
    node once, in sequence order, then purges executed nodes past their expiration."""

    def __init__(self, cache: ZkAclCache, pattern_type: PatternType) -> None:
        self.cache = cache
        self.pattern_type = pattern_type
        self.path = acl_change_path(pattern_type)
        self.last_executed = -1
        self.follower = NotificationFollower(cache.zk, self.process_notifications,
                                             f"acl-change-listener-{pattern_type.name.lower()}",
                                             f"ACL change notifications in {self.path}")

    async def skip_existing(self) -> None:
        children = await self.cache.zk.get_children(self.path) or []
        self.last_executed = max((s for s in map(sequence_of, children) if s is not None), default=-1)

    def start(self) -> None:
        self.follower.start()

    async def stop(self) -> None:
        await self.follower.stop()

    async def process_notifications(self) -> None:
        zk = self.cache.zk
        children = await zk.get_children(self.path, watch=self.follower.on_change) or []
        numbered = sorted((seq, name) for name in children if (seq := sequence_of(name)) is not None)
        for seq, name in numbered:
            if seq <= self.last_executed:
                continue
            got = await zk.get(f"{self.path}/{name}")
            if got is not None:
                try:
                    pattern = decode_acl_change(self.pattern_type, got[0])
                except ValueError as e:
                    log.warning("ignoring malformed ACL change notification %s/%s: %s", self.path, name, e)
                else:
                    await self.cache.reload(pattern)
            self.last_executed = seq
        await purge_executed(zk, self.path, [name for seq, name in numbered if seq <= self.last_executed],
                             self.cache._time_ms())
