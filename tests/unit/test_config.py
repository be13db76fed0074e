"""Broker and topic configuration: Kafka's keys, defaults, precedence rules and validation.

Defaults are Kafka 3.0's (``kafka.server.Defaults`` / ``LogConfig``, the source of the
published broker and topic config tables).  Precedence and validation cases follow Kafka's
KafkaConfigTest (testLogRetention*, testLogRoll*, testListener*, testFromPropsInvalid, ...).
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from odradek.config import (
    DYNAMIC_BROKER_CONFIGS,
    LONG_MAX,
    TOPIC_CONFIG,
    TOPIC_DOCS,
    CleanerConfig,
    ConfigError,
    KafkaConfig,
    Listener,
    LogConfig,
    java_double_string,
    load_properties,
    parse_properties,
    validate_dynamic_broker_config,
    validate_topic_config,
)

ZK = {"zookeeper.connect": "127.0.0.1:2181"}


def broker(**overrides: str) -> KafkaConfig:
    """A broker config from the one required key plus ``overrides`` (dots spelled as '__')."""
    props = dict(ZK)
    props.update({key.replace("__", "."): value for key, value in overrides.items()})
    return KafkaConfig.from_props(props)


def config_error(props: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as e:
        KafkaConfig.from_props({**ZK, **props})
    message = str(e.value)
    assert "\n" not in message, "errors are one line"
    return message


# ----------------------------------------------------------------------------- defaults

KAFKA_BROKER_DEFAULTS = {
    "broker.id": -1,
    "broker.id.generation.enable": True,
    "reserved.broker.max.id": 1000,
    "broker.rack": None,
    "zookeeper.session.timeout.ms": 18000,
    "zookeeper.connection.timeout.ms": None,
    "zookeeper.max.in.flight.requests": 10,
    "num.partitions": 1,
    "default.replication.factor": 1,
    "min.insync.replicas": 1,
    "unclean.leader.election.enable": False,
    "auto.create.topics.enable": False,  # odradek: false unless enabled
    "delete.topic.enable": True,
    "auto.leader.rebalance.enable": True,
    "leader.imbalance.per.broker.percentage": 10,
    "leader.imbalance.check.interval.seconds": 300,
    "controlled.shutdown.enable": True,
    "controlled.shutdown.max.retries": 3,
    "controlled.shutdown.retry.backoff.ms": 5000,
    "controller.socket.timeout.ms": 30000,
    "log.dir": ["/tmp/kafka-logs"],
    "log.dirs": None,
    "log.segment.bytes": 1073741824,
    "log.roll.hours": 168,
    "log.roll.jitter.hours": 0,
    "log.retention.hours": 168,
    "log.retention.minutes": None,
    "log.retention.ms": None,
    "log.retention.bytes": -1,
    "log.retention.check.interval.ms": 300000,
    "log.index.size.max.bytes": 10485760,
    "log.index.interval.bytes": 4096,
    "log.flush.interval.messages": LONG_MAX,
    "log.flush.interval.ms": None,
    "log.flush.scheduler.interval.ms": LONG_MAX,
    "log.flush.offset.checkpoint.interval.ms": 60000,
    "log.segment.delete.delay.ms": 60000,
    "log.cleanup.policy": ["delete"],
    "log.cleaner.enable": True,
    "log.cleaner.delete.retention.ms": 86400000,
    "log.cleaner.min.cleanable.ratio": 0.5,
    "log.cleaner.min.compaction.lag.ms": 0,
    "log.cleaner.max.compaction.lag.ms": LONG_MAX,
    "log.cleaner.threads": 1,
    "log.cleaner.dedupe.buffer.size": 134217728,
    "log.cleaner.io.buffer.size": 524288,
    "log.cleaner.io.buffer.load.factor": 0.9,
    "log.cleaner.io.max.bytes.per.second": 1.7976931348623157e308,
    "log.cleaner.backoff.ms": 15000,
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.difference.max.ms": LONG_MAX,
    "log.preallocate": False,
    "message.max.bytes": 1048588,
    "compression.type": "producer",
    "replica.lag.time.max.ms": 30000,
    "replica.fetch.max.bytes": 1048576,
    "replica.fetch.min.bytes": 1,
    "replica.fetch.wait.max.ms": 500,
    "replica.fetch.response.max.bytes": 10485760,
    "replica.fetch.backoff.ms": 1000,
    "replica.socket.timeout.ms": 30000,
    "replica.high.watermark.checkpoint.interval.ms": 5000,
    "num.replica.fetchers": 1,
    "socket.request.max.bytes": 104857600,
    "socket.send.buffer.bytes": 102400,
    "socket.receive.buffer.bytes": 102400,
    "connections.max.idle.ms": 600000,
    "request.timeout.ms": 30000,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 50,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "group.initial.rebalance.delay.ms": 3000,
    "security.inter.broker.protocol": "PLAINTEXT",
}


@pytest.mark.parametrize(("key", "expected"), sorted(KAFKA_BROKER_DEFAULTS.items()))
def test_broker_default_is_kafkas(key, expected):
    assert broker()[key] == expected


def test_default_listener_and_derived_values():
    config = broker()

    assert config.listeners == [Listener("PLAINTEXT", "", 9092)]
    assert config.advertised_listeners == config.listeners
    assert config.inter_broker_listener_name == "PLAINTEXT"
    assert config.log_dirs == ["/tmp/kafka-logs"]
    assert config.rack is None
    assert config.retention_ms == 7 * 24 * 3_600_000
    assert config.roll_ms == 7 * 24 * 3_600_000
    assert config.security_protocol_map == {
        "PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
        "SASL_SSL": "SASL_SSL"}
    assert config.warnings == []


KAFKA_TOPIC_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": str(LONG_MAX),
    "flush.ms": str(LONG_MAX),
    "follower.replication.throttled.replicas": "",
    "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "",
    "max.compaction.lag.ms": str(LONG_MAX),
    "max.message.bytes": "1048588",
    "message.downconversion.enable": "true",
    "message.format.version": "3.0-IV1",
    "message.timestamp.difference.max.ms": str(LONG_MAX),
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}


def test_topic_defaults_as_kafka_describes_them():
    assert broker().log_config().as_strings() == KAFKA_TOPIC_DEFAULTS


def test_log_config_dataclass_defaults_match_a_default_broker():
    assert broker().log_config() == LogConfig.build(broker().topic_defaults())
    built = broker().log_config()
    bare = LogConfig()
    for field in ("segment_bytes", "segment_ms", "retention_ms", "retention_bytes",
                  "max_message_bytes", "min_insync_replicas", "cleanup_policy",
                  "unclean_leader_election_enable", "file_delete_delay_ms", "flush_ms"):
        assert getattr(built, field) == getattr(bare, field), field


# ----------------------------------------------------------------------------- retention, roll

@pytest.mark.parametrize(("props", "expected_ms"), [
    ({}, 168 * 3_600_000),                                                  # NoConfigProvided
    ({"log.retention.hours": "1"}, 3_600_000),                              # HoursProvided
    ({"log.retention.minutes": "30"}, 1_800_000),                           # MinutesProvided
    ({"log.retention.ms": "1800000"}, 1_800_000),                           # MsProvided
    ({"log.retention.minutes": "30", "log.retention.hours": "1"}, 1_800_000),
    ({"log.retention.ms": "1800000", "log.retention.minutes": "10"}, 1_800_000),
    ({"log.retention.ms": "-1"}, -1),                                       # Unlimited
    ({"log.retention.minutes": "-1"}, -1),
    ({"log.retention.hours": "-1"}, -1),
    ({"log.retention.ms": "-1", "log.retention.minutes": "30"}, -1),
])
def test_log_retention_precedence(props, expected_ms):
    # KafkaConfigTest.testLogRetention*: ms beats minutes beats hours; negative is -1.
    config = KafkaConfig.from_props({**ZK, **props})

    assert config.retention_ms == expected_ms
    assert config.log_config().retention_ms == expected_ms


@pytest.mark.parametrize("key", ["log.retention.ms", "log.retention.minutes", "log.retention.hours"])
def test_log_retention_zero_is_invalid(key):
    # KafkaConfigTest.testLogRetentionValid
    message = config_error({key: "0"})

    assert f"Invalid value 0 for configuration {key}" in message


@pytest.mark.parametrize(("props", "expected_ms"), [
    ({}, 168 * 3_600_000),                                            # NoConfigProvided
    ({"log.roll.ms": "1800000"}, 1_800_000),                          # MsProvided
    ({"log.roll.ms": "1800000", "log.roll.hours": "1"}, 1_800_000),   # BothMsAndHoursProvided
    ({"log.roll.hours": "2"}, 7_200_000),
])
def test_log_roll_precedence(props, expected_ms):
    # KafkaConfigTest.testLogRollTime*
    config = KafkaConfig.from_props({**ZK, **props})

    assert config.roll_ms == expected_ms
    assert config.log_config().segment_ms == expected_ms


def test_log_roll_jitter_precedence():
    assert broker(log__roll__jitter__hours="1").log_config().segment_jitter_ms == 3_600_000
    assert broker(log__roll__jitter__hours="1",
                  log__roll__jitter__ms="500").log_config().segment_jitter_ms == 500


def test_flush_ms_defaults_to_the_scheduler_interval():
    assert broker().log_config().flush_ms == LONG_MAX
    assert broker(log__flush__scheduler__interval__ms="2000").log_config().flush_ms == 2000
    assert broker(log__flush__scheduler__interval__ms="2000",
                  log__flush__interval__ms="300").log_config().flush_ms == 300


# ----------------------------------------------------------------------------- listeners


@pytest.mark.parametrize(("value", "expected"), [
    ("PLAINTEXT://:9092", [Listener("PLAINTEXT", "", 9092)]),
    ("PLAINTEXT://127.0.0.1:0", [Listener("PLAINTEXT", "127.0.0.1", 0)]),
    ("PLAINTEXT://[::1]:9092", [Listener("PLAINTEXT", "::1", 9092)]),
    ("PLAINTEXT://[fe80::b1da:69ca:57f7:63d8%3]:9092",
     [Listener("PLAINTEXT", "fe80::b1da:69ca:57f7:63d8%3", 9092)]),
    ("PLAINTEXT://local_host:9092", [Listener("PLAINTEXT", "local_host", 9092)]),
    # KafkaConfigTest.testCaseInsensitiveListenerProtocol
    ("plaintext://localhost:9091,SsL://localhost:9092",
     [Listener("PLAINTEXT", "localhost", 9091), Listener("SSL", "localhost", 9092)]),
    (" PLAINTEXT://a:1 , SSL://b:2 ", [Listener("PLAINTEXT", "a", 1), Listener("SSL", "b", 2)]),
])
def test_listeners_parsing(value, expected):
    assert broker(listeners=value).listeners == expected


def test_listener_names_with_protocol_map_and_advertised_unset():
    # KafkaConfigTest.testListenerNamesWithAdvertisedListenerUnset
    config = broker(
        listeners="CLIENT://localhost:9091,REPLICATION://localhost:9092,INTERNAL://localhost:9093",
        listener__security__protocol__map="CLIENT:SSL,REPLICATION:SSL,INTERNAL:PLAINTEXT",
        inter__broker__listener__name="REPLICATION",
    )

    assert config.advertised_listeners == config.listeners
    assert [lst.name for lst in config.listeners] == ["CLIENT", "REPLICATION", "INTERNAL"]
    assert config.security_protocol_map == {
        "CLIENT": "SSL", "REPLICATION": "SSL", "INTERNAL": "PLAINTEXT"}
    assert config.inter_broker_listener_name == "REPLICATION"


def test_listener_and_advertised_listener_names():
    # KafkaConfigTest.testListenerAndAdvertisedListenerNames
    config = broker(
        listeners="EXTERNAL://localhost:9091,INTERNAL://localhost:9093",
        advertised__listeners="EXTERNAL://lb1.example.com:9000,INTERNAL://host1:9093",
        listener__security__protocol__map="EXTERNAL:SSL,INTERNAL:PLAINTEXT",
        inter__broker__listener__name="INTERNAL",
    )

    assert config.listeners == [Listener("EXTERNAL", "localhost", 9091),
                                Listener("INTERNAL", "localhost", 9093)]
    assert config.advertised_listeners == [Listener("EXTERNAL", "lb1.example.com", 9000),
                                           Listener("INTERNAL", "host1", 9093)]


def test_advertised_listeners_default_to_listeners():
    config = broker(listeners="PLAINTEXT://127.0.0.1:0")

    assert config.advertised_listeners == [Listener("PLAINTEXT", "127.0.0.1", 0)]


def test_advertised_listeners_may_share_a_port():
    # KafkaConfigTest.testDuplicateListeners: advertised listeners can have duplicate ports
    config = broker(
        listeners="HOST://localhost:9091,LB://localhost:9092",
        advertised__listeners="HOST://localhost:9091,LB://localhost:9091",
        listener__security__protocol__map="HOST:PLAINTEXT,LB:PLAINTEXT",
        inter__broker__listener__name="HOST",
    )

    assert [lst.port for lst in config.advertised_listeners] == [9091, 9091]


@pytest.mark.parametrize(("props", "fragment"), [
    ({"listeners": "localhost:9092"}, "Invalid value localhost:9092 for configuration listeners"),
    ({"listeners": "PLAINTEXT://host:99999"}, "port out of range"),
    ({"listeners": "PLAINTEXT://::1:9092"}, "expected NAME://host:port"),
    # KafkaConfigTest.testDuplicateListeners
    ({"listeners": "PLAINTEXT://localhost:9091,PLAINTEXT://localhost:9092"},
     "each listener must have a distinct name"),
    ({"listeners": "PLAINTEXT://localhost:9091,SSL://localhost:9091"},
     "each listener must have a different port"),
    # KafkaConfigTest.testBadListenerProtocol / testListenerNameMissingFromListenerSecurityProtocolMap
    ({"listeners": "BAD://localhost:9091"}, "no security protocol defined for listener BAD"),
    ({"listeners": "PLAINTEXT://localhost:9091,REPLICATION://localhost:9092"},
     "no security protocol defined for listener REPLICATION"),
    # KafkaConfigTest.testInvalidAdvertisedListenersProtocol
    ({"listeners": "PLAINTEXT://localhost:9091,SSL://localhost:9093",
      "advertised.listeners": "TRACE://localhost:9092"}, "listener TRACE is not in listeners"),
    ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "0.0.0.0"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "0.0.0.0"),
    # KafkaConfigTest.testInvalidInterBrokerSecurityProtocol: no PLAINTEXT listener to use
    ({"listeners": "SSL://localhost:0"}, "the inter-broker listener must be one of the advertised"),
    # KafkaConfigTest.testInterBrokerListenerNameMissingFromListenerSecurityProtocolMap
    ({"listeners": "PLAINTEXT://localhost:9091", "inter.broker.listener.name": "REPLICATION"},
     "Invalid value REPLICATION for configuration inter.broker.listener.name"),
    # KafkaConfigTest.testInterBrokerListenerNameAndSecurityProtocolSet
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
     "only one of it and security.inter.broker.protocol may be set"),
])
def test_listener_errors(props, fragment):
    assert fragment in config_error(props)


def test_listening_on_all_interfaces_while_advertising_a_host_is_fine():
    config = broker(listeners="PLAINTEXT://0.0.0.0:9092",
                    advertised__listeners="PLAINTEXT://broker1.example.com:9092")

    assert config.listeners[0].host == "0.0.0.0"
    assert config.advertised_listeners[0].host == "broker1.example.com"


# ----------------------------------------------------------------------------- unknown, invalid


def test_unknown_keys_warn_and_do_not_fail():
    config = broker(foo__bar="1", num__network__threads="3")

    assert config.warnings == ["The configuration 'foo.bar' was supplied but isn't a known config."]
    assert config.originals["foo.bar"] == "1"


# (key, bad value) pairs, many from KafkaConfigTest.testFromPropsInvalid
INVALID_VALUES = [
    ("broker.id", "not_a_number"),
    ("zookeeper.session.timeout.ms", "not_a_number"),
    ("zookeeper.max.in.flight.requests", "0"),
    ("num.partitions", "0"),
    ("num.partitions", "not_a_number"),
    ("num.partitions", "1_0"),
    ("num.partitions", "2147483648"),
    ("default.replication.factor", "1.5"),
    ("log.segment.bytes", "11"),
    ("log.roll.ms", "0"),
    ("log.roll.hours", "0"),
    ("log.retention.bytes", "not_a_number"),
    ("log.retention.check.interval.ms", "0"),
    ("log.cleanup.policy", "unknown_policy"),
    ("log.cleaner.min.cleanable.ratio", "1.5"),
    ("log.cleaner.enable", "not_a_boolean"),
    ("log.index.size.max.bytes", "3"),
    ("log.flush.interval.messages", "0"),
    ("auto.create.topics.enable", "0"),
    ("unclean.leader.election.enable", "invalid"),   # testUncleanElectionInvalid
    ("compression.type", "abc"),                     # testInvalidCompressionType
    ("log.message.timestamp.type", "Now"),
    ("min.insync.replicas", "0"),
    ("message.max.bytes", "-1"),
    ("leader.imbalance.per.broker.percentage", "101"),
]


@pytest.mark.parametrize(("key", "value"), INVALID_VALUES)
def test_invalid_value_is_one_line_naming_key_and_value(key, value):
    message = config_error({key: value})

    assert message.startswith(f"Invalid value {value} for configuration {key}: ")


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("num.partitions", " 12 ", 12),
    ("num.partitions", "+3", 3),
    ("log.retention.bytes", "9223372036854775807", LONG_MAX),
    ("unclean.leader.election.enable", "TRUE", True),
    ("log.cleaner.min.cleanable.ratio", "0.25", 0.25),
    ("log.cleanup.policy", "compact, delete", ["compact", "delete"]),
    ("compression.type", "zstd", "zstd"),
])
def test_valid_values_parse_to_their_types(key, value, expected):
    assert KafkaConfig.from_props({**ZK, key: value})[key] == expected


def test_zookeeper_connect_is_required():
    with pytest.raises(ConfigError, match=r'Missing required configuration "zookeeper\.connect"'):
        KafkaConfig.from_props({})


def test_broker_id_must_not_exceed_reserved_max_id():
    message = config_error({"broker.id": "1001"})

    assert "Invalid value 1001 for configuration broker.id" in message
    assert broker(broker__id="1001", reserved__broker__max__id="2000").broker_id == 1001
    assert broker(broker__id="5000", broker__id__generation__enable="false").broker_id == 5000


def test_broker_id_required_without_generation():
    assert "broker.id must be set" in config_error({"broker.id.generation.enable": "false"})


def test_log_dirs_wins_over_log_dir():
    assert broker(log__dirs="/a, /b", log__dir="/c").log_dirs == ["/a", "/b"]
    assert broker(log__dir="/c").log_dirs == ["/c"]


def test_min_insync_above_default_replication_factor_only_warns():
    config = broker(min__insync__replicas="2")

    assert config["min.insync.replicas"] == 2
    assert any("min.insync.replicas" in w for w in config.warnings)


def test_rack():
    assert broker(broker__rack="r1").rack == "r1"


# ----------------------------------------------------------------------------- properties files


def test_parse_properties_comments_separators_continuations():
    text = """\
