"""ZkAclStore against the embedded ZooKeeper: Kafka's JSON per pattern, empty sets delete the
znode, one change notification per write in the right change path, and concurrent writers to
one pattern both land (version-checked writes retried on BadVersion)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

from odradek.security.acl_filters import AclBindingFilter, AclFilter, ResourcePatternFilter
from odradek.security.acls import (
    Acl,
    KafkaPrincipal,
    Operation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    decode_acl_change,
)
from odradek.zk.acl_store import ZkAclStore
from odradek.zk.client import KafkaZkClient

TOPIC = ResourcePattern(ResourceType.TOPIC, "orders")
PREFIXED = ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED)


def acl(name: str, op: Operation = Operation.READ) -> Acl:
    return Acl(KafkaPrincipal("User", name), PermissionType.ALLOW, "*", op)


def run(zk_connect: str, scenario: Callable[[KafkaZkClient, ZkAclStore], Awaitable[None]]) -> None:
    async def main() -> None:
        zk = KafkaZkClient(zk_connect, 6000)
        await zk.start()
        try:
            await scenario(zk, ZkAclStore(zk))
        finally:
            await zk.close()

    asyncio.run(main())


async def changes(zk: KafkaZkClient, path: str) -> list[bytes]:
    return [(await zk.get(f"{path}/{c}"))[0] for c in sorted(await zk.get_children(path) or [])]


def test_add_remove_and_notifications(zk_connect: str) -> None:
    async def scenario(zk: KafkaZkClient, store: ZkAclStore) -> None:
        await store.add(TOPIC, [acl("alice"), acl("bob")])
        data, _ = await zk.get("/kafka-acl/Topic/orders")
        assert json.loads(data) == {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
            {"principal": "User:bob", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
        await store.add(TOPIC, [acl("alice")])  # nothing new: no write, no notification
        assert await changes(zk, "/kafka-acl-changes") == [b"TOPIC:orders"]
        await store.add(PREFIXED, [acl("carol", Operation.ALL)])
        extended = await changes(zk, "/kafka-acl-extended-changes")
        assert [decode_acl_change(PatternType.PREFIXED, n) for n in extended] == [PREFIXED]
        assert await store.all_acls() == {TOPIC: {acl("alice"), acl("bob")}, PREFIXED: {acl("carol", Operation.ALL)}}

        await store.remove(TOPIC, [acl("alice"), acl("bob")])
        assert await zk.exists("/kafka-acl/Topic/orders") is None
        assert len(await changes(zk, "/kafka-acl-changes")) == 2

    run(zk_connect, scenario)


def test_concurrent_writers_both_land(zk_connect: str) -> None:
    async def scenario(zk: KafkaZkClient, store: ZkAclStore) -> None:
        other = KafkaZkClient(zk_connect, 6000)
        await other.start()
        try:
            users = [f"u{i}" for i in range(8)]
            stores = [store, ZkAclStore(other)]
            await asyncio.gather(*(stores[i % 2].add(TOPIC, [acl(u)]) for i, u in enumerate(users)))
        finally:
            await other.close()
        assert (await store.get_acls(TOPIC))[0] == {acl(u) for u in users}

    run(zk_connect, scenario)


def test_delete_matching_reports_per_filter(zk_connect: str) -> None:
    async def scenario(zk: KafkaZkClient, store: ZkAclStore) -> None:
        await store.add(TOPIC, [acl("alice"), acl("bob", Operation.WRITE)])
        await store.add(PREFIXED, [acl("alice")])
        by_alice = AclBindingFilter(ResourcePatternFilter(None, None, None), AclFilter(principal="User:alice"))
        writes = AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "orders"),
                                  AclFilter(operation=Operation.WRITE))
        removed = await store.delete_matching([by_alice, writes])
        assert removed[by_alice] == {TOPIC: {acl("alice")}, PREFIXED: {acl("alice")}}
        assert removed[writes] == {TOPIC: {acl("bob", Operation.WRITE)}}
        assert await store.all_acls() == {}

    run(zk_connect, scenario)
