"""DynamicConfigManager: topic and broker config changes reach every broker's open logs.

As Kafka's DynamicConfigManager with its ZkNodeChangeNotificationListener: whoever changes
``/config/topics/<t>`` then creates a sequential ``/config/changes/config_change_<seq>``
naming the topic.  Each broker watches ``/config/changes``, processes the notifications with
a sequence number above the last it executed (re-reading the topic's config and applying it
to that topic's logs), and deletes notifications older than 15 minutes.  At start-up every
stored topic config is applied once, so logs reopened from disk carry their overrides.

Broker configs work alike (Kafka's BrokerConfigHandler and DynamicBrokerConfig): a change of
``/config/brokers/<default>`` (every broker) or ``/config/brokers/<this broker's id>`` makes
the manager re-read both and build the effective :class:`KafkaConfig` (server.properties,
overridden by the default, overridden by this broker's own entry), which it hands to the
``on_broker_config`` callback; the server re-bases every log's config on the new defaults and
reconfigures the log cleaner.  Stored dynamic configs are applied at start-up, before the
topic configs.  An entry that is not dynamic or does not parse is dropped with an error in
the log (Kafka's removeInvalidConfigs); a set that does not combine keeps the current config.

User configs (Kafka's UserConfigHandler): every ``/config/users/<user>`` is read at start-up
and again on each ``users/<user>`` notification, and handed to the ``on_user_config``
callback with the user's name desanitized (the broker's SCRAM credential cache).

Client quotas (Kafka's UserConfigHandler and ClientIdConfigHandler): every ``users/<user>``,
``users/<user>/clients/<client>`` and ``clients/<client>`` entity is read at start-up and again
on its notification, and handed to the ``on_quota_config`` callback (the quota managers).

Every applied topic config is also handed to ``on_topic_config`` (the replication throttles'
``*.replication.throttled.replicas``, Kafka's QuotaConfigHandler).

A topic whose config turns ``unclean.leader.election.enable`` on is handed to the
``enable_unclean_election`` callback (Kafka's TopicConfigHandler calls
KafkaController.enableTopicUncleanLeaderElection): the server passes the controller's, which
tries an unclean election if this broker is the active controller.

The ZooKeeper watch only wakes one asyncio task; all reads happen there.
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
from odradek.broker.quota.quota_config import QUOTA_KEYS
from odradek.config import TOPIC_CONFIG, ConfigError, KafkaConfig, LogConfig, validate_dynamic_broker_config
from odradek.zk.client import KafkaZkClient
from odradek.zk.client_quotas import read_client_quota_entities
from odradek.zk.zk_data import (
    ClientQuotaEntity,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityTypeZNode,
    ConfigEntityZNode,
    desanitize_entity_name,
    now_ms,
)

if TYPE_CHECKING:

    from odradek.log.log_manager import LogManager

log = logging.getLogger(__name__)

__all__ = ["DynamicConfigManager"]

TOPICS = "topics"
BROKERS = "brokers"
USERS = "users"
CLIENTS = "clients"
_UNCLEAN = "unclean.leader.election.enable"


def notification_sequence(name: str) -> int | None:
    """The sequence number of a ``config_change_<seq>`` child, or None for other names."""
    return sequence_number(name, ConfigEntityChangeNotificationSequenceZNode.PREFIX)


def _no_op(_config: KafkaConfig) -> None:
    pass


def _no_user_op(_user: str, _config: dict[str, str]) -> None:
    pass


def _no_quota_op(_entity: ClientQuotaEntity, _config: dict[str, str]) -> None:
    pass


class DynamicConfigManager:
    def __init__(self, zk: KafkaZkClient, config: KafkaConfig, log_manager: LogManager,
                 enable_unclean_election: Callable[[str], None], *,
                 on_broker_config: Callable[[KafkaConfig], None] = _no_op,
                 on_user_config: Callable[[str, dict[str, str]], None] = _no_user_op,
                 on_topic_config: Callable[[str, dict[str, str]], None] = _no_user_op,
                 on_quota_config: Callable[[ClientQuotaEntity, dict[str, str]], None] = _no_quota_op,
                 time_ms: Callable[[], int] = now_ms) -> None:
        self.zk = zk
        self.static_config = config
        # The effective broker config: ``config`` under the dynamic broker configs.
        self.config = config
        self.on_broker_config = on_broker_config
        self.on_user_config = on_user_config
        self.on_topic_config = on_topic_config
        self.on_quota_config = on_quota_config
        self.log_manager = log_manager
        self.enable_unclean_election = enable_unclean_election
        self._time_ms = time_ms
        self.last_executed = -1
        self._follower = NotificationFollower(zk, self.process_notifications, "dynamic-config-manager",
                                              "config change notifications")

    async def startup(self) -> None:
        """Apply the stored broker configs and every stored topic config, then follow
        ``/config/changes``."""
        # Notifications up to the newest one now present describe configs the bootstrap reads.
        children = await self.zk.get_children(ConfigEntityChangeNotificationZNode.path) or []
        self.last_executed = max((s for s in map(notification_sequence, children) if s is not None), default=-1)
        await self._apply_broker_configs(at_startup=True)
        for user in await self.zk.get_children(ConfigEntityTypeZNode.path(USERS)) or []:
            await self._apply_user(user)
        for entity, config in (await read_client_quota_entities(self.zk)).items():
            self.on_quota_config(entity, config)
        # Only logs opened from disk need it; logs created later read their config themselves.
        with_config = set(await self.zk.get_children(ConfigEntityTypeZNode.path(TOPICS)) or [])
        topics = sorted({lg.topic for lg in self.log_manager.all_logs()} & with_config)
        for topic, overrides in (await self.zk.get_topic_configs(topics)).items():
            self._apply(topic, overrides)
        self._follower.start()

    async def stored_topic_log_configs(self) -> dict[str, LogConfig]:
        """Every topic's stored overrides as a LogConfig, for the logs the broker opens at its
        start (Kafka's LogManager reads them from ZooKeeper before it loads a log): recovery
        rebuilds indexes at the topic's ``index.interval.bytes``, and no log is ever open
        without its topic's retention or cleanup policy."""
        topics = sorted(await self.zk.get_children(ConfigEntityTypeZNode.path(TOPICS)) or [])
        configs: dict[str, LogConfig] = {}
        for topic, overrides in (await self.zk.get_topic_configs(topics)).items():
            try:
                configs[topic] = self.config.log_config(overrides)
            except ConfigError as e:
                log.error("not applying the stored config of topic %s: %s", topic, e)
        return configs

    async def shutdown(self) -> None:
        await self._follower.stop()

    # ------------------------------------------------------------------ processing

    async def process_notifications(self) -> None:
        """Execute the notifications newer than the last executed one, then purge old ones."""
        parent = ConfigEntityChangeNotificationZNode.path
        children = await self.zk.get_children(parent, watch=self._follower.on_change) or []
        numbered = sorted((seq, name) for name in children if (seq := notification_sequence(name)) is not None)
        changed: list[str] = []
        users_changed: list[str] = []
        quotas_changed: list[ClientQuotaEntity] = []
        brokers_changed = False
        newest = self.last_executed
        for seq, name in numbered:
            if seq <= self.last_executed:
                continue
            got = await self.zk.get(f"{parent}/{name}")
            newest = seq
            if got is None:
                continue
            try:
                entity_type, entity = ConfigEntityChangeNotificationSequenceZNode.decode(got[0])
            except (KeyError, TypeError, ValueError, AttributeError):
                log.warning("ignoring malformed config change notification %s: %r", name, got[0])
                continue
            if entity_type == TOPICS:
                if entity not in changed:
                    changed.append(entity)
            elif entity_type in (USERS, CLIENTS):
                quota_entity = ClientQuotaEntity.from_config_entity(entity_type, entity)
                if quota_entity is not None and quota_entity not in quotas_changed:
                    quotas_changed.append(quota_entity)
                if entity_type == USERS and "/" not in entity and entity not in users_changed:
                    users_changed.append(entity)
            elif entity_type == BROKERS and entity in (ConfigEntityZNode.DEFAULT, str(self.static_config.broker_id)):
                brokers_changed = True
            else:
                log.debug("ignoring config change of %s/%s (not a config of this broker or its topics)",
                          entity_type, entity)
        if brokers_changed:
            await self._apply_broker_configs(at_startup=False)
        for topic in changed:
            await self._apply_topic(topic)
        for user in users_changed:
            await self._apply_user(user)
        for quota_entity in quotas_changed:
            await self._apply_quota(quota_entity)
        self.last_executed = newest
        await purge_executed(self.zk, ConfigEntityChangeNotificationZNode.path,
                             [name for seq, name in numbered if seq <= newest], self._time_ms())

    async def _apply_broker_configs(self, *, at_startup: bool) -> None:
        """Re-read ``/config/brokers/<default>`` and this broker's entry and apply the
        effective config (Kafka's BrokerConfigHandler -> DynamicBrokerConfig.updateCurrentConfig)."""
        default = self._valid(ConfigEntityZNode.DEFAULT,
                              await self.zk.get_broker_config(ConfigEntityZNode.DEFAULT))
        own_entity = str(self.static_config.broker_id)
        own = self._valid(own_entity, await self.zk.get_broker_config(own_entity))
        if at_startup and not default and not own:
            return
        try:
            new = self.static_config.with_dynamic(default, own)
        except ConfigError as e:
            log.error("Failed to update broker configuration with configs %s (default) and %s (broker %s): %s",
                      default, own, own_entity, e)
            return
        self.config = new
        log.info("Processed broker config change: dynamic default %s, broker %s %s", default, own_entity, own)
        self.on_broker_config(new)

    @staticmethod
    def _valid(entity: str, stored: dict[str, str]) -> dict[str, str]:
        """The entries of a stored dynamic broker config that this broker can apply."""
        valid = {}
        for key, value in stored.items():
            try:
                valid.update(validate_dynamic_broker_config({key: value}))
            except ConfigError as e:
                log.error("Dynamic config of brokers/%s: dropping %s=%s: %s", entity, key, value, e)
        return valid

    async def _apply_user(self, entity: str) -> None:
        """A user's config changed (or start-up): hand it on (Kafka's UserConfigHandler)."""
        config = await self.zk.get_entity_config(USERS, entity) or {}
        user = desanitize_entity_name(entity)
        self.on_user_config(user, config)
        log.info("Processed user config change for %s: %s", user, sorted(config))

    async def _apply_quota(self, entity: ClientQuotaEntity) -> None:
        """A quota entity's config changed: hand it on (the quota managers take its quota keys)."""
        config = await self.zk.get_entity_config(*entity.config_entity()) or {}
        self.on_quota_config(entity, config)
        quotas = {key: value for key, value in config.items() if key in QUOTA_KEYS}  # not the SCRAM credentials
        log.info("Processed client quota change for %s: %s", "/".join(entity.config_entity()), quotas)

    async def _apply_topic(self, topic: str) -> None:
        """A topic's config changed: apply it (Kafka's TopicConfigHandler)."""
        overrides = await self.zk.get_topic_config(topic)
        if not self._apply(topic, overrides):
            return
        log.info("Processed config change for topic %s: %s", topic, overrides)
        if _UNCLEAN in overrides and TOPIC_CONFIG[_UNCLEAN].parse(overrides[_UNCLEAN]):
            self.enable_unclean_election(topic)

    def _apply(self, topic: str, overrides: dict[str, str]) -> bool:
        try:
            log_config = self.config.log_config(overrides)
        except ConfigError as e:
            log.error("not applying the stored config of topic %s: %s", topic, e)
            return False
        self.log_manager.update_config(topic, log_config)
        self.on_topic_config(topic, overrides)  # the replication throttles' replicas
        return True
