"""Options of the `odradek` data source: parsing and validation, no I/O.

The names and meanings follow Spark's Kafka source and sink (Structured Streaming + Kafka
Integration Guide), so a job moves from ``format("kafka")`` to ``format("odradek")`` by
changing the format name. Options reach us through a case-insensitive map whose keys are
lower-cased, so every lookup is by the lower-cased name and every message uses the
canonical spelling.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from odradek.security.client_properties import librdkafka_properties
from odradek.spark.offsets import EARLIEST, LATEST, TopicPartition
from odradek.spark.sink_state import DEFAULT_STATE_TOPIC


class OptionError(ValueError):
    """A missing, unknown, conflicting or malformed option of the data source."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"odradek data source: option '{option}': {problem}")
        self.option = option
        self.problem = problem

    def __reduce__(self):
        return (type(self), (self.option, self.problem))


class Bound(Enum):
    """Where a query starts or (batch only) ends when no offset is spelled out."""

    EARLIEST = "earliest"
    LATEST = "latest"


@dataclass(frozen=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    pattern: str

    def matches(self, topic: str) -> bool:
        # Java's Pattern.matcher(topic).matches(): the whole name must match.
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True)
class Assign:
    partitions: tuple[TopicPartition, ...]


Subscription = Subscribe | SubscribePattern | Assign


@dataclass(frozen=True)
class SpecificOffsets:
    """Per-partition offsets; EARLIEST (-2) and LATEST (-1) stand for the current bounds."""

    offsets: Mapping[TopicPartition, int]
    option: str


@dataclass(frozen=True)
class PartitionTimestamps:
    """Per-partition timestamps (ms): the first offset whose timestamp is >= it."""

    timestamps: Mapping[TopicPartition, int]
    option: str


@dataclass(frozen=True)
class GlobalTimestamp:
    """One timestamp (ms) for every partition of the subscription."""

    timestamp: int
    option: str


Position = Bound | SpecificOffsets | PartitionTimestamps | GlobalTimestamp


@dataclass(frozen=True)
class SourceOptions:
    """Everything a reader needs, validated."""

    kafka_params: Mapping[str, str]
    subscription: Subscription
    starting: Position
    ending: Position
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int = 1_000_000
    poll_timeout_ms: int = 120_000
    fetch_offset_retries: int = 3
    fetch_offset_retry_interval_ms: int = 10
    group_id_prefix: str = "odradek-spark-source"
    timestamp_strategy_latest: bool = False
    warnings: tuple[str, ...] = field(default=())

    @property
    def read_committed(self) -> bool:
        return self.kafka_params.get("isolation.level", "") == "read_committed"


@dataclass(frozen=True)
class SinkOptions:
    """Everything a writer needs, validated."""

    kafka_params: Mapping[str, str]
    topic: str | None
    exactly_once: bool = False
    state_topic: str = DEFAULT_STATE_TOPIC


BOOTSTRAP = "kafka.bootstrap.servers"

# Canonical spelling of every non-`kafka.*` option, by lower-cased name.
_SOURCE_OPTIONS = {
    name.lower(): name
    for name in (
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "startingOffsetsByTimestamp",
        "startingTimestamp",
        "startingOffsetsByTimestampStrategy",
        "endingOffsets",
        "endingOffsetsByTimestamp",
        "endingTimestamp",
        "failOnDataLoss",
        "includeHeaders",
        "maxOffsetsPerTrigger",
        "minPartitions",
        "maxRecordsPerPartition",
        "kafkaConsumer.pollTimeoutMs",
        "fetchOffset.numRetries",
        "fetchOffset.retryIntervalMs",
        "groupIdPrefix",
    )
}
# checkpointLocation and queryName belong to Spark's streaming engine, which passes them on
# to the sink.
_SINK_OPTIONS = {
    name.lower(): name
    for name in (
        "topic",
        "includeHeaders",
        "exactlyOnce",
        "exactlyOnce.stateTopic",
        "checkpointLocation",
        "queryName",
    )
}

