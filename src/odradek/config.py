"""Broker and topic configuration: Kafka's keys, Kafka's defaults, Kafka's validation.

``KafkaConfig`` is a broker's ``server.properties``; ``LogConfig`` is the effective config of
one topic (broker defaults overlaid with the topic's overrides from ``/config/topics/<t>``).
Unknown broker keys are reported as warnings; a value that does not parse or validate fails
with one line naming the key, the value and the rule.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any

from odradek.security.protocols import SECURITY_PROTOCOLS, uses_sasl, uses_tls

__all__ = [
    "BROKER_CONFIG",
    "DYNAMIC_BROKER_CONFIGS",
    "TOPIC_CONFIG",
    "TOPIC_KEYS",
    "CleanerConfig",
    "ConfigError",
    "KafkaConfig",
    "Listener",
    "LogConfig",
    "load_properties",
    "parse_properties",
    "validate_dynamic_broker_config",
]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
DOUBLE_MAX = 1.7976931348623157e308  # Java's Double.MAX_VALUE


class ConfigError(ValueError):
    """A configuration value is missing, malformed or out of range."""


class Type(Enum):
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"
    PASSWORD = "password"  # a string that is never shown (DescribeConfigs reports it as sensitive)


_REQUIRED = object()


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: Type
    default: Any = _REQUIRED
    validator: Callable[[Any], str | None] | None = None
    doc: str = ""

    def default_value(self) -> Any:
        """The default, parsed (defaults of list keys are written as Kafka writes them: a
        comma-separated string)."""
        return self.parse(self.default) if isinstance(self.default, str) else self.default

    def parse(self, raw: Any) -> Any:
        value = _convert(self.name, self.type, raw)
        if self.validator is not None and value is not None:
            problem = self.validator(value)
            if problem:
                raise ConfigError(f"Invalid value {raw} for configuration {self.name}: {problem}")
        return value


def _convert(name: str, type_: Type, raw: Any) -> Any:
    if raw is None:
        return None
    if not isinstance(raw, str):
        raw = str(raw).lower() if isinstance(raw, bool) else str(raw)
    text = raw.strip()
    try:
        if type_ in (Type.INT, Type.LONG):
            # Java's parseInt syntax: Python's int() would also take "1_000" or non-ASCII digits.
            if not re.fullmatch(r"[+-]?[0-9]+", text):
                raise ValueError
            value = int(text)
            limit = INT_MAX if type_ is Type.INT else LONG_MAX
            if not -limit - 1 <= value <= limit:
                raise ValueError
            return value
        if type_ is Type.DOUBLE:
            return float(text)
        if type_ is Type.BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        if type_ is Type.LIST:
            return [item.strip() for item in text.split(",") if item.strip()]
        return text
    except ValueError:
        raise ConfigError(
            f"Invalid value {raw} for configuration {name}: expected a value of type {type_.value}"
        ) from None


def at_least(minimum: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= minimum else f"Value must be at least {minimum}"


def between(lo: float, hi: float) -> Callable[[Any], str | None]:
    return lambda v: None if lo <= v <= hi else f"Value must be between {lo} and {hi}"


def one_of(*choices: str, case_sensitive: bool = True) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        values = v if isinstance(v, list) else [v]
        allowed = choices if case_sensitive else tuple(c.lower() for c in choices)
        for item in values:
            if (item if case_sensitive else item.lower()) not in allowed:
                return f"String must be one of: {', '.join(choices)}"
        return None
    return check


# ------------------------------------------------------------------------------ topic config

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


@dataclass(frozen=True, slots=True)
class TopicKey:
    """One topic config and its broker synonym, the broker key whose value is the topic's
    default (Kafka's ``LogConfig`` keys and ``TopicConfigSynonyms``).

    The broker key takes the topic key's type, default and check, except where Kafka
    defines it without a check (``broker_checked=False``) or without a default because
    other broker keys decide it when it is unset (``broker_derived``: the hours and
    minutes forms, the fallbacks; see ``KafkaConfig``).
    """

    name: str
    type: Type
    default: Any
    validator: Callable[[Any], str | None] | None = None
    broker_key: str | None = None
    broker_checked: bool = True
    broker_derived: bool = False

    @property
    def spec(self) -> ConfigKey:
        return ConfigKey(self.name, self.type, self.default, self.validator, TOPIC_DOCS[self.name])

    @property
    def broker_spec(self) -> ConfigKey:
        assert self.broker_key is not None
        return ConfigKey(self.broker_key, self.type, None if self.broker_derived else self.default,
                         self.validator if self.broker_checked else None,
                         f"The default of topic config {self.name}. {TOPIC_DOCS[self.name]}")


# What each topic config does, as DescribeConfigs v3+ reports it (include_documentation).
TOPIC_DOCS: dict[str, str] = {
    "cleanup.policy": "How old segments go: \"delete\" removes them past the retention time or size, "
                      "\"compact\" keeps the latest record of each key; both may be listed.",
    "compression.type": "The codec batches are stored with: uncompressed, gzip, snappy, lz4 or zstd, "
                        "or \"producer\" to keep whatever codec the producer used.",
    "delete.retention.ms": "How long a compacted topic keeps a tombstone (a null value), so that a "
                           "consumer reading from the start still sees the delete.",
    "file.delete.delay.ms": "How long a segment removed from the log stays on disk before its files are "
                            "deleted.",
    "flush.messages": "Force an fsync of the log after this many records (by default the operating "
                      "system decides, and replication gives durability).",
    "flush.ms": "Force an fsync of the log when its oldest unflushed record is this old.",
    "follower.replication.throttled.replicas": "The replicas whose follower fetches are throttled, as "
                                               "partition:broker pairs, or * for every replica of the topic.",
    "index.interval.bytes": "How many bytes of records go between two entries of the offset index.",
    "leader.replication.throttled.replicas": "The replicas whose reads by followers are throttled on the "
                                             "leader, as partition:broker pairs, or * for every replica.",
    "max.compaction.lag.ms": "The longest a record may stay uncompacted in a compacted log.",
    "max.message.bytes": "The largest record batch the topic accepts (after compression).",
    "message.downconversion.enable": "Whether the broker converts batches to an older format for "
                                     "consumers that fetch with an old Fetch version.",
    "message.format.version": "The record format version the topic is written in (ignored from 3.0 on; "
                              "batches are always v2).",
    "message.timestamp.difference.max.ms": "The most a CreateTime timestamp may differ from the broker's "
                                           "clock before the batch is refused.",
    "message.timestamp.type": "Whether a record keeps the producer's timestamp (CreateTime) or gets the "
                              "broker's time on append (LogAppendTime).",
    "min.cleanable.dirty.ratio": "The share of a log's bytes that must be uncompacted before the cleaner "
                                 "compacts it.",
    "min.compaction.lag.ms": "The least time a record stays uncompacted in a compacted log.",
    "min.insync.replicas": "With acks=all, the number of in-sync replicas a write needs; with fewer, "
                           "producers get NOT_ENOUGH_REPLICAS.",
    "preallocate": "Whether a new segment's file is allocated at its full size when it is created.",
    "retention.bytes": "The largest a partition's log may grow before its oldest segments are removed "
                       "(-1: no limit).",
    "retention.ms": "How long a segment is kept after its newest record before it is removed "
                    "(-1: no limit).",
    "segment.bytes": "The size at which a segment is closed and a new one started.",
    "segment.index.bytes": "The size of each segment's offset and time index files.",
    "segment.jitter.ms": "A random amount, up to this, taken off segment.ms so that segments do not all "
                         "roll at once.",
    "segment.ms": "The age at which a segment is closed and a new one started, even when not full.",
    "unclean.leader.election.enable": "Whether a replica outside the ISR may become leader when no "
                                      "in-sync replica is left (availability over losing records).",
}

_T = TopicKey
# The one table of topic configs: every default is written here and nowhere else.
TOPIC_KEYS: tuple[TopicKey, ...] = (
    _T("cleanup.policy", Type.LIST, "delete", one_of("delete", "compact"), "log.cleanup.policy"),
    _T("compression.type", Type.STRING, "producer", one_of(*COMPRESSION_TYPES), "compression.type"),
    _T("delete.retention.ms", Type.LONG, 86400000, at_least(0), "log.cleaner.delete.retention.ms",
       broker_checked=False),
    _T("file.delete.delay.ms", Type.LONG, 60000, at_least(0), "log.segment.delete.delay.ms"),
    _T("flush.messages", Type.LONG, LONG_MAX, at_least(1), "log.flush.interval.messages"),
    _T("flush.ms", Type.LONG, LONG_MAX, at_least(0), "log.flush.interval.ms", broker_derived=True),
    _T("follower.replication.throttled.replicas", Type.LIST, ""),
    _T("index.interval.bytes", Type.INT, 4096, at_least(0), "log.index.interval.bytes"),
    _T("leader.replication.throttled.replicas", Type.LIST, ""),
    _T("max.compaction.lag.ms", Type.LONG, LONG_MAX, at_least(1), "log.cleaner.max.compaction.lag.ms",
       broker_checked=False),
    _T("max.message.bytes", Type.INT, 1048588, at_least(0), "message.max.bytes"),
    _T("message.downconversion.enable", Type.BOOLEAN, True, None, "log.message.downconversion.enable"),
    _T("message.format.version", Type.STRING, "3.0-IV1", None, "log.message.format.version"),
    _T("message.timestamp.difference.max.ms", Type.LONG, LONG_MAX, at_least(0),
       "log.message.timestamp.difference.max.ms", broker_checked=False),
    _T("message.timestamp.type", Type.STRING, "CreateTime", one_of("CreateTime", "LogAppendTime"),
       "log.message.timestamp.type"),
    _T("min.cleanable.dirty.ratio", Type.DOUBLE, 0.5, between(0, 1), "log.cleaner.min.cleanable.ratio"),
    _T("min.compaction.lag.ms", Type.LONG, 0, at_least(0), "log.cleaner.min.compaction.lag.ms",
       broker_checked=False),
    _T("min.insync.replicas", Type.INT, 1, at_least(1), "min.insync.replicas"),
    _T("preallocate", Type.BOOLEAN, False, None, "log.preallocate"),
    _T("retention.bytes", Type.LONG, -1, None, "log.retention.bytes"),
    _T("retention.ms", Type.LONG, 604800000, at_least(-1), "log.retention.ms", broker_checked=False,
       broker_derived=True),
    _T("segment.bytes", Type.INT, 1073741824, at_least(14), "log.segment.bytes"),
    _T("segment.index.bytes", Type.INT, 10485760, at_least(8), "log.index.size.max.bytes"),
    _T("segment.jitter.ms", Type.LONG, 0, at_least(0), "log.roll.jitter.ms", broker_derived=True),
    _T("segment.ms", Type.LONG, 604800000, at_least(1), "log.roll.ms", broker_derived=True),
    _T("unclean.leader.election.enable", Type.BOOLEAN, False, None, "unclean.leader.election.enable"),
)

TOPIC_CONFIG: dict[str, ConfigKey] = {key.name: key.spec for key in TOPIC_KEYS}
# topic key -> the broker key whose value is the topic's default
TOPIC_CONFIG_SYNONYMS: dict[str, str] = {
    key.name: key.broker_key for key in TOPIC_KEYS if key.broker_key is not None
}
# topic key -> its default, parsed (lists as tuples, as LogConfig holds them)
_TOPIC_DEFAULTS: dict[str, Any] = {
    name: tuple(v) if isinstance(v := spec.default_value(), list) else v
    for name, spec in TOPIC_CONFIG.items()
}


def validate_topic_config(overrides: Mapping[str, str]) -> dict[str, str]:
    """Check topic overrides (as given to ``--config`` or CreateTopics); returns them as strings.

    Raises ConfigError (INVALID_CONFIG at the API edge) naming the first bad key, or the
    conflict of min.compaction.lag.ms above max.compaction.lag.ms (Kafka's
    LogConfig.validateValues, which compares them with topic-level defaults filled in).
    """
    checked: dict[str, str] = {}
    parsed: dict[str, Any] = {}
    for key, raw in overrides.items():
        spec = TOPIC_CONFIG.get(key)
        if spec is None:
            raise ConfigError(f"Unknown topic config name: {key}")
        parsed[key] = spec.parse(raw)
        checked[key] = str(raw).strip()
    min_lag = parsed.get("min.compaction.lag.ms", TOPIC_CONFIG["min.compaction.lag.ms"].default)
    max_lag = parsed.get("max.compaction.lag.ms", TOPIC_CONFIG["max.compaction.lag.ms"].default)
    if min_lag > max_lag:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
                          f"max.compaction.lag.ms ({max_lag})")
    return checked


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The effective configuration of one topic's logs: a field per topic key odradek acts
    on (its default from :data:`TOPIC_KEYS`), the other keys in ``others``."""

    segment_bytes: int = _TOPIC_DEFAULTS["segment.bytes"]
    segment_ms: int = _TOPIC_DEFAULTS["segment.ms"]
    segment_jitter_ms: int = _TOPIC_DEFAULTS["segment.jitter.ms"]
    segment_index_bytes: int = _TOPIC_DEFAULTS["segment.index.bytes"]
    index_interval_bytes: int = _TOPIC_DEFAULTS["index.interval.bytes"]
    retention_bytes: int = _TOPIC_DEFAULTS["retention.bytes"]
    retention_ms: int = _TOPIC_DEFAULTS["retention.ms"]
    max_message_bytes: int = _TOPIC_DEFAULTS["max.message.bytes"]
    flush_messages: int = _TOPIC_DEFAULTS["flush.messages"]
    flush_ms: int = _TOPIC_DEFAULTS["flush.ms"]
    file_delete_delay_ms: int = _TOPIC_DEFAULTS["file.delete.delay.ms"]
    message_timestamp_type: str = _TOPIC_DEFAULTS["message.timestamp.type"]
    message_timestamp_difference_max_ms: int = _TOPIC_DEFAULTS["message.timestamp.difference.max.ms"]
    min_insync_replicas: int = _TOPIC_DEFAULTS["min.insync.replicas"]
    unclean_leader_election_enable: bool = _TOPIC_DEFAULTS["unclean.leader.election.enable"]
    cleanup_policy: tuple[str, ...] = _TOPIC_DEFAULTS["cleanup.policy"]
    compression_type: str = _TOPIC_DEFAULTS["compression.type"]
    preallocate: bool = _TOPIC_DEFAULTS["preallocate"]
    delete_retention_ms: int = _TOPIC_DEFAULTS["delete.retention.ms"]
    min_cleanable_dirty_ratio: float = _TOPIC_DEFAULTS["min.cleanable.dirty.ratio"]
    min_compaction_lag_ms: int = _TOPIC_DEFAULTS["min.compaction.lag.ms"]
    max_compaction_lag_ms: int = _TOPIC_DEFAULTS["max.compaction.lag.ms"]
    # Everything else (valid keys odradek accepts and reports but does not act on).
    others: Mapping[str, Any] = field(default_factory=dict)
    # The keys that were set on the topic itself (for describe's "Configs:").
    overridden: frozenset[str] = frozenset()

    @classmethod
    def build(cls, defaults: Mapping[str, Any], overrides: Mapping[str, str] | None = None) -> LogConfig:
        """``defaults``: topic key -> parsed value (see ``KafkaConfig.topic_defaults``)."""
        values = dict(defaults)
        overrides = overrides or {}
        for key, raw in overrides.items():
            spec = TOPIC_CONFIG.get(key)
            if spec is not None:
                values[key] = spec.parse(raw)
        known = {f for f in cls.__dataclass_fields__ if f not in ("others", "overridden")}
        kwargs: dict[str, Any] = {}
        others: dict[str, Any] = {}
        for key, value in values.items():
            attr = key.replace(".", "_")
            if attr in known:
                kwargs[attr] = tuple(value) if isinstance(value, list) else value
            else:
                others[key] = value
        return cls(**kwargs, others=others, overridden=frozenset(k for k in overrides if k in TOPIC_CONFIG))

    @property
    def compact(self) -> bool:
        """The log cleaner compacts this topic (cleanup.policy holds ``compact``)."""
        return "compact" in self.cleanup_policy

    def rebased(self, defaults: LogConfig) -> LogConfig:
        """This topic's overrides laid over new broker ``defaults`` (a dynamic broker config
        changed the defaults; the topic keeps what it set itself)."""
        kwargs = {f: getattr(defaults, f) for f in self.__dataclass_fields__
                  if f not in ("others", "overridden")}
        others = dict(defaults.others)
        for key in self.overridden:
            attr = key.replace(".", "_")
            if attr in kwargs:
                kwargs[attr] = getattr(self, attr)
            else:
                others[key] = self.others.get(key)
        return LogConfig(**kwargs, others=others, overridden=self.overridden)

    def value_of(self, key: str) -> Any:
        attr = key.replace(".", "_")
        if attr in self.__dataclass_fields__ and attr not in ("others", "overridden"):
            value = getattr(self, attr)
            return list(value) if isinstance(value, tuple) else value
        return self.others.get(key)

    def as_strings(self) -> dict[str, str]:
        """Every topic config as Kafka prints it (lists comma-joined, booleans lower-case)."""
        return {key: config_string(self.value_of(key)) or "" for key in sorted(TOPIC_CONFIG)}


def _first_set(value: Any, otherwise: Any) -> Any:
    return otherwise if value is None else value


def config_string(value: Any) -> str | None:
    """A parsed config value as Kafka prints it (lists comma-joined, booleans lower-case,
    doubles as Java's Double.toString); None stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    if isinstance(value, float):
        return java_double_string(value)
    return str(value)


def java_double_string(value: float) -> str:
    """A double as Java's Double.toString prints it (how Kafka shows DOUBLE configs):
    plain decimals for 1e-3 <= |x| < 1e7, otherwise ``d.dddE<exponent>``."""
    if value == 0 or not math.isfinite(value) or 1e-3 <= abs(value) < 1e7:
        return repr(value) if math.isfinite(value) else ("NaN" if value != value else
                                                           ("-" if value < 0 else "") + "Infinity")
    # repr holds the shortest digits that round-trip, as Java's algorithm picks them.
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    mantissa = f"{text[0]}.{text[1:] or '0'}"
    return f"{'-' if sign else ''}{mantissa}E{exponent + len(text) - 1}"


# ------------------------------------------------------------------------------ broker config

LISTENER_PREFIX = "listener.name."


def _listener_key(key: str) -> str:
    """``listener.name.<listener>.<key>`` -> ``<key>``; a key that cannot be set per
    listener is an error, as Kafka's config would not know it either."""
    listener, _, rest = key[len(LISTENER_PREFIX):].partition(".")
    base = rest.split(".", 1)[1] if rest.split(".", 1)[0].upper() in (*SASL_MECHANISMS, "GSSAPI", "OAUTHBEARER") \
        and "." in rest else rest
    if not listener or not base.startswith(LISTENER_PREFIXABLE_PREFIXES):
        raise ConfigError(f"Invalid configuration {key}: only ssl.*, sasl.* and connections.max.reauth.ms "
                          "may be set per listener (listener.name.<listener>.<key>)")
    return base

_LISTENER_RE = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>-?\d+)$")


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str  # "" binds every interface
    port: int

    @classmethod
    def parse_list(cls, key: str, items: Iterable[str]) -> list[Listener]:
        result = []
        for item in items:
            m = _LISTENER_RE.match(item)
            if not m:
                raise ConfigError(
                    f"Invalid value {item} for configuration {key}: expected NAME://host:port")
            port = int(m["port"])
            if not 0 <= port <= 65535:
                raise ConfigError(f"Invalid value {item} for configuration {key}: port out of range")
            result.append(cls(m["name"].upper(), m["host"].strip("[]"), port))
        names = [lst.name for lst in result]
        if len(set(names)) != len(names):
            raise ConfigError(f"Invalid value {','.join(items)} for configuration {key}: "
                              "each listener must have a distinct name")
        return result


