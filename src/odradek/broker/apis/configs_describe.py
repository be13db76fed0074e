"""What DescribeConfigs (and CreateTopics v5+) report for a config: value, source, synonyms.

Sans-IO: plain functions over a broker's :class:`KafkaConfig` and a topic's overrides.
Sources and their precedence are Kafka's (KIP-226): a topic override (DYNAMIC_TOPIC_CONFIG)
beats the broker synonym's dynamic value for this broker (DYNAMIC_BROKER_CONFIG), which beats
its dynamic cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG), then its value in
``server.properties`` (STATIC_BROKER_CONFIG), then its default (DEFAULT_CONFIG).  A topic
config that nothing sets is DEFAULT_CONFIG.  Broker configs that can change dynamically
(config.DYNAMIC_BROKER_CONFIGS) are reported writable, the others read-only.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import IntEnum

from odradek.config import (
    BROKER_CONFIG,
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_CONFIG,
    TOPIC_CONFIG_SYNONYMS,
    ConfigKey,
    KafkaConfig,
    Type,
    config_string,
)

__all__ = [
    "ConfigEntry",
    "ConfigSource",
    "ResourceType",
    "broker_config_entries",
    "default_broker_config_entries",
    "topic_config_entries",
]


class ResourceType(IntEnum):
    """Kafka's ConfigResource.Type codes."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigSource codes."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


# Kafka's ConfigDef.Type codes as DescribeConfigs v3+ reports them.
_TYPE_CODES = {Type.BOOLEAN: 1, Type.STRING: 2, Type.INT: 3, Type.LONG: 5, Type.DOUBLE: 6, Type.LIST: 7,
               Type.PASSWORD: 9}

# Broker keys that set one thing, in the order the broker consults them (Kafka's
# DynamicBrokerConfig.brokerConfigSynonyms; config.KafkaConfig.topic_defaults).
_SYNONYM_GROUPS = (("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
                   ("log.roll.ms", "log.roll.hours"), ("log.roll.jitter.ms", "log.roll.jitter.hours"))
_FLUSH_GROUP = ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")


def _synonym_group(key: str) -> tuple[str, ...]:
    """The broker keys Kafka lists as synonyms of ``key``, ``key``'s group first to last."""
    if key == _FLUSH_GROUP[0]:  # the scheduler interval is the flush interval's default, not the reverse
        return _FLUSH_GROUP
    return next((group for group in _SYNONYM_GROUPS if key in group), (key,))


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    config_type: int
    documentation: str | None
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]
    sensitive: bool = False

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


def _broker_synonyms(config: KafkaConfig, name: str, *, per_broker: bool = True
                     ) -> list[tuple[str, str | None, ConfigSource]]:
    """The values broker key ``name`` and its synonyms have, source by source as Kafka lists
    them (ZkAdminManager.configSynonyms): this broker's dynamic values, the dynamic defaults,
    ``server.properties``, the defaults; and, as Kafka, only from the first value of ``name``
    itself on (a synonym ahead of it is dropped, even when ``name`` has no value anywhere).
    ``per_broker=False`` (the cluster-wide default resource) leaves out this broker's own
    dynamic values."""
    known = [key for key in _synonym_group(name) if key in BROKER_CONFIG]
    synonyms: list[tuple[str, str | None, ConfigSource]] = []
    if per_broker:
        synonyms += [(key, config.dynamic_broker_configs[key], ConfigSource.DYNAMIC_BROKER_CONFIG)
                     for key in known if key in config.dynamic_broker_configs]
    synonyms += [(key, config.dynamic_default_configs[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
                 for key in known if key in config.dynamic_default_configs]
    synonyms += [(key, config_string(BROKER_CONFIG[key].parse(config.originals[key])),
                  ConfigSource.STATIC_BROKER_CONFIG) for key in known if key in config.originals]
    for key in known:
        default = BROKER_CONFIG[key].default_value()
        if default is not None:
            synonyms.append((key, config_string(default), ConfigSource.DEFAULT_CONFIG))
    first = next((i for i, (key, _, _) in enumerate(synonyms) if key == name), len(synonyms))
    return synonyms[first:]


def _wanted(name: str, keys: Collection[str] | None) -> bool:
    return not keys or name in keys


def topic_config_entries(config: KafkaConfig, overrides: Mapping[str, str],
                         keys: Collection[str] | None = None) -> list[ConfigEntry]:
    """Every topic config (or those in ``keys``) with its effective value on this broker."""
    values = config.log_config(overrides).as_strings()
    entries = []
    for name in sorted(TOPIC_CONFIG):
        if not _wanted(name, keys):
            continue
        synonyms = _broker_synonyms(config, TOPIC_CONFIG_SYNONYMS[name]) if name in TOPIC_CONFIG_SYNONYMS else []
        if name in overrides:
            synonyms.insert(0, (name, values[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        spec = TOPIC_CONFIG[name]
        entries.append(ConfigEntry(name, values[name], source, False, _TYPE_CODES.get(spec.type, 0),
                                   spec.doc or None, tuple(synonyms)))
    return entries


def _broker_entry(spec: ConfigKey, name: str, value: str | None, source: ConfigSource,
                  synonyms: list[tuple[str, str | None, ConfigSource]]) -> ConfigEntry:
    """A broker config entry; a PASSWORD key is sensitive: its value and its synonyms' values
    are never sent (Kafka's ZkAdminManager.createBrokerConfigEntry reports them as null)."""
    sensitive = spec.type is Type.PASSWORD
    if sensitive:
        value = None
        synonyms = [(key, None, synonym_source) for key, _, synonym_source in synonyms]
    return ConfigEntry(name, value, source, name not in DYNAMIC_BROKER_CONFIGS, _TYPE_CODES.get(spec.type, 0),
                       spec.doc or None, tuple(synonyms), sensitive)


def broker_config_entries(config: KafkaConfig, keys: Collection[str] | None = None) -> list[ConfigEntry]:
    """This broker's configs (or those in ``keys``) with their effective values and sources;
    the dynamic ones are writable."""
    entries = []
    for name in sorted(BROKER_CONFIG):
        if not _wanted(name, keys):
            continue
        spec = BROKER_CONFIG[name]
        synonyms = _broker_synonyms(config, name)
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(_broker_entry(spec, name, config_string(config[name]), source, synonyms))
    return entries


def default_broker_config_entries(config: KafkaConfig, keys: Collection[str] | None = None) -> list[ConfigEntry]:
    """The cluster-wide dynamic defaults (the BROKER resource named ``""``): only the keys
    set there, as Kafka reports ``currentDynamicDefaultConfigs``."""
    entries = []
    for name in sorted(config.dynamic_default_configs):
        spec = BROKER_CONFIG.get(name)
        if spec is None or not _wanted(name, keys):
            continue
        synonyms = _broker_synonyms(config, name, per_broker=False)
        entries.append(_broker_entry(spec, name, config.dynamic_default_configs[name],
                                     ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, synonyms))
    return entries