# a comment
! another comment
   # indented comment

broker.id=1
listeners = PLAINTEXT://127.0.0.1:0
zookeeper.connect: localhost:2181/kafka
broker.rack r1
log.dirs=/data/a,\\
         /data/b,\\
         /data/c
url=http://host:80/a=b
empty=
flag
trailing = spaced   \t
"""
    assert parse_properties(text) == {
        "broker.id": "1",
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "zookeeper.connect": "localhost:2181/kafka",
        "broker.rack": "r1",
        "log.dirs": "/data/a,/data/b,/data/c",
        "url": "http://host:80/a=b",
        "empty": "",
        "flag": "",
        "trailing": "spaced",
    }


def test_parse_properties_comment_line_ending_in_backslash_does_not_continue():
    assert parse_properties("# note \\\nbroker.id=3\n") == {"broker.id": "3"}


def test_parse_properties_continuation_at_end_of_file():
    assert parse_properties("log.dirs=/a,\\\n /b\\") == {"log.dirs": "/a,/b"}


def test_parse_properties_last_value_wins_and_crlf():
    assert parse_properties("a=1\r\na=2\r\n") == {"a": "2"}


@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9._-]{0,30}", fullmatch=True),
                       st.from_regex(r"[A-Za-z0-9/:,.=_ -]{0,40}", fullmatch=True).map(str.strip)),
       st.sampled_from(["=", " = ", ": ", ":", " "]))
def test_parse_properties_round_trip(props, separator):
    # As in Java, after a whitespace separator a leading '=' or ':' is still a separator.
    assume(separator != " " or not any(v[:1] in ("=", ":") for v in props.values()))
    text = "".join(f"{key}{separator}{value}\n" for key, value in props.items())

    assert parse_properties(text) == props


def test_load_properties_feeds_kafka_config(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=2\nzookeeper.connect=localhost:2181\nlog.retention.hours=1\n")

    config = KafkaConfig.from_props(load_properties(path))

    assert config.broker_id == 2
    assert config.retention_ms == 3_600_000


def test_load_properties_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"cannot read config file .*nope\.properties"):
        load_properties(tmp_path / "nope.properties")


# ----------------------------------------------------------------------------- topic config


def test_validate_topic_config_returns_trimmed_strings():
    assert validate_topic_config({"retention.ms": " 1000 ", "cleanup.policy": "compact,delete",
                                  "min.insync.replicas": "2", "retention.bytes": "-5"}) == {
        "retention.ms": "1000", "cleanup.policy": "compact,delete",
        "min.insync.replicas": "2", "retention.bytes": "-5"}


def test_validate_topic_config_unknown_key():
    # LogConfig.validateNames
    with pytest.raises(ConfigError, match=r"^Unknown topic config name: retention\.hours$"):
        validate_topic_config({"retention.hours": "1"})


@pytest.mark.parametrize(("key", "value", "rule"), [
    ("retention.ms", "abc", "expected a value of type long"),
    ("segment.bytes", "1GB", "expected a value of type int"),
    ("unclean.leader.election.enable", "yes", "expected a value of type boolean"),
    ("min.cleanable.dirty.ratio", "half", "expected a value of type double"),
    ("segment.bytes", "13", "at least 14"),
    ("retention.ms", "-2", "at least -1"),
    ("min.insync.replicas", "0", "at least 1"),
    ("segment.ms", "0", "at least 1"),
    ("max.message.bytes", "-1", "at least 0"),
    ("min.cleanable.dirty.ratio", "1.01", "between 0 and 1"),
    ("cleanup.policy", "compact,shred", "String must be one of"),
    ("compression.type", "LZ4", "String must be one of"),   # Kafka's ValidString is case-sensitive
    ("message.timestamp.type", "createtime", "String must be one of"),
])
def test_validate_topic_config_bad_values(key, value, rule):
    with pytest.raises(ConfigError) as e:
        validate_topic_config({key: value})
    message = str(e.value)
    assert message.startswith(f"Invalid value {value} for configuration {key}: ")
    assert rule in message
    assert "\n" not in message


def test_every_topic_key_has_a_spec():
    assert set(KAFKA_TOPIC_DEFAULTS) == set(TOPIC_CONFIG)


# ----------------------------------------------------------------------------- LogConfig.build


def test_broker_retention_hours_become_topic_retention_ms_and_overrides_win():
    config = broker(log__retention__hours="1")

    assert config.log_config().retention_ms == 3_600_000
    assert config.log_config().as_strings()["retention.ms"] == "3600000"
    overridden = config.log_config({"retention.ms": "1000"})
    assert overridden.retention_ms == 1000
    assert overridden.overridden == frozenset({"retention.ms"})
    assert config.log_config().overridden == frozenset()


def test_broker_keys_supply_topic_defaults_through_their_synonyms():
    config = broker(
        log__cleanup__policy="compact", message__max__bytes="2000000", min__insync__replicas="2",
        unclean__leader__election__enable="true", log__segment__bytes="1048576",
        log__segment__delete__delay__ms="1000", compression__type="gzip",
        log__cleaner__delete__retention__ms="5", log__message__timestamp__type="LogAppendTime",
    )

    log = config.log_config()

    assert log.cleanup_policy == ("compact",)
    assert log.max_message_bytes == 2000000
    assert log.min_insync_replicas == 2
    assert log.unclean_leader_election_enable is True
    assert log.segment_bytes == 1048576
    assert log.file_delete_delay_ms == 1000
    assert log.compression_type == "gzip"
    assert log.message_timestamp_type == "LogAppendTime"
    assert log.value_of("delete.retention.ms") == 5
    assert log.delete_retention_ms == 5
    assert log.compact


def test_topic_overrides_are_parsed_and_typed():
    log = broker().log_config({"cleanup.policy": "compact,delete", "preallocate": "true",
                               "min.cleanable.dirty.ratio": "0.1", "segment.jitter.ms": "7"})

    assert log.cleanup_policy == ("compact", "delete")
    assert log.preallocate is True
    assert log.value_of("min.cleanable.dirty.ratio") == 0.1
    assert log.segment_jitter_ms == 7
    assert log.overridden == frozenset({"cleanup.policy", "preallocate",
                                        "min.cleanable.dirty.ratio", "segment.jitter.ms"})


def test_unknown_override_keys_are_ignored_by_build():
    log = broker().log_config({"retention.hours": "1"})

    assert log.retention_ms == 604800000
    assert log.overridden == frozenset()


def test_as_strings_formatting():
    strings = broker().log_config({"cleanup.policy": "compact,delete",
                                   "unclean.leader.election.enable": "TRUE",
                                   "min.cleanable.dirty.ratio": "1",
                                   "leader.replication.throttled.replicas": "0:1,1:2"}).as_strings()

    assert strings["cleanup.policy"] == "compact,delete"
    assert strings["unclean.leader.election.enable"] == "true"
    assert strings["min.cleanable.dirty.ratio"] == "1.0"
    assert strings["leader.replication.throttled.replicas"] == "0:1,1:2"
    assert list(strings) == sorted(strings)


# ----------------------------------------------------------------------------- log cleaner


def test_cleaner_keys_load_without_warnings_and_feed_the_cleaner_config():
    config = broker(log__cleaner__threads="2", log__cleaner__dedupe__buffer__size="48000",
                    log__cleaner__io__buffer__load__factor="0.5", log__cleaner__backoff__ms="100",
                    log__cleaner__io__buffer__size="1024", log__cleaner__enable="false",
                    log__cleaner__io__max__bytes__per__second="1000.5")

    assert config.warnings == []
    assert config.cleaner_config() == CleanerConfig(enable=False, threads=2, dedupe_buffer_size=48000,
                                                    io_buffer_load_factor=0.5, io_max_bytes_per_second=1000.5,
                                                    backoff_ms=100)


def test_max_map_entries_is_a_threads_share_of_the_buffer_at_24_bytes_per_entry():
    # 48000 bytes / 2 threads = 24000 bytes; * 0.5 load factor / 24 bytes per entry = 500.
    assert CleanerConfig(threads=2, dedupe_buffer_size=48000, io_buffer_load_factor=0.5).max_map_entries() == 500
    # Kafka's default: 128 MiB, one thread, 0.9 -> 5033164 keys.
    assert CleanerConfig().max_map_entries() == int(134217728 * 0.9 / 24)
    # threads=0 (cleaner disabled by thread count) still yields a usable size, not a division by zero.
    assert CleanerConfig(threads=0, dedupe_buffer_size=2400, io_buffer_load_factor=1.0).max_map_entries() == 100


@pytest.mark.parametrize(("key", "value"), [("log.cleaner.threads", "-1"), ("log.cleaner.backoff.ms", "-1"),
                                            ("log.cleaner.io.buffer.size", "-1"),
                                            ("log.cleaner.dedupe.buffer.size", "lots")])
def test_invalid_cleaner_values(key, value):
    with pytest.raises(ConfigError, match=f"Invalid value {value} for configuration {key}"):
        KafkaConfig.from_props({**ZK, key: value})


def test_double_configs_print_as_java_does():
    assert java_double_string(1.7976931348623157e308) == "1.7976931348623157E308"
    assert java_double_string(0.5) == "0.5"
    assert java_double_string(1e7) == "1.0E7"
    assert java_double_string(1.5e-7) == "1.5E-7"
    assert broker().log_config({"min.cleanable.dirty.ratio": "0.25"}).as_strings()["min.cleanable.dirty.ratio"] == "0.25"


def test_log_config_carries_the_compaction_settings():
    log = broker(log__cleaner__min__compaction__lag__ms="10").log_config(
        {"cleanup.policy": "compact,delete", "max.compaction.lag.ms": "100", "delete.retention.ms": "7",
         "min.cleanable.dirty.ratio": "0.2"})

    assert log.compact
    assert (log.min_compaction_lag_ms, log.max_compaction_lag_ms) == (10, 100)
    assert (log.delete_retention_ms, log.min_cleanable_dirty_ratio) == (7, 0.2)
    assert not broker().log_config().compact


def test_min_compaction_lag_above_max_is_refused_with_kafkas_message():
    with pytest.raises(ConfigError, match=r"conflict topic config setting min.compaction.lag.ms \(10\) > "
                                          r"max.compaction.lag.ms \(5\)"):
        validate_topic_config({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert validate_topic_config({"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "5"})


def test_rebased_log_config_keeps_overrides_and_takes_new_defaults():
    topic = broker().log_config({"retention.ms": "1000", "leader.replication.throttled.replicas": "0:1"})
    new_defaults = broker(log__retention__ms="5", log__cleaner__min__cleanable__ratio="0.9",
                          log__cleanup__policy="compact").log_config()

    rebased = topic.rebased(new_defaults)

    assert rebased.retention_ms == 1000
    assert rebased.min_cleanable_dirty_ratio == 0.9
    assert rebased.compact
    assert rebased.value_of("leader.replication.throttled.replicas") == ["0:1"]
    assert rebased.overridden == topic.overridden


# ----------------------------------------------------------------------------- dynamic broker configs


def test_dynamic_layers_override_static_per_broker_last():
    static = broker(log__cleaner__threads="1", log__retention__hours="1", log__segment__bytes="1000")

    config = static.with_dynamic({"log.cleaner.threads": "2", "log.retention.ms": "500"},
                                 {"log.cleaner.threads": "3"})

    assert config["log.cleaner.threads"] == 3
    assert config.log_config().retention_ms == 500
    assert config.log_config().segment_bytes == 1000
    assert config.originals == static.originals
    assert config.dynamic_default_configs == {"log.cleaner.threads": "2", "log.retention.ms": "500"}
    assert config.dynamic_broker_configs == {"log.cleaner.threads": "3"}
    assert static["log.cleaner.threads"] == 1


def test_dynamic_config_refuses_keys_that_need_a_restart_with_kafkas_message():
    with pytest.raises(ConfigError, match=r"^Cannot update these configs dynamically: Set\(broker.id, num.partitions\)$"):
        validate_dynamic_broker_config({"num.partitions": "3", "broker.id": "1", "log.cleaner.threads": "2"})


def test_dynamic_config_refuses_bad_values_and_combinations():
    with pytest.raises(ConfigError, match=r"Invalid value x for configuration log\.cleaner\.backoff\.ms"):
        validate_dynamic_broker_config({"log.cleaner.backoff.ms": "x"})
    with pytest.raises(ConfigError, match="log retention must be unlimited"):
        broker().with_dynamic({}, {"log.retention.ms": "0"})


def test_dynamic_set_is_kafkas_log_and_cleaner_keys():
    assert {"log.cleanup.policy", "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
            "log.cleaner.max.compaction.lag.ms", "log.cleaner.min.cleanable.ratio", "log.segment.bytes",
            "log.retention.ms", "log.retention.bytes", "log.segment.delete.delay.ms", "log.index.interval.bytes",
            "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
            "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
            "log.cleaner.backoff.ms", "log.cleaner.enable"} <= DYNAMIC_BROKER_CONFIGS
    assert not {"broker.id", "listeners", "log.dirs", "log.retention.hours", "log.message.format.version",
                "zookeeper.connect"} & DYNAMIC_BROKER_CONFIGS


@pytest.mark.parametrize(("current", "new", "fragment"), [
    (1, 0, "should be at least 1"),
    (4, 1, "reduced to less than half the current value 4"),
    (2, 5, "increased to more than double the current value 2"),
])
def test_cleaner_thread_changes_follow_kafkas_rule(current, new, fragment):
    with pytest.raises(ConfigError, match=fragment):
        CleanerConfig(threads=current).check_reconfiguration(CleanerConfig(threads=new))
    CleanerConfig(threads=current).check_reconfiguration(CleanerConfig(threads=current))


def test_every_topic_key_is_documented():
    assert set(TOPIC_DOCS) == set(TOPIC_CONFIG)
    assert all(TOPIC_CONFIG[name].doc == text and text.endswith((".", ")")) for name, text in TOPIC_DOCS.items())
