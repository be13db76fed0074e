"""ZkAclCache against the embedded ZooKeeper: stored literal and prefixed ACLs are loaded at
start-up, change notifications under /kafka-acl-changes and /kafka-acl-extended-changes reload
the named resource once each, a deleted resource drops out, undecodable znodes fail start-up
(or keep the previous ACLs on a change), old notifications are purged; and
authorizer.class.name selects the authorizer (Kafka's AclAuthorizer and
ZkNodeChangeNotificationListener)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from odradek.broker.authorizer import (
    AclCacheError,
    ZkAclCache,
    authorizer_enabled,
    sequence_of,
)
from odradek.broker.change_notifications import CHANGE_EXPIRATION_MS
from odradek.common import now_ms
from odradek.config import KafkaConfig
from odradek.security.acls import (
    ANONYMOUS,
    Acl,
    KafkaPrincipal,
    Operation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    acl_change_path,
    acl_change_sequence_path,
    encode_acl_change,
    encode_acls,
    resource_path,
)
from odradek.zk.client import KafkaZkClient
from support import wait_until_async

ALICE = KafkaPrincipal("User", "alice")
ORDERS = ResourcePattern(ResourceType.TOPIC, "orders")
APP_PREFIX = ResourcePattern(ResourceType.TOPIC, "app-", PatternType.PREFIXED)
READ = Acl(ALICE, PermissionType.ALLOW, "*", Operation.READ)
WRITE = Acl(ALICE, PermissionType.ALLOW, "127.0.0.1", Operation.WRITE)


def config(**extra: str) -> KafkaConfig:
    return KafkaConfig.from_props({"broker.id": "0", "zookeeper.connect": "unused:2181",
                                   "listeners": "PLAINTEXT://127.0.0.1:0", **extra})


async def store(zk: KafkaZkClient, pattern: ResourcePattern, data: bytes | None, *, notify: bool = True) -> None:
    """Write (None: delete) a resource's ACL znode as ZkAclStore does, then announce it."""
    path = resource_path(pattern)
    if data is None:
        await zk.delete(path)
    elif await zk.exists(path):
        await zk.set(path, data)
    else:
        await zk.create(path, data, makepath=True)
    if notify:
        await zk.create(acl_change_sequence_path(pattern.pattern_type), encode_acl_change(pattern),
                        sequence=True, makepath=True)


def run_with_cache(zk_connect: str, scenario: Callable[[KafkaZkClient, ZkAclCache], Awaitable[None]], *,
                   before_start: Callable[[KafkaZkClient], Awaitable[None]] | None = None,
                   time_ms: Callable[[], int] = now_ms) -> None:
    async def main() -> None:
        zk = KafkaZkClient(zk_connect, 6000)
        await zk.start()
        cache = ZkAclCache(zk, time_ms=time_ms)
        try:
            if before_start is not None:
                await before_start(zk)
            await cache.startup()
            await scenario(zk, cache)
        finally:
            await cache.shutdown()
            await zk.close()

    asyncio.run(main())


def test_sequence_of_reads_only_acl_change_children() -> None:
    assert sequence_of("acl_changes_0000000007") == 7
    assert sequence_of("acl_changes_") is None
    assert sequence_of("config_change_0000000001") is None


def test_authorizer_class_names() -> None:
    assert not authorizer_enabled(config())
    assert authorizer_enabled(config(**{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}))
    assert authorizer_enabled(config(**{"authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer"}))
    with pytest.raises(ValueError, match=r"authorizer\.class\.name=com\.example\.Custom is not supported"):
        authorizer_enabled(config(**{"authorizer.class.name": "com.example.Custom"}))