# Kafka client settings the data source owns (as Spark's Kafka source and sink do).
_FORBIDDEN_SOURCE_PARAMS = {
    "auto.offset.reset": "set startingOffsets instead; the source picks its own offsets",
    "enable.auto.commit": "the source never commits offsets to Kafka",
    "enable.auto.offset.store": "the source never commits offsets to Kafka",
    "enable.partition.eof": "the source needs end-of-partition events to stop at gaps",
    "key.deserializer": "keys are always read as bytes; cast the key column instead",
    "value.deserializer": "values are always read as bytes; cast the value column instead",
    "interceptor.classes": "interceptors could change records the source accounts for",
}
_FORBIDDEN_SINK_PARAMS = {
    "key.serializer": "keys are written as bytes or UTF-8 strings; cast the key column",
    "value.serializer": "values are written as bytes or UTF-8 strings; cast the value column",
}


def parse_source_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Validate the options of ``spark.read`` (streaming=False) or ``spark.readStream``
    (streaming=True); streaming=None checks only the rules both share.

    Raises OptionError naming the first offending option.
    """
    opts = {k.lower(): v for k, v in options.items()}
    kafka_params = _kafka_params(opts, _FORBIDDEN_SOURCE_PARAMS)
    _reject_unknown(opts, _SOURCE_OPTIONS, "reading")
    warnings: list[str] = []

    subscription = _subscription(opts)
    starting = _starting(opts, streaming)
    ending = _ending(opts, streaming)
    _check_offsets_against_assign(subscription, starting)
    _check_offsets_against_assign(subscription, ending)

    max_per_trigger = _positive_int(opts, "maxOffsetsPerTrigger")
    if max_per_trigger is not None and streaming is False:
        warnings.append("maxOffsetsPerTrigger is ignored by batch queries")
        max_per_trigger = None
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(
            "startingOffsetsByTimestampStrategy", f"must be 'error' or 'latest', got {strategy!r}"
        )
    isolation = kafka_params.get("isolation.level", "read_uncommitted")
    if isolation not in ("read_uncommitted", "read_committed"):
        raise OptionError(
            "kafka.isolation.level",
            f"must be 'read_uncommitted' or 'read_committed', got {isolation!r}",
        )
    max_records = _positive_int(opts, "maxRecordsPerPartition")
    return SourceOptions(
        kafka_params=kafka_params,
        subscription=subscription,
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        max_offsets_per_trigger=max_per_trigger,
        min_partitions=_positive_int(opts, "minPartitions"),
        max_records_per_partition=max_records if max_records is not None else 1_000_000,
        poll_timeout_ms=_positive_int(opts, "kafkaConsumer.pollTimeoutMs") or 120_000,
        fetch_offset_retries=_non_negative_int(opts, "fetchOffset.numRetries", 3),
        fetch_offset_retry_interval_ms=_non_negative_int(opts, "fetchOffset.retryIntervalMs", 10),
        group_id_prefix=opts.get("groupidprefix", "odradek-spark-source"),
        timestamp_strategy_latest=strategy == "latest",
        warnings=tuple(warnings),
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the options of ``df.write`` / ``df.writeStream``."""
    opts = {k.lower(): v for k, v in options.items()}
    kafka_params = _kafka_params(opts, _FORBIDDEN_SINK_PARAMS)
    _reject_unknown(opts, _SINK_OPTIONS, "writing")
    _bool(opts, "includeHeaders", False)  # accepted for Spark parity; the headers column decides
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("topic", "must not be empty")
    exactly_once = _bool(opts, "exactlyOnce", False)
    state_topic = opts.get("exactlyonce.statetopic", DEFAULT_STATE_TOPIC).strip()
    if not state_topic:
        raise OptionError("exactlyOnce.stateTopic", "must not be empty")
    if exactly_once:
        _check_exactly_once_params(kafka_params)
    return SinkOptions(
        kafka_params=kafka_params,
        topic=topic.strip() if topic else None,
        exactly_once=exactly_once,
        state_topic=state_topic,
    )


def _check_exactly_once_params(params: Mapping[str, str]) -> None:
    """Transactions need acks=all and idempotence, and the sink derives the transactional
    ids itself (one per task, see spark/sink_state.py)."""
    if "transactional.id" in params:
        raise OptionError(
            "kafka.transactional.id", "cannot be set with exactlyOnce: the sink derives one per task"
        )
    if params.get("acks", "all").strip().lower() not in ("all", "-1"):
        raise OptionError("kafka.acks", "must be 'all' (or -1) with exactlyOnce")
    if params.get("enable.idempotence", "true").strip().lower() == "false":
        raise OptionError("kafka.enable.idempotence", "cannot be false with exactlyOnce")


