"""DynamicConfigManager against the embedded ZooKeeper: stored topic and broker configs reach
the open logs at start-up, broker configs layer as static < <default> < this broker, ``/config/changes`` notifications are executed once each and in order, old
ones are purged, and turning unclean leader election on calls the controller's callback
(Kafka's DynamicConfigManager, ZkNodeChangeNotificationListener and TopicConfigHandler)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from odradek.broker.change_notifications import CHANGE_EXPIRATION_MS
from odradek.broker.config_manager import (
    DynamicConfigManager,
    notification_sequence,
)
from odradek.config import KafkaConfig, LogConfig
from odradek.zk.client import KafkaZkClient
from odradek.zk.zk_data import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityZNode,
    TopicConfigZNode,
    now_ms,
)
from support import wait_until_async

CHANGES = ConfigEntityChangeNotificationZNode.path


@dataclass(frozen=True)
class OpenLog:
    topic: str
    partition: int


@dataclass
class FakeLogManager:
    """The two LogManager calls the config manager makes, recorded."""

    logs: list[OpenLog] = field(default_factory=list)
    updates: list[tuple[str, LogConfig]] = field(default_factory=list)

    def all_logs(self) -> list[OpenLog]:
        return list(self.logs)

    def update_config(self, topic: str, config: LogConfig) -> None:
        self.updates.append((topic, config))

    def applied(self) -> dict[str, int]:
        """The retention.ms last applied per topic."""
        return {topic: config.retention_ms for topic, config in self.updates}


def broker_config() -> KafkaConfig:
    return KafkaConfig.from_props({"broker.id": "0", "zookeeper.connect": "unused:2181",
                                   "listeners": "PLAINTEXT://127.0.0.1:0"})


Scenario = Callable[[KafkaZkClient, FakeLogManager, list[str], DynamicConfigManager], Awaitable[None]]


def run_with_manager(zk_connect: str, scenario: Scenario, *, logs: list[OpenLog] | None = None,
                     before_start: Callable[[KafkaZkClient], Awaitable[None]] | None = None,
                     time_ms: Callable[[], int] = now_ms,
                     on_broker_config: Callable[[KafkaConfig], None] = lambda _config: None) -> None:
    async def main() -> None:
        zk = KafkaZkClient(zk_connect, 6000)
        await zk.start()
        log_manager = FakeLogManager(logs or [])
        unclean: list[str] = []
        manager = DynamicConfigManager(zk, broker_config(), log_manager, unclean.append,  # type: ignore[arg-type]
                                       on_broker_config=on_broker_config, time_ms=time_ms)
        try:
            await zk.create(CHANGES, makepath=True)
            if before_start is not None:
                await before_start(zk)
            await manager.startup()
            await scenario(zk, log_manager, unclean, manager)
        finally:
            await manager.shutdown()
            await zk.close()

    asyncio.run(main())


def test_notification_sequence_reads_only_config_change_children() -> None:
    assert notification_sequence("config_change_0000000012") == 12
    assert notification_sequence("config_change_") is None
    assert notification_sequence("config_change_12a") is None
    assert notification_sequence("other_0000000001") is None


def test_startup_applies_stored_configs_to_open_logs_and_skips_old_notifications(zk_connect: str) -> None:
    async def stored(zk: KafkaZkClient) -> None:
        await zk.set_topic_config("open", {"retention.ms": "1000"})
        await zk.set_topic_config("closed", {"retention.ms": "2000"})

    async def scenario(zk: KafkaZkClient, logs: FakeLogManager, unclean: list[str],
                       manager: DynamicConfigManager) -> None:
        # The bootstrap applied "open" once; the two notifications already present are not re-run.
        assert logs.applied() == {"open": 1000}
        assert manager.last_executed == 1
        await zk.set_topic_config("open", {"retention.ms": "3000"})
        await wait_until_async(lambda: manager.last_executed == 2)
        assert logs.applied() == {"open": 3000}
        assert [t for t, _ in logs.updates] == ["open", "open"]

    run_with_manager(zk_connect, scenario, logs=[OpenLog("open", 0), OpenLog("open", 1)], before_start=stored)


def test_changes_are_applied_once_and_bad_notifications_skipped(zk_connect: str) -> None:
    async def scenario(zk: KafkaZkClient, logs: FakeLogManager, unclean: list[str],
                       manager: DynamicConfigManager) -> None:
        prefix = ConfigEntityChangeNotificationSequenceZNode.path_prefix()
        await zk.create(prefix, b"not json", sequence=True)
        await zk.create(prefix, ConfigEntityChangeNotificationSequenceZNode.encode("brokers", "0"), sequence=True)
        await zk.create(TopicConfigZNode.path("bad"), TopicConfigZNode.encode({"retention.ms": "-5"}), makepath=True)
        await zk.create(prefix, ConfigEntityChangeNotificationSequenceZNode.encode("topics", "bad"), sequence=True)
        await zk.set_topic_config("t", {"retention.ms": "4000"})
        await wait_until_async(lambda: manager.last_executed == 3)
        # Only the valid topic config was applied; the malformed, broker and invalid ones were skipped.
        assert logs.applied() == {"t": 4000}
        await manager.process_notifications()  # nothing new: nothing applied again
        assert len(logs.updates) == 1
        assert unclean == []

    run_with_manager(zk_connect, scenario)


def test_turning_unclean_election_on_calls_the_controller_callback(zk_connect: str) -> None:
    async def scenario(zk: KafkaZkClient, logs: FakeLogManager, unclean: list[str],
                       manager: DynamicConfigManager) -> None:
        await zk.set_topic_config("careful", {"unclean.leader.election.enable": "false"})
        await zk.set_topic_config("reckless", {"unclean.leader.election.enable": "true"})
        await wait_until_async(lambda: manager.last_executed == 1)
        assert unclean == ["reckless"]
        assert set(logs.applied()) == {"careful", "reckless"}

    run_with_manager(zk_connect, scenario)


@pytest.mark.parametrize("age_ms, kept", [(CHANGE_EXPIRATION_MS + 60_000, False), (60_000, True)])
def test_executed_notifications_are_purged_once_expired(zk_connect: str, age_ms: int, kept: bool) -> None:
    clock = {"skew": 0}

    async def scenario(zk: KafkaZkClient, logs: FakeLogManager, unclean: list[str],
                       manager: DynamicConfigManager) -> None:
        await zk.set_topic_config("t", {"retention.ms": "5000"})
        await wait_until_async(lambda: manager.last_executed == 0)
        assert await zk.get_children(CHANGES) == ["config_change_0000000000"]
        clock["skew"] = age_ms
        await manager.process_notifications()
        assert (await zk.get_children(CHANGES) == ["config_change_0000000000"]) is kept

    run_with_manager(zk_connect, scenario, time_ms=lambda: now_ms() + clock["skew"])


DEFAULT = ConfigEntityZNode.DEFAULT


def test_startup_applies_stored_broker_configs_before_topic_configs(zk_connect: str) -> None:
    applied: list[KafkaConfig] = []

    async def stored(zk: KafkaZkClient) -> None:
        await zk.set_broker_config(DEFAULT, {"log.retention.ms": "777", "log.cleaner.threads": "2"})
        await zk.set_broker_config("0", {"log.cleaner.threads": "3"})
        await zk.set_broker_config("1", {"log.cleaner.threads": "9", "log.retention.ms": "1"})
        await zk.set_topic_config("open", {"segment.ms": "100"})

    async def scenario(zk: KafkaZkClient, logs: FakeLogManager, unclean: list[str],
                       manager: DynamicConfigManager) -> None:
        [config] = applied
        assert config["log.cleaner.threads"] == 3
        assert config.dynamic_default_configs == {"log.retention.ms": "777", "log.cleaner.threads": "2"}
        assert config.dynamic_broker_configs == {"log.cleaner.threads": "3"}
        assert manager.config is config
        # The topic's config was built on the dynamic defaults.
        assert logs.applied() == {"open": 777}
        assert logs.updates[0][1].segment_ms == 100

    run_with_manager(zk_connect, scenario, logs=[OpenLog("open", 0)], before_start=stored,
                     on_broker_config=applied.append)


def test_broker_config_notifications_for_this_broker_or_the_default_are_applied(zk_connect: str) -> None:
    applied: list[KafkaConfig] = []

    async def scenario(zk: KafkaZkClient, logs: FakeLogManager, unclean: list[str],
                       manager: DynamicConfigManager) -> None:
        assert applied == []  # nothing stored: the static config stands
        await zk.set_broker_config(DEFAULT, {"log.cleaner.min.cleanable.ratio": "0.8"})
        await wait_until_async(lambda: len(applied) == 1)
        assert applied[0].log_config().min_cleanable_dirty_ratio == 0.8
        await zk.set_broker_config("1", {"log.cleaner.backoff.ms": "5"})  # another broker's
        await zk.set_broker_config("0", {"log.cleaner.backoff.ms": "6"})
        await wait_until_async(lambda: manager.last_executed == 2)
        assert len(applied) == 2
        assert applied[1]["log.cleaner.backoff.ms"] == 6
        assert applied[1].log_config().min_cleanable_dirty_ratio == 0.8

    run_with_manager(zk_connect, scenario, on_broker_config=applied.append)


def test_invalid_stored_broker_entries_are_dropped_and_bad_combinations_keep_the_config(zk_connect: str) -> None:
    applied: list[KafkaConfig] = []

    async def scenario(zk: KafkaZkClient, logs: FakeLogManager, unclean: list[str],
                       manager: DynamicConfigManager) -> None:
        await zk.set_broker_config(DEFAULT, {"log.cleaner.threads": "many", "broker.id": "7",
                                             "log.segment.bytes": "2000"})
        await wait_until_async(lambda: len(applied) == 1)
        assert applied[0].dynamic_default_configs == {"log.segment.bytes": "2000"}
        assert applied[0]["log.cleaner.threads"] == 1 and applied[0].broker_id == 0
        await zk.set_broker_config("0", {"log.retention.ms": "0"})  # parses, but retention 0 is refused
        await wait_until_async(lambda: manager.last_executed == 1)
        assert len(applied) == 1
        assert manager.config is applied[0]

    run_with_manager(zk_connect, scenario, on_broker_config=applied.append)
