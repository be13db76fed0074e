"""DescribeConfigs entries: values, sources and synonyms in Kafka's precedence."""

from __future__ import annotations

from odradek.broker.apis.configs_describe import (
    ConfigSource,
    broker_config_entries,
    default_broker_config_entries,
    topic_config_entries,
)
from odradek.config import TOPIC_CONFIG, KafkaConfig, config_string

BASE = {"zookeeper.connect": "zk:2181", "log.dirs": "/tmp/data"}


def entries(props: dict[str, str], overrides: dict[str, str], keys=None):
    return {e.name: e for e in topic_config_entries(KafkaConfig.from_props({**BASE, **props}), overrides, keys)}


def test_every_topic_config_is_reported_once() -> None:
    assert set(entries({}, {})) == set(TOPIC_CONFIG)


def test_a_topic_override_comes_first() -> None:
    e = entries({}, {"max.message.bytes": " 2000 "})["max.message.bytes"]
    assert e.value == "2000" and e.source is ConfigSource.DYNAMIC_TOPIC_CONFIG and not e.is_default
    assert e.synonyms == (("max.message.bytes", "2000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
                          ("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG))


def test_a_broker_setting_is_static_with_its_default_after_it() -> None:
    e = entries({"log.segment.bytes": "2000000"}, {})["segment.bytes"]
    assert e.value == "2000000" and e.source is ConfigSource.STATIC_BROKER_CONFIG
    assert e.synonyms == (("log.segment.bytes", "2000000", ConfigSource.STATIC_BROKER_CONFIG),
                          ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG))


def test_broker_synonyms_start_at_the_topic_configs_own_broker_key() -> None:
    """Kafka's configSynonyms drops the synonyms ahead of the first value of the topic
    config's own broker key (log.retention.ms for retention.ms): set in hours only, it
    reports the topic's retention as a default, with no synonyms (the differential oracle
    showed Kafka doing so)."""
    e = entries({"log.retention.minutes": "5", "log.retention.hours": "1"}, {})["retention.ms"]
    assert e.value == "300000"
    assert (e.source, e.synonyms) == (ConfigSource.DEFAULT_CONFIG, ())
    e = entries({"log.retention.ms": "7000", "log.retention.hours": "1"}, {})["retention.ms"]
    assert e.value == "7000" and e.source is ConfigSource.STATIC_BROKER_CONFIG
    assert [(name, source) for name, _, source in e.synonyms] == [
        ("log.retention.ms", ConfigSource.STATIC_BROKER_CONFIG), ("log.retention.hours", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG)]


def test_configs_without_a_broker_synonym_are_defaults() -> None:
    e = entries({}, {})["leader.replication.throttled.replicas"]
    assert e.source is ConfigSource.DEFAULT_CONFIG and e.synonyms == () and e.value == ""
    assert e.is_default and not e.read_only and e.config_type == 7  # LIST


def test_key_filter() -> None:
    assert set(entries({}, {}, ["segment.ms", "nope"])) == {"segment.ms"}
    assert len(entries({}, {}, [])) == len(TOPIC_CONFIG)  # empty means all, as Kafka


def test_broker_entries_have_their_source_and_only_dynamic_ones_are_writable() -> None:
    config = KafkaConfig.from_props({**BASE, "broker.id": "3", "num.partitions": "4"})
    by_name = {e.name: e for e in broker_config_entries(config)}
    assert by_name["num.partitions"].value == "4"
    assert by_name["num.partitions"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert by_name["delete.topic.enable"].value == "true"
    assert by_name["delete.topic.enable"].source is ConfigSource.DEFAULT_CONFIG
    assert by_name["broker.rack"].value is None
    assert by_name["num.partitions"].read_only and by_name["broker.id"].read_only
    assert not by_name["log.cleaner.threads"].read_only and not by_name["log.retention.ms"].read_only


DYNAMIC = KafkaConfig.from_props({**BASE, "broker.id": "0", "log.cleaner.threads": "1"},
                                 {"log.cleaner.threads": "2", "log.cleaner.min.cleanable.ratio": "0.7"},
                                 {"log.cleaner.threads": "3"})


def test_dynamic_broker_values_come_first_then_defaults_then_static() -> None:
    by_name = {e.name: e for e in broker_config_entries(DYNAMIC)}
    threads = by_name["log.cleaner.threads"]
    assert threads.value == "3" and threads.source is ConfigSource.DYNAMIC_BROKER_CONFIG
    assert threads.synonyms == (("log.cleaner.threads", "3", ConfigSource.DYNAMIC_BROKER_CONFIG),
                                ("log.cleaner.threads", "2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                                ("log.cleaner.threads", "1", ConfigSource.STATIC_BROKER_CONFIG),
                                ("log.cleaner.threads", "1", ConfigSource.DEFAULT_CONFIG))
    ratio = by_name["log.cleaner.min.cleanable.ratio"]
    assert ratio.value == "0.7" and ratio.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert by_name["log.cleaner.io.max.bytes.per.second"].value == "1.7976931348623157E308"


def test_topic_defaults_follow_the_dynamic_broker_config() -> None:
    e = {e.name: e for e in topic_config_entries(DYNAMIC, {})}["min.cleanable.dirty.ratio"]
    assert e.value == "0.7" and e.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert e.synonyms[0] == ("log.cleaner.min.cleanable.ratio", "0.7", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)


def test_the_default_resource_reports_only_the_dynamic_defaults() -> None:
    entries = default_broker_config_entries(DYNAMIC)
    assert [(e.name, e.value, e.source) for e in entries] == [
        ("log.cleaner.min.cleanable.ratio", "0.7", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.cleaner.threads", "2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    # This broker's own value is no synonym of the cluster-wide default.
    assert ConfigSource.DYNAMIC_BROKER_CONFIG not in {s for e in entries for _, _, s in e.synonyms}
    assert default_broker_config_entries(KafkaConfig.from_props(BASE)) == []


def test_config_string() -> None:
    assert config_string(True) == "true"
    assert config_string(["delete", "compact"]) == "delete,compact"
    assert config_string(None) is None