def _kafka_params(opts: Mapping[str, str], forbidden: Mapping[str, str]) -> dict[str, str]:
    servers = opts.get(BOOTSTRAP, "").strip()
    if not servers:
        raise OptionError(BOOTSTRAP, "is required (a comma-separated list of host:port)")
    params: dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka.") :]
        if name in forbidden:
            raise OptionError(key, f"cannot be set: {forbidden[name]}")
        params[name] = value
    params["bootstrap.servers"] = servers
    return _librdkafka_security(params)


def _librdkafka_security(params: dict[str, str]) -> dict[str, str]:
    """Spark's Kafka source passes ``kafka.*`` to a Java client; ours is librdkafka, so the
    security options Java spells differently are translated (``kafka.ssl.truststore.location``
    (PEM) -> ``ssl.ca.location``, ``kafka.sasl.jaas.config`` -> ``sasl.username``/``password``,
    a PEM keystore -> ``ssl.certificate.location``/``ssl.key.location``)."""
    if not any(k.startswith(("ssl.", "sasl.")) for k in params):
        return params
    try:
        return librdkafka_properties(params)
    except ValueError as e:
        key = "ssl.truststore.location" if "truststore" in str(e) else "sasl.jaas.config"
        raise OptionError(f"kafka.{key}", str(e)) from None


def _reject_unknown(opts: Mapping[str, str], known: Mapping[str, str], what: str) -> None:
    for key in opts:
        if key.startswith("kafka.") or key in known:
            continue
        other = _SINK_OPTIONS if known is _SOURCE_OPTIONS else _SOURCE_OPTIONS
        if key in other:
            raise OptionError(other[key], f"is not an option for {what}")
        supported = ", ".join(sorted(known.values()))
        raise OptionError(key, f"unknown option for {what}; supported: kafka.*, {supported}")


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [name for name in ("subscribe", "subscribepattern", "assign") if name in opts]
    if len(given) != 1:
        names = " / ".join(_SOURCE_OPTIONS[n] for n in given) or "none"
        raise OptionError(
            "subscribe", f"set exactly one of subscribe, subscribePattern, assign (got {names})"
        )
    kind = given[0]
    value = opts[kind].strip()
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError("subscribe", "needs a comma-separated list of topics")
        return Subscribe(topics)
    if kind == "subscribepattern":
        if not value:
            raise OptionError("subscribePattern", "needs a regular expression")
        try:
            re.compile(value)
        except re.error as e:
            raise OptionError("subscribePattern", f"is not a valid regular expression: {e}") from e
        return SubscribePattern(value)
    return Assign(_parse_assign(value))


def _parse_assign(text: str) -> tuple[TopicPartition, ...]:
    example = 'expected JSON like {"topicA":[0,1],"topicB":[2,4]}'
    data = _json_object(text, "assign", example)
    partitions: list[TopicPartition] = []
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(_is_int(p) and p >= 0 for p in parts):
            raise OptionError("assign", f"topic {topic!r} needs a list of partitions; {example}")
        partitions.extend(TopicPartition(topic, p) for p in parts)
    if not partitions:
        raise OptionError("assign", f"assigns no partitions; {example}")
    return tuple(sorted(set(partitions)))


def _starting(opts: Mapping[str, str], streaming: bool | None) -> Position:
    given = [
        n
        for n in ("startingtimestamp", "startingoffsetsbytimestamp", "startingoffsets")
        if n in opts
    ]
    if len(given) > 1:
        names = ", ".join(_SOURCE_OPTIONS[n] for n in given)
        raise OptionError(_SOURCE_OPTIONS[given[0]], f"set only one of {names}")
    if not given:
        return Bound.LATEST if streaming else Bound.EARLIEST
    return _offset_spec(opts, given[0], starting=True, streaming=streaming)


def _ending(opts: Mapping[str, str], streaming: bool | None) -> Position:
    given = [
        n for n in ("endingtimestamp", "endingoffsetsbytimestamp", "endingoffsets") if n in opts
    ]
    if given and streaming is True:
        raise OptionError(_SOURCE_OPTIONS[given[0]], "is not valid in streaming queries")
    if len(given) > 1:
        names = ", ".join(_SOURCE_OPTIONS[n] for n in given)
        raise OptionError(_SOURCE_OPTIONS[given[0]], f"set only one of {names}")
    if not given:
        return Bound.LATEST
    return _offset_spec(opts, given[0], starting=False, streaming=streaming)