def test_startup_loads_literal_and_prefixed_acls_and_creates_the_paths(zk_connect: str) -> None:
    async def stored(zk: KafkaZkClient) -> None:
        await store(zk, ORDERS, encode_acls([READ, WRITE]))
        await store(zk, APP_PREFIX, encode_acls([READ]))

    async def scenario(zk: KafkaZkClient, cache: ZkAclCache) -> None:
        assert cache.acls == {ORDERS: {READ, WRITE}, APP_PREFIX: {READ}}
        for path in ("/kafka-acl/Group", "/kafka-acl-extended/prefixed/TransactionalId",
                     acl_change_path(PatternType.LITERAL), acl_change_path(PatternType.PREFIXED)):
            assert await zk.exists(path) is not None, path
        authorizer = cache.authorizer(config())
        assert authorizer.authorize(ALICE, "10.0.0.1", Operation.READ, ResourceType.TOPIC, "app-events")
        assert authorizer.authorize(ALICE, "127.0.0.1", Operation.WRITE, ResourceType.TOPIC, "orders")
        assert not authorizer.authorize(ALICE, "10.0.0.1", Operation.WRITE, ResourceType.TOPIC, "orders")
        assert not authorizer.authorize(ANONYMOUS, "127.0.0.1", Operation.READ, ResourceType.TOPIC, "orders")

    run_with_cache(zk_connect, scenario, before_start=stored)


def test_changes_reload_the_named_resource_without_restart(zk_connect: str) -> None:
    async def scenario(zk: KafkaZkClient, cache: ZkAclCache) -> None:
        authorizer = cache.authorizer(config())
        assert not authorizer.authorize(ALICE, "127.0.0.1", Operation.DESCRIBE, ResourceType.TOPIC, "orders")
        await store(zk, ORDERS, encode_acls([READ]))
        await wait_until_async(lambda: cache.acls.get(ORDERS) == {READ})
        # Read implies Describe, through the same authorizer object: the cache is shared.
        assert authorizer.authorize(ALICE, "127.0.0.1", Operation.DESCRIBE, ResourceType.TOPIC, "orders")
        await store(zk, APP_PREFIX, encode_acls([WRITE]))
        await wait_until_async(lambda: APP_PREFIX in cache.acls)
        await store(zk, ORDERS, None)
        await wait_until_async(lambda: ORDERS not in cache.acls)
        assert cache.acls == {APP_PREFIX: {WRITE}}

    run_with_cache(zk_connect, scenario)


def test_malformed_notifications_are_skipped_and_bad_znodes_keep_the_previous_acls(zk_connect: str) -> None:
    async def stored(zk: KafkaZkClient) -> None:
        await store(zk, ORDERS, encode_acls([READ]))

    async def scenario(zk: KafkaZkClient, cache: ZkAclCache) -> None:
        await zk.create(acl_change_sequence_path(PatternType.LITERAL), b"no colon here", sequence=True)
        await zk.create(acl_change_sequence_path(PatternType.PREFIXED), b"{not json", sequence=True)
        await store(zk, ORDERS, b'{"version":7,"acls":[]}')
        other = ResourcePattern(ResourceType.GROUP, "g")
        await store(zk, other, encode_acls([READ]))
        await wait_until_async(lambda: other in cache.acls)
        assert cache.acls[ORDERS] == {READ}

    run_with_cache(zk_connect, scenario, before_start=stored)


def test_an_undecodable_acl_znode_fails_startup(zk_connect: str) -> None:
    async def main() -> None:
        zk = KafkaZkClient(zk_connect, 6000)
        await zk.start()
        cache = ZkAclCache(zk)
        try:
            await store(zk, ORDERS, b"garbage", notify=False)
            with pytest.raises(AclCacheError, match="/kafka-acl/Topic/orders"):
                await cache.startup()
        finally:
            await cache.shutdown()
            await zk.close()

    asyncio.run(main())


def test_executed_notifications_past_expiration_are_purged(zk_connect: str) -> None:
    later = [0]

    async def scenario(zk: KafkaZkClient, cache: ZkAclCache) -> None:
        await store(zk, ORDERS, encode_acls([READ]))
        await wait_until_async(lambda: ORDERS in cache.acls)
        later[0] = CHANGE_EXPIRATION_MS + 60_000
        await store(zk, ORDERS, encode_acls([READ, WRITE]))
        # The second round of processing finds both nodes expired and deletes them.
        async with asyncio.timeout(10):
            while await zk.get_children(acl_change_path(PatternType.LITERAL)):
                await asyncio.sleep(0.02)
        assert cache.acls[ORDERS] == {READ, WRITE}

    run_with_cache(zk_connect, scenario, time_ms=lambda: now_ms() + later[0])