def _broker_keys() -> list[ConfigKey]:
    """Every broker key; the synonyms of topic keys come from :data:`TOPIC_KEYS`."""
    k = ConfigKey
    keys = [
        k("broker.id", Type.INT, -1, at_least(-1)),
        k("broker.id.generation.enable", Type.BOOLEAN, True),
        k("reserved.broker.max.id", Type.INT, 1000, at_least(0)),
        k("broker.rack", Type.STRING, None),
        k("listeners", Type.LIST, "PLAINTEXT://:9092"),
        k("advertised.listeners", Type.LIST, None),
        k("listener.security.protocol.map", Type.LIST,
          "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
        k("inter.broker.listener.name", Type.STRING, None),
        k("security.inter.broker.protocol", Type.STRING, "PLAINTEXT", one_of(*SECURITY_PROTOCOLS)),
        k("log.dirs", Type.LIST, None),
        k("log.dir", Type.LIST, "/tmp/kafka-logs"),
        k("zookeeper.connect", Type.STRING),
        k("zookeeper.session.timeout.ms", Type.INT, 18000, at_least(1)),
        k("zookeeper.connection.timeout.ms", Type.INT, None, at_least(1)),
        k("zookeeper.max.in.flight.requests", Type.INT, 10, at_least(1)),
        k("num.partitions", Type.INT, 1, at_least(1)),
        k("default.replication.factor", Type.INT, 1, at_least(1)),
        # Kafka defaults to true; odradek does not create topics behind a typo.
        k("auto.create.topics.enable", Type.BOOLEAN, False),
        k("delete.topic.enable", Type.BOOLEAN, True),
        k("controlled.shutdown.enable", Type.BOOLEAN, True),
        k("controlled.shutdown.max.retries", Type.INT, 3, at_least(0)),
        k("controlled.shutdown.retry.backoff.ms", Type.LONG, 5000, at_least(0)),
        k("controller.socket.timeout.ms", Type.INT, 30000, at_least(1)),
        k("auto.leader.rebalance.enable", Type.BOOLEAN, True),
        k("leader.imbalance.check.interval.seconds", Type.LONG, 300, at_least(1)),
        k("leader.imbalance.per.broker.percentage", Type.INT, 10, between(0, 100)),
        k("replica.lag.time.max.ms", Type.LONG, 30000, at_least(1)),
        k("replica.fetch.max.bytes", Type.INT, 1048576, at_least(0)),
        # Replication throttles (Kafka's ReplicationQuotaManager): dynamic broker configs.
        k("leader.replication.throttled.rate", Type.LONG, LONG_MAX, at_least(0)),
        k("follower.replication.throttled.rate", Type.LONG, LONG_MAX, at_least(0)),
        k("replica.alter.log.dirs.io.max.bytes.per.second", Type.LONG, LONG_MAX, at_least(0)),
        k("replication.quota.window.num", Type.INT, 11, at_least(1)),
        k("replication.quota.window.size.seconds", Type.INT, 1, at_least(1)),
        k("replica.fetch.min.bytes", Type.INT, 1, at_least(1)),
        k("replica.fetch.wait.max.ms", Type.INT, 500, at_least(0)),
        k("replica.fetch.response.max.bytes", Type.INT, 10485760, at_least(0)),
        k("replica.fetch.backoff.ms", Type.INT, 1000, at_least(0)),
        k("max.incremental.fetch.session.cache.slots", Type.INT, 1000, at_least(0)),
        k("replica.socket.timeout.ms", Type.INT, 30000, at_least(1)),
        k("replica.high.watermark.checkpoint.interval.ms", Type.LONG, 5000, at_least(1)),
        k("num.replica.fetchers", Type.INT, 1, at_least(1)),
        # Thread pool sizes: accepted (and dynamically updatable, Kafka's DynamicThreadPool)
        # but without meaning in a one-loop broker.
        k("num.network.threads", Type.INT, 3, at_least(1)),
        k("num.io.threads", Type.INT, 8, at_least(1)),
        k("num.recovery.threads.per.data.dir", Type.INT, 1, at_least(1)),
        k("background.threads", Type.INT, 10, at_least(1)),
        k("socket.request.max.bytes", Type.INT, 104857600, at_least(1)),
        # odradek's own: where /metrics is served (Prometheus), on the first listener's host;
        # unset: no metrics server, 0: a port the system picks (tests).
        k("metrics.port", Type.INT, None, at_least(0)),
        k("socket.send.buffer.bytes", Type.INT, 102400),
        k("socket.receive.buffer.bytes", Type.INT, 102400),
        k("connections.max.idle.ms", Type.LONG, 600000),
        k("request.timeout.ms", Type.INT, 30000, at_least(0)),
        k("log.roll.hours", Type.INT, 168, at_least(1)),
        k("log.roll.jitter.hours", Type.INT, 0, at_least(0)),
        k("log.retention.minutes", Type.INT, None),
        k("log.retention.hours", Type.INT, 168),
        k("log.retention.check.interval.ms", Type.LONG, 300000, at_least(1)),
        k("log.flush.scheduler.interval.ms", Type.LONG, LONG_MAX),
        k("log.flush.offset.checkpoint.interval.ms", Type.INT, 60000, at_least(0)),
        k("log.flush.start.offset.checkpoint.interval.ms", Type.INT, 60000, at_least(0)),
        k("log.cleaner.enable", Type.BOOLEAN, True),
        k("log.cleaner.threads", Type.INT, 1, at_least(0)),
        k("log.cleaner.dedupe.buffer.size", Type.LONG, 134217728),
        k("log.cleaner.io.buffer.size", Type.INT, 524288, at_least(0)),
        k("log.cleaner.io.buffer.load.factor", Type.DOUBLE, 0.9),
        k("log.cleaner.io.max.bytes.per.second", Type.DOUBLE, DOUBLE_MAX),
        k("log.cleaner.backoff.ms", Type.LONG, 15000, at_least(0)),
        k("offsets.topic.replication.factor", Type.INT, 3, at_least(1)),
        k("offsets.topic.num.partitions", Type.INT, 50, at_least(1)),
        k("group.initial.rebalance.delay.ms", Type.INT, 3000),
        k("producer.id.expiration.ms", Type.INT, 86400000),
        k("inter.broker.protocol.version", Type.STRING, "3.0-IV1"),
        k("file.delete.delay.ms", Type.LONG, None, at_least(0)),
        # Client quotas (broker/quota/): the rate is measured over this many windows of this size.
        k("quota.window.num", Type.INT, 11, at_least(1)),
        k("quota.window.size.seconds", Type.INT, 1, at_least(1)),
    ]
    keys += [key.broker_spec for key in TOPIC_KEYS if key.broker_key is not None]
    keys += _group_coordinator_keys()
    keys += _transaction_coordinator_keys()
    keys += _security_keys()
    return keys


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

# Keys that may also be set per listener as ``listener.name.<listener>.<key>`` (Kafka's
# listener-prefixed configs; the SASL JAAS config also per mechanism,
# ``listener.name.<listener>.<mechanism>.sasl.jaas.config``).
LISTENER_PREFIXABLE_PREFIXES = ("ssl.", "sasl.", "connections.max.reauth.ms")


def _security_keys() -> list[ConfigKey]:
    """TLS, SASL and authorization keys (Kafka 2.8's names and defaults; security/)."""
    k = ConfigKey
    return [
        # TLS (Kafka's SslConfigs; PEM per KIP-651; JKS stores cannot be read from Python)
        k("ssl.protocol", Type.STRING, "TLSv1.3"),
        k("ssl.provider", Type.STRING, None),
        k("ssl.enabled.protocols", Type.LIST, "TLSv1.2,TLSv1.3",
          lambda v: None if set(v) <= {"TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"}
          else "expected TLS protocol names (TLSv1.2, TLSv1.3)"),
        k("ssl.cipher.suites", Type.LIST, ""),
        k("ssl.keystore.type", Type.STRING, "JKS", one_of("JKS", "PKCS12", "PEM", case_sensitive=False)),
        k("ssl.keystore.location", Type.STRING, None),
        k("ssl.keystore.password", Type.PASSWORD, None),
        k("ssl.key.password", Type.PASSWORD, None),
        k("ssl.keystore.key", Type.PASSWORD, None),
        k("ssl.keystore.certificate.chain", Type.PASSWORD, None),
        k("ssl.truststore.type", Type.STRING, "JKS", one_of("JKS", "PKCS12", "PEM", case_sensitive=False)),
        k("ssl.truststore.location", Type.STRING, None),
        k("ssl.truststore.password", Type.PASSWORD, None),
        k("ssl.truststore.certificates", Type.PASSWORD, None),
        k("ssl.keymanager.algorithm", Type.STRING, "SunX509"),
        k("ssl.trustmanager.algorithm", Type.STRING, "PKIX"),
        k("ssl.endpoint.identification.algorithm", Type.STRING, "https"),
        k("ssl.secure.random.implementation", Type.STRING, None),
        k("ssl.client.auth", Type.STRING, "none", one_of("required", "requested", "none")),
        k("ssl.principal.mapping.rules", Type.STRING, "DEFAULT"),
        k("ssl.engine.factory.class", Type.STRING, None),
        # SASL
        k("sasl.enabled.mechanisms", Type.LIST, "GSSAPI"),
        k("sasl.mechanism.inter.broker.protocol", Type.STRING, "GSSAPI"),
        k("sasl.jaas.config", Type.PASSWORD, None),
        k("sasl.server.callback.handler.class", Type.STRING, None),
        k("sasl.client.callback.handler.class", Type.STRING, None),
        k("sasl.login.class", Type.STRING, None),
        k("sasl.login.callback.handler.class", Type.STRING, None),
        k("sasl.server.max.receive.size", Type.INT, 524288, at_least(1)),
        # Kerberos (GSSAPI) settings: accepted, listed and dynamically updatable as in Kafka
        # (DynamicListenerConfig); odradek has no GSSAPI mechanism to use them.
        k("sasl.kerberos.service.name", Type.STRING, None),
        k("sasl.kerberos.kinit.cmd", Type.STRING, "/usr/bin/kinit"),
        k("sasl.kerberos.ticket.renew.window.factor", Type.DOUBLE, 0.8),
        k("sasl.kerberos.ticket.renew.jitter", Type.DOUBLE, 0.05),
        k("sasl.kerberos.min.time.before.relogin", Type.LONG, 60000),
        k("sasl.kerberos.principal.to.local.rules", Type.LIST, "DEFAULT"),
        k("connections.max.reauth.ms", Type.LONG, 0, at_least(0)),
        k("principal.builder.class", Type.STRING, None),
        # Authorization (Kafka's AclAuthorizer reads these from the broker config)
        k("authorizer.class.name", Type.STRING, ""),
        k("super.users", Type.STRING, None),
        k("allow.everyone.if.no.acl.found", Type.BOOLEAN, False),
    ]


def _group_coordinator_keys() -> list[ConfigKey]:
    """The group coordinator's keys (Kafka's names and defaults; broker/group/)."""
    k = ConfigKey
    return [
        k("group.min.session.timeout.ms", Type.INT, 6000, at_least(0)),
        k("group.max.session.timeout.ms", Type.INT, 1800000, at_least(0)),
        k("group.max.size", Type.INT, INT_MAX, at_least(1)),
        k("offsets.retention.minutes", Type.INT, 10080, at_least(1)),
        k("offsets.retention.check.interval.ms", Type.LONG, 600000, at_least(1)),
        k("offsets.commit.timeout.ms", Type.INT, 5000, at_least(1)),
        k("offset.metadata.max.bytes", Type.INT, 4096, at_least(0)),
        k("offsets.load.buffer.size", Type.INT, 5242880, at_least(1)),
        k("offsets.topic.segment.bytes", Type.INT, 104857600, at_least(1)),
    ]


def _transaction_coordinator_keys() -> list[ConfigKey]:
    """The transaction coordinator's keys (Kafka's names, defaults and bounds; broker/transaction/)."""
    k = ConfigKey
    return [
        k("transaction.state.log.num.partitions", Type.INT, 50, at_least(1)),
        k("transaction.state.log.replication.factor", Type.INT, 3, at_least(1)),
        k("transaction.state.log.min.isr", Type.INT, 2, at_least(1)),
        k("transaction.state.log.segment.bytes", Type.INT, 104857600, at_least(1)),
        k("transaction.state.log.load.buffer.size", Type.INT, 5242880, at_least(1)),
        k("transaction.max.timeout.ms", Type.INT, 900000, at_least(1)),
        k("transactional.id.expiration.ms", Type.INT, 604800000, at_least(1)),
        k("transaction.abort.timed.out.transaction.cleanup.interval.ms", Type.INT, 10000, at_least(1)),
        k("transaction.remove.expired.transaction.cleanup.interval.ms", Type.INT, 3600000, at_least(1)),
        k("transaction.partition.verification.enable", Type.BOOLEAN, True),
    ]


BROKER_CONFIG: dict[str, ConfigKey] = {key.name: key for key in _broker_keys()}

# Accepted and ignored: thread pool sizes and similar knobs that have no meaning in a
# one-loop Python broker.  Listed so a Kafka server.properties loads without warnings.
IGNORED_BROKER_KEYS = frozenset({
    "queued.max.requests", "metric.reporters",
    "confluent.support.metrics.enable", "zookeeper.set.acl",
    "kafka.metrics.reporters", "kafka.metrics.polling.interval.secs",
})


# Kafka's DynamicLogConfig.ReconfigurableConfigs: the broker defaults of topic configs
# (all but the message format version) change without a restart.
DYNAMIC_LOG_CONFIGS = frozenset(TOPIC_CONFIG_SYNONYMS.values()) - {"log.message.format.version"}
# Kafka's LogCleaner.ReconfigurableConfigs, plus log.cleaner.enable (the cleaner starts and
# stops with it).
DYNAMIC_CLEANER_CONFIGS = frozenset({
    "log.cleaner.enable", "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms", "message.max.bytes",
})
# Kafka's DynamicThreadPool.ReconfigurableConfigs and the SASL part of
# DynamicListenerConfig.ReconfigurableConfigs: stored and described, nothing to reconfigure.
DYNAMIC_ACCEPTED_CONFIGS = frozenset({
    "num.network.threads", "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "background.threads", "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
})
# Kafka's DynamicReplicationConfig.ReconfigurableConfigs.
DYNAMIC_REPLICATION_CONFIGS = frozenset({
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
})
# Kafka's DynamicBrokerConfig.AllDynamicConfigs as far as odradek has them.
DYNAMIC_BROKER_CONFIGS = (DYNAMIC_LOG_CONFIGS | DYNAMIC_CLEANER_CONFIGS | DYNAMIC_ACCEPTED_CONFIGS
                          | DYNAMIC_REPLICATION_CONFIGS)


def validate_dynamic_broker_config(config: Mapping[str, str]) -> dict[str, str]:
    """Check a dynamic broker config (AlterConfigs on a BROKER resource, or what
    ``/config/brokers/<id|<default>>`` holds); returns it as strings.

    Raises ConfigError with Kafka's messages (DynamicBrokerConfig.validateConfigs): keys that
    cannot change without a restart are named together, a bad value by its key.
    """
    fixed = sorted(key for key in config if key not in DYNAMIC_BROKER_CONFIGS)
    if fixed:
        raise ConfigError(f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
    checked: dict[str, str] = {}
    for key, raw in config.items():
        BROKER_CONFIG[key].parse(raw)
        checked[key] = str(raw).strip()
    return checked


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """What the log cleaner runs with (Kafka's CleanerConfig, from the log.cleaner.* keys)."""

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 134217728
    io_buffer_load_factor: float = 0.9
    io_max_bytes_per_second: float = DOUBLE_MAX
    backoff_ms: int = 15000

    # Kafka's SkimpyOffsetMap: a 16-byte MD5 of the key and an 8-byte offset per entry.
    BYTES_PER_ENTRY = 24

    def max_map_entries(self) -> int:
        """How many keys one cleaner's offset map holds: each thread's share of the dedupe
        buffer (Kafka caps it at Int.MaxValue bytes), filled up to the load factor."""
        per_thread = min(self.dedupe_buffer_size / max(self.threads, 1), INT_MAX)
        return int(per_thread * self.io_buffer_load_factor / self.BYTES_PER_ENTRY)

    def check_reconfiguration(self, new: CleanerConfig) -> None:
        """Kafka's LogCleaner.validateReconfiguration: the thread count changes by at most a
        factor of two at a time and stays at least 1."""
        if new.threads < 1:
            raise ConfigError("Log cleaner threads should be at least 1")
        if new.threads < self.threads // 2:
            raise ConfigError("Log cleaner threads cannot be reduced to less than half the current "
                              f"value {self.threads}")
        if new.threads > self.threads * 2:
            raise ConfigError("Log cleaner threads cannot be increased to more than double the "
                              f"current value {self.threads}")


# Where a key ends: the first '=' or ':' (blanks around it included), else the first blanks.
_PROPERTY_SEPARATOR = re.compile(r"\s*[=:]\s*|\s+")


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` text (server.properties, a ``--command-config`` file, zoo.cfg) as a
    dict: ``key=value``, ``key: value`` or ``key value`` lines, ``#``/``!`` comments, an odd
    number of trailing backslashes continuing the line onto the next (whose leading blanks are
    dropped).  Values are trimmed, as Kafka's ConfigDef trims them; ``=value`` has the key ``""``,
    as in Java; other backslash escapes are kept as written."""
    props: dict[str, str] = {}
    logical = ""
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if (len(line) - len(line.rstrip("\\"))) % 2:
            logical += line[:-1]
            continue
        _put_property(props, logical + line)
        logical = ""
    if logical:
        _put_property(props, logical)
    return props


def _put_property(props: dict[str, str], line: str) -> None:
    separator = _PROPERTY_SEPARATOR.search(line)
    if separator is None:
        props[line] = ""
    else:
        props[line[:separator.start()]] = line[separator.end():].strip()


def load_properties(path: str | Path) -> dict[str, str]:
    """A Java properties file (UTF-8) through parse_properties; ConfigError if it cannot be read."""
    try:
        return parse_properties(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"cannot read config file {path}: not UTF-8 (byte {e.start})") from None


class KafkaConfig:
    """A broker's configuration.  ``KafkaConfig.from_props(props)`` validates everything.

    ``originals`` is ``server.properties``; dynamic broker configs (Kafka's
    DynamicBrokerConfig, stored in ZooKeeper) override it: the cluster-wide
    ``dynamic_default_configs`` first, then this broker's ``dynamic_broker_configs``.
    """

    def __init__(self, values: dict[str, Any], originals: dict[str, str], warnings: list[str],
                 dynamic_default_configs: Mapping[str, str] | None = None,
                 dynamic_broker_configs: Mapping[str, str] | None = None) -> None:
        self._values = values
        self.originals = originals
        self.warnings = warnings
        self.dynamic_default_configs = dict(dynamic_default_configs or {})
        self.dynamic_broker_configs = dict(dynamic_broker_configs or {})
        # What several keys decide together, derived here once (and checked by _validate).
        self.listeners: list[Listener] = Listener.parse_list("listeners", values["listeners"])
        advertised = values["advertised.listeners"]
        self.advertised_listeners: list[Listener] = (
            Listener.parse_list("advertised.listeners", advertised) if advertised else list(self.listeners))
        self.security_protocol_map: dict[str, str] = {}
        for item in values["listener.security.protocol.map"]:
            name, _, proto = item.partition(":")
            self.security_protocol_map[name.strip().upper()] = proto.strip().upper()
        # Kafka's precedence: log.retention.ms, else .minutes, else .hours; any negative value
        # means unlimited, which Kafka normalises to -1 (log.retention.hours=-1).
        if values["log.retention.ms"] is not None:
            retention = values["log.retention.ms"]
        elif values["log.retention.minutes"] is not None:
            retention = values["log.retention.minutes"] * 60_000
        else:
            retention = values["log.retention.hours"] * 3_600_000
        self.retention_ms: int = -1 if retention < 0 else retention
        self.roll_ms: int = _first_set(values["log.roll.ms"], values["log.roll.hours"] * 3_600_000)
        self._topic_defaults = self._broker_topic_defaults()
        self._validate()

    @classmethod
    def from_props(cls, props: Mapping[str, str], dynamic_default_configs: Mapping[str, str] | None = None,
                   dynamic_broker_configs: Mapping[str, str] | None = None) -> KafkaConfig:
        values: dict[str, Any] = {}
        warnings: list[str] = []
        for key, raw in props.items():
            if key in BROKER_CONFIG:
                values[key] = BROKER_CONFIG[key].parse(raw)
            elif key.startswith(LISTENER_PREFIX):
                _listener_key(key)  # checked here; read through listener_props()
            elif key not in IGNORED_BROKER_KEYS:
                warnings.append(f"The configuration '{key}' was supplied but isn't a known config.")
        for layer in (dynamic_default_configs or {}, dynamic_broker_configs or {}):
            for key, raw in validate_dynamic_broker_config(layer).items():
                values[key] = BROKER_CONFIG[key].parse(raw)
        for key, spec in BROKER_CONFIG.items():
            if key not in values:
                if spec.default is _REQUIRED:
                    raise ConfigError(f"Missing required configuration \"{key}\" which has no default value.")
                values[key] = spec.default_value()
        return cls(values, dict(props), warnings, dynamic_default_configs, dynamic_broker_configs)

    def with_dynamic(self, default_configs: Mapping[str, str], broker_configs: Mapping[str, str]) -> KafkaConfig:
        """This broker's static config under new dynamic layers (raises ConfigError)."""
        return KafkaConfig.from_props(self.originals, default_configs, broker_configs)

    def cleaner_config(self) -> CleanerConfig:
        return CleanerConfig(
            enable=self["log.cleaner.enable"],
            threads=self["log.cleaner.threads"],
            dedupe_buffer_size=self["log.cleaner.dedupe.buffer.size"],
            io_buffer_load_factor=self["log.cleaner.io.buffer.load.factor"],
            io_max_bytes_per_second=self["log.cleaner.io.max.bytes.per.second"],
            backoff_ms=self["log.cleaner.backoff.ms"],
        )

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def _validate(self) -> None:
        """The checks of keys against each other (each key was checked on its own)."""
        advertised = self["advertised.listeners"]
        ports = [lst.port for lst in self.listeners if lst.port != 0]
        if len(set(ports)) != len(ports):
            raise ConfigError(f"Invalid value {','.join(self['listeners'])} for configuration "
                              "listeners: each listener must have a different port")
        names = {lst.name for lst in self.listeners}
        for lst in self.advertised_listeners:
            if lst.name not in names:
                raise ConfigError(
                    f"Invalid value {','.join(advertised)} for configuration advertised.listeners: "
                    f"listener {lst.name} is not in listeners")
            if lst.host == "0.0.0.0":
                raise ConfigError(
                    f"Invalid value {','.join(advertised or self['listeners'])} for configuration "
                    "advertised.listeners (defaults to listeners): cannot advertise the "
                    "non-routable meta-address 0.0.0.0")
        for lst in self.listeners:
            if lst.name not in self.security_protocol_map:
                raise ConfigError(
                    f"Invalid value {','.join(self['listeners'])} for configuration listeners: "
                    f"no security protocol defined for listener {lst.name} in "
                    "listener.security.protocol.map")
        # As Kafka: the inter-broker listener is the one named, else the one named after
        # security.inter.broker.protocol; either way it must be advertised.
        inter = self["inter.broker.listener.name"]
        if inter is not None and "security.inter.broker.protocol" in self.originals:
            raise ConfigError(f"Invalid value {inter} for configuration inter.broker.listener.name: "
                              "only one of it and security.inter.broker.protocol may be set")
        advertised_names = {lst.name for lst in self.advertised_listeners}
        if self.inter_broker_listener_name not in advertised_names:
            raise ConfigError(
                f"Invalid value {inter or self['security.inter.broker.protocol']} for configuration "
                f"{'inter.broker.listener.name' if inter else 'security.inter.broker.protocol'}: "
                f"the inter-broker listener must be one of the advertised listeners "
                f"({', '.join(sorted(advertised_names))})")
        if self["broker.id"] > self["reserved.broker.max.id"] and self["broker.id.generation.enable"]:
            raise ConfigError(
                f"Invalid value {self['broker.id']} for configuration broker.id: it must not exceed "
                f"reserved.broker.max.id ({self['reserved.broker.max.id']})")
        if self["broker.id"] < 0 and not self["broker.id.generation.enable"]:
            raise ConfigError("broker.id must be set when broker.id.generation.enable is false")
        if not self.log_dirs:
            raise ConfigError("Invalid value for configuration log.dirs: at least one directory is required")
        if self.retention_ms == 0:
            key = next(k for k in ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
                       if self[k] is not None)
            raise ConfigError(f"Invalid value {self[key]} for configuration {key}: log retention "
                              "must be unlimited (-1) or at least 1 ms")
        if self["min.insync.replicas"] > self["default.replication.factor"] and "min.insync.replicas" in self.originals:
            # Kafka accepts this (topics may override the RF); it is only worth a warning.
            self.warnings.append("min.insync.replicas is larger than default.replication.factor: "
                                 "acks=all produce to such topics will fail")

    # -- the values the code reads most, as attributes

    @property
    def broker_id(self) -> int:
        return self["broker.id"]

    @property
    def rack(self) -> str | None:
        return self["broker.rack"] or None

    @property
    def log_dirs(self) -> list[str]:
        return list(self["log.dirs"] or self["log.dir"])

    @property
    def zookeeper_connect(self) -> str:
        return self["zookeeper.connect"]

    def listener_props(self, listener: str) -> dict[str, str]:
        """The security keys as one listener sees them: Kafka's listener-prefixed overrides
        (``listener.name.<listener>.<key>``, lower-case listener name) over the broker-wide
        values, as raw strings.  The per-mechanism JAAS configs keep their mechanism prefix
        (``scram-sha-256.sasl.jaas.config``)."""
        props = {key: raw for key, raw in self.originals.items()
                 if key.startswith(LISTENER_PREFIXABLE_PREFIXES)}
        prefix = f"{LISTENER_PREFIX}{listener.lower()}."
        for key, raw in self.originals.items():
            if key.startswith(prefix):
                props[key[len(prefix):]] = raw
        return props

    def inter_broker_client_properties(self) -> dict[str, str]:
        """Kafka client properties for this broker's own connections to the inter-broker
        listener (controller channel, replica fetchers, AlterIsr, controlled shutdown):
        ``security.protocol`` from the listener map, the listener's ``ssl.*`` keys, and for
        SASL ``sasl.mechanism`` = ``sasl.mechanism.inter.broker.protocol`` with the
        listener's ``<mechanism>.sasl.jaas.config`` (else ``sasl.jaas.config``), whose
        ``username``/``password`` options are the broker's login, as in Kafka."""
        listener = self.inter_broker_listener_name
        protocol = self.security_protocol_map[listener]
        listener_props = self.listener_props(listener)
        props = {"security.protocol": protocol}
        if uses_tls(protocol):
            props.update((k, v) for k, v in listener_props.items() if k.startswith("ssl."))
        if uses_sasl(protocol):
            mechanism = self["sasl.mechanism.inter.broker.protocol"]
            props["sasl.mechanism"] = mechanism
            jaas = listener_props.get(f"{mechanism.lower()}.sasl.jaas.config") or listener_props.get("sasl.jaas.config")
            if jaas:
                props["sasl.jaas.config"] = jaas
        return props

    @property
    def security_protocol(self) -> dict[str, str]:
        """Listener name -> security protocol, for the listeners this broker binds."""
        return {lst.name: self.security_protocol_map[lst.name] for lst in self.listeners}

    @property
    def inter_broker_listener_name(self) -> str:
        return (self["inter.broker.listener.name"] or self["security.inter.broker.protocol"]).upper()

    def _broker_topic_defaults(self) -> dict[str, Any]:
        """Topic key -> this broker's default for it: its broker synonym's value, or where
        that is unset what Kafka derives it from (the hours and minutes forms, the flush
        scheduler's interval), or the topic key's own default."""
        derived = {
            "log.retention.ms": self.retention_ms,
            "log.roll.ms": self.roll_ms,
            "log.roll.jitter.ms": _first_set(self["log.roll.jitter.ms"],
                                             self["log.roll.jitter.hours"] * 3_600_000),
            "log.flush.interval.ms": _first_set(self["log.flush.interval.ms"],
                                                self["log.flush.scheduler.interval.ms"]),
        }
        # file.delete.delay.ms set on the broker counts as log.segment.delete.delay.ms, unless
        # the latter is set dynamically.
        delay = "log.segment.delete.delay.ms"
        if self["file.delete.delay.ms"] is not None and delay not in self.dynamic_default_configs \
                and delay not in self.dynamic_broker_configs:
            derived[delay] = self["file.delete.delay.ms"]
        defaults = {}
        for key in TOPIC_KEYS:
            value = None
            if key.broker_key is not None:
                value = derived.get(key.broker_key, self._values.get(key.broker_key))
            defaults[key.name] = TOPIC_CONFIG[key.name].default_value() if value is None else value
        return defaults

    def topic_defaults(self) -> dict[str, Any]:
        """Topic key -> this broker's default value for it (Kafka's LogConfig defaults)."""
        return dict(self._topic_defaults)

    def log_config(self, overrides: Mapping[str, str] | None = None) -> LogConfig:
        return LogConfig.build(self.topic_defaults(), overrides)