def _offset_spec(
    opts: Mapping[str, str], key: str, *, starting: bool, streaming: bool | None
) -> Position:
    name = _SOURCE_OPTIONS[key]
    text = opts[key].strip()
    if key.endswith("timestamp") and not key.endswith("bytimestamp"):
        timestamp = _integer(text)
        if timestamp is None:
            raise OptionError(name, f"must be a timestamp in milliseconds, got {text!r}")
        return GlobalTimestamp(timestamp, name)
    if key.endswith("bytimestamp"):
        example = 'expected JSON like {"topicA":{"0":1700000000000,"1":1700000000000}}'
        stamps = _partition_json(text, name, example)
        for tp, ts in stamps.items():
            if ts < 0:
                raise OptionError(name, f"timestamp of {tp} must be >= 0, got {ts}")
        return PartitionTimestamps(stamps, name)

    lowered = text.lower()
    if lowered == "earliest":
        if not starting:
            raise OptionError(name, "cannot be 'earliest'; use 'latest' or JSON offsets")
        return Bound.EARLIEST
    if lowered == "latest":
        if starting and streaming is False:
            raise OptionError(name, "cannot be 'latest' for batch queries")
        return Bound.LATEST
    example = 'expected "earliest", "latest" or JSON like {"topicA":{"0":23,"1":-2}}'
    offsets = _partition_json(text, name, example)
    for tp, offset in offsets.items():
        if offset < EARLIEST:
            raise OptionError(name, f"offset of {tp} must be >= -2, got {offset}")
        if offset == LATEST and starting and streaming is False:
            raise OptionError(name, f"offset of {tp} cannot be -1 (latest) for batch queries")
        if offset == EARLIEST and not starting:
            raise OptionError(name, f"offset of {tp} cannot be -2 (earliest)")
    return SpecificOffsets(offsets, name)


def _partition_json(text: str, option: str, example: str) -> dict[TopicPartition, int]:
    data = _json_object(text, option, example)
    result: dict[TopicPartition, int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict) or not parts:
            raise OptionError(option, f"topic {topic!r} needs an object of partitions; {example}")
        for part, value in parts.items():
            partition = _integer(part)
            if partition is None or not _is_int(value):
                raise OptionError(
                    option, f"bad entry {part!r}: {value!r} under topic {topic!r}; {example}"
                )
            result[TopicPartition(topic, partition)] = value
    return result


def _json_object(text: str, option: str, example: str) -> dict:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise OptionError(option, f"is not valid JSON ({e.msg}); {example}") from e
    if not isinstance(data, dict) or not data:
        raise OptionError(option, f"must be a non-empty JSON object; {example}")
    return data


def _check_offsets_against_assign(subscription: Subscription, spec: Position) -> None:
    if not isinstance(subscription, Assign):
        return
    if isinstance(spec, SpecificOffsets):
        named = set(spec.offsets)
    elif isinstance(spec, PartitionTimestamps):
        named = set(spec.timestamps)
    else:
        return
    if named != set(subscription.partitions):
        raise OptionError(
            spec.option,
            "must name exactly the assigned partitions "
            f"(assigned {_fmt(subscription.partitions)}, given {_fmt(named)})",
        )


def _fmt(partitions) -> str:
    return ", ".join(str(tp) for tp in sorted(partitions))


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    value = opts.get(name.lower())
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise OptionError(name, f"must be 'true' or 'false', got {value!r}")
    return lowered == "true"


def _positive_int(opts: Mapping[str, str], name: str) -> int | None:
    value = opts.get(name.lower())
    if value is None:
        return None
    number = _integer(value)
    if number is None or number <= 0:
        raise OptionError(name, f"must be a positive integer, got {value!r}")
    return number


def _non_negative_int(opts: Mapping[str, str], name: str, default: int) -> int:
    value = opts.get(name.lower())
    if value is None:
        return default
    number = _integer(value)
    if number is None:
        raise OptionError(name, f"must be a non-negative integer, got {value!r}")
    return number


def _integer(text: str) -> int | None:
    """Digits, with spaces around them, as an int; None for anything else.  ``int`` alone
    refused some of what the pattern takes (a control character ``\\s`` counts as a space,
    found by fuzz/spark_options.py; more digits than Python converts)."""
    if not re.fullmatch(r"\s*\d+\s*", text):
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
