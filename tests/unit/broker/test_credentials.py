"""The SCRAM credential cache, fed by the dynamic config manager from ``/config/users``
(embedded ZooKeeper): stored users at start-up, ``users/<user>`` notifications afterwards,
quota entities (``users/<u>/clients/<c>``) ignored, removed mechanisms forgotten."""

from __future__ import annotations

import asyncio

from odradek.broker.config_manager import DynamicConfigManager
from odradek.broker.credentials import CredentialCache
from odradek.config import KafkaConfig
from odradek.security.scram import ScramCredential
from odradek.zk.client import KafkaZkClient
from odradek.zk.zk_data import ConfigEntityChangeNotificationZNode, desanitize_entity_name
from support import wait_until_async


def cred(mechanism: str, password: str) -> ScramCredential:
    return ScramCredential.from_password(mechanism, password, salt=b"s" * 16)


def test_cache_update_replaces_and_forgets() -> None:
    cache = CredentialCache()
    cache.update("alice", {"SCRAM-SHA-256": cred("SCRAM-SHA-256", "a").to_string(),
                           "SCRAM-SHA-512": cred("SCRAM-SHA-512", "a").to_string()})
    assert cache.get("SCRAM-SHA-256", "alice") == cred("SCRAM-SHA-256", "a")
    assert cache.users("SCRAM-SHA-512") == ["alice"]
    cache.update("alice", {"SCRAM-SHA-512": "garbage", "producer_byte_rate": "1024"})
    assert cache.get("SCRAM-SHA-256", "alice") is None
    assert cache.get("SCRAM-SHA-512", "alice") is None
    assert cache.get("PLAIN", "alice") is None
    assert desanitize_entity_name("user%40example.com") == "user@example.com"


def test_config_manager_feeds_the_cache(zk_connect: str) -> None:
    async def main() -> None:
        zk = KafkaZkClient(zk_connect, 6000)
        await zk.start()
        cache = CredentialCache()
        config = KafkaConfig.from_props({"broker.id": "0", "zookeeper.connect": "unused:2181",
                                         "listeners": "PLAINTEXT://127.0.0.1:0"})
        manager = DynamicConfigManager(zk, config, None, lambda _t: None,  # type: ignore[arg-type]
                                       on_user_config=cache.update)
        try:
            await zk.create(ConfigEntityChangeNotificationZNode.path, makepath=True)
            await zk.set_entity_config("users", "alice", {"SCRAM-SHA-256": cred("SCRAM-SHA-256", "1").to_string()})
            await zk.set_entity_config("users", "bob%40x", {"SCRAM-SHA-512": cred("SCRAM-SHA-512", "b").to_string()})
            manager.log_manager = type("NoLogs", (), {"all_logs": staticmethod(lambda: [])})()
            await manager.startup()
            assert cache.get("SCRAM-SHA-256", "alice") == cred("SCRAM-SHA-256", "1")
            assert cache.get("SCRAM-SHA-512", "bob@x") == cred("SCRAM-SHA-512", "b")
            await zk.set_entity_config("users", "alice", {"SCRAM-SHA-256": cred("SCRAM-SHA-256", "2").to_string()})
            await zk.set_entity_config("users", "carol/clients/app", {"SCRAM-SHA-256": "ignored"})
            await zk.set_entity_config("users", "bob%40x", {})
            await wait_until_async(lambda: cache.get("SCRAM-SHA-512", "bob@x") is None, timeout=10)
            assert cache.get("SCRAM-SHA-256", "alice") == cred("SCRAM-SHA-256", "2")
            assert cache.get("SCRAM-SHA-256", "carol/clients/app") is None
        finally:
            await manager.shutdown()
            await zk.close()

    asyncio.run(main())
