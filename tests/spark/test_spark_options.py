"""Option parsing and validation of the odradek data source (pure, no Spark, no broker)."""

from __future__ import annotations

import pytest

from odradek.spark.offsets import TopicPartition
from odradek.spark.options import (
    Assign,
    Bound,
    GlobalTimestamp,
    OptionError,
    PartitionTimestamps,
    SpecificOffsets,
    Subscribe,
    SubscribePattern,
    parse_sink_options,
    parse_source_options,
)

BOOTSTRAP = {"kafka.bootstrap.servers": "h1:9092,h2:9092"}


def source(streaming: bool | None = False, **options: str):
    return parse_source_options({**BOOTSTRAP, **options}, streaming=streaming)


def lowered(options: dict[str, str]) -> dict[str, str]:
    """What Spark hands a data source: its case-insensitive map lower-cases the keys."""
    return {k.lower(): v for k, v in options.items()}


def test_defaults_follow_spark_kafka_source():
    batch = source(subscribe="a")
    assert batch.subscription == Subscribe(("a",))
    assert batch.starting is Bound.EARLIEST and batch.ending is Bound.LATEST
    assert batch.fail_on_data_loss is True
    assert batch.include_headers is False
    assert batch.max_offsets_per_trigger is None
    assert dict(batch.kafka_params) == {"bootstrap.servers": "h1:9092,h2:9092"}
    assert source(True, subscribe="a").starting is Bound.LATEST


def test_options_arrive_lower_cased_and_are_still_understood():
    opts = parse_source_options(
        lowered(
            {
                **BOOTSTRAP,
                "subscribePattern": "Flights.*",
                "startingOffsets": "earliest",
                "failOnDataLoss": "FALSE",
                "includeHeaders": "true",
                "maxOffsetsPerTrigger": "500",
                "kafkaConsumer.pollTimeoutMs": "5000",
            }
        ),
        streaming=True,
    )
    assert opts.subscription == SubscribePattern("Flights.*")
    assert opts.fail_on_data_loss is False and opts.include_headers is True
    assert opts.max_offsets_per_trigger == 500
    assert opts.poll_timeout_ms == 5000


def test_kafka_params_pass_through_without_prefix():
    opts = source(subscribe="a", **{"kafka.security.protocol": "SSL", "kafka.fetch.min.bytes": "1"})
    assert opts.kafka_params["security.protocol"] == "SSL"
    assert opts.kafka_params["fetch.min.bytes"] == "1"


def test_subscribe_splits_and_trims_topics():
    assert source(subscribe=" a, b ,c,").subscription == Subscribe(("a", "b", "c"))


def test_assign_json():
    opts = source(assign='{"a":[1,0],"b":[2]}')
    assert opts.subscription == Assign(
        (TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 2))
    )


def test_pattern_must_match_whole_topic_name():
    pattern = SubscribePattern("fli.*s")
    assert pattern.matches("flights")
    assert not pattern.matches("flights2")
    assert not pattern.matches("xflights")


def test_specific_offsets_json_with_sentinels():
    opts = source(
        subscribe="t",
        startingOffsets='{"t":{"0":23,"1":-2}}',
        endingOffsets='{"t":{"0":50,"1":-1}}',
    )
    assert opts.starting == SpecificOffsets(
        {TopicPartition("t", 0): 23, TopicPartition("t", 1): -2}, "startingOffsets"
    )
    assert opts.ending == SpecificOffsets(
        {TopicPartition("t", 0): 50, TopicPartition("t", 1): -1}, "endingOffsets"
    )


def test_timestamp_options():
    by_partition = source(subscribe="t", startingOffsetsByTimestamp='{"t":{"0":1000}}')
    assert by_partition.starting == PartitionTimestamps(
        {TopicPartition("t", 0): 1000}, "startingOffsetsByTimestamp"
    )
    assert source(subscribe="t", startingTimestamp="1000").starting == GlobalTimestamp(
        1000, "startingTimestamp"
    )
    assert source(subscribe="t", endingTimestamp="2000").ending == GlobalTimestamp(
        2000, "endingTimestamp"
    )
    assert source(
        subscribe="t", startingOffsetsByTimestampStrategy="latest"
    ).timestamp_strategy_latest


def test_max_offsets_per_trigger_is_ignored_with_a_warning_in_batch():
    opts = source(subscribe="t", maxOffsetsPerTrigger="10")
    assert opts.max_offsets_per_trigger is None
    assert any("maxOffsetsPerTrigger" in w for w in opts.warnings)


@pytest.mark.parametrize(
    ("streaming", "options", "option", "fragment"),
    [
        (False, {}, "subscribe", "exactly one of"),
        (False, {"subscribe": "a", "assign": '{"a":[0]}'}, "subscribe", "exactly one of"),
        (False, {"subscribe": " , "}, "subscribe", "list of topics"),
        (False, {"subscribePattern": "(unclosed"}, "subscribePattern", "regular expression"),
        (False, {"assign": "[0,1]"}, "assign", "JSON object"),
        (False, {"assign": '{"a":[0,"x"]}'}, "assign", "list of partitions"),
        (False, {"assign": "{not json"}, "assign", "not valid JSON"),
        (False, {"subscribe": "a", "startingOffsets": "latest"}, "startingOffsets", "batch"),
        (False, {"subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, "startingOffsets", "-1"),
        (False, {"subscribe": "a", "startingOffsets": "oldest"}, "startingOffsets", "earliest"),
        (
            False,
            {"subscribe": "a", "startingOffsets": '{"a":{"0":-3}}'},
            "startingOffsets",
            ">= -2",
        ),
        (
            False,
            {"subscribe": "a", "startingOffsets": '{"a":{"x":1}}'},
            "startingOffsets",
            "bad entry",
        ),
        (
            False,
            {"subscribe": "a", "startingOffsets": '{"a":{"0":1.5}}'},
            "startingOffsets",
            "bad entry",
        ),
        (False, {"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets", "earliest"),
        (False, {"subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, "endingOffsets", "-2"),
        (True, {"subscribe": "a", "endingOffsets": "latest"}, "endingOffsets", "streaming"),
        (True, {"subscribe": "a", "endingTimestamp": "5"}, "endingTimestamp", "streaming"),
        (
            False,
            {"subscribe": "a", "startingOffsets": "earliest", "startingTimestamp": "5"},
            "startingTimestamp",
            "only one of",
        ),
        (
            False,
            {"subscribe": "a", "startingTimestamp": "yesterday"},
            "startingTimestamp",
            "milliseconds",
        ),
        (
            False,
            {"subscribe": "a", "startingOffsetsByTimestamp": '{"a":{"0":-5}}'},
            "startingOffsetsByTimestamp",
            ">= 0",
        ),
        (
            False,
            {"subscribe": "a", "startingOffsetsByTimestampStrategy": "closest"},
            "startingOffsetsByTimestampStrategy",
            "'error' or 'latest'",
        ),
        (
            False,
            {"subscribe": "a", "failOnDataLoss": "maybe"},
            "failOnDataLoss",
            "'true' or 'false'",
        ),
        (False, {"subscribe": "a", "includeHeaders": "1"}, "includeHeaders", "'true' or 'false'"),
        (True, {"subscribe": "a", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger", "positive"),
        (
            True,
            {"subscribe": "a", "maxOffsetsPerTrigger": "many"},
            "maxOffsetsPerTrigger",
            "positive",
        ),
        (False, {"subscribe": "a", "minPartitions": "-1"}, "minPartitions", "positive"),
        (
            False,
            {"subscribe": "a", "startingOffset": "earliest"},
            "startingoffset",
            "unknown option",
        ),
        (False, {"subscribe": "a", "topic": "b"}, "topic", "not an option for reading"),
        (
            False,
            {"subscribe": "a", "kafka.auto.offset.reset": "earliest"},
            "kafka.auto.offset.reset",
            "startingOffsets",
        ),
        (
            False,
            {"subscribe": "a", "kafka.enable.auto.commit": "true"},
            "kafka.enable.auto.commit",
            "never commits",
        ),
        (
            False,
            {"subscribe": "a", "kafka.isolation.level": "dirty"},
            "kafka.isolation.level",
            "read_committed",
        ),
        (
            False,
            {"assign": '{"a":[0,1]}', "startingOffsets": '{"a":{"0":5}}'},
            "startingOffsets",
            "assigned partitions",
        ),
    ],
)
def test_bad_source_options_name_the_option(streaming, options, option, fragment):
    with pytest.raises(OptionError) as caught:
        parse_source_options(lowered({**BOOTSTRAP, **options}), streaming=streaming)
    assert caught.value.option.lower() == option.lower()
    assert f"option '{caught.value.option}'" in str(caught.value)
    assert fragment in str(caught.value)


def test_numbers_that_int_refuses_are_option_errors():
    """A control character that ``\\s`` counts as a space escaped as a ValueError (found by
    fuzz/spark_options.py); so did more digits than Python converts."""
    assert source(True, subscribe="a", maxOffsetsPerTrigger="\x1f100").max_offsets_per_trigger == 100
    for options in ({"maxOffsetsPerTrigger": "1" * 5000}, {"startingTimestamp": "1" * 5000},
                    {"startingOffsets": '{"a":{"' + "1" * 5000 + '":5}}'}):
        with pytest.raises(OptionError):
            source(True, subscribe="a", **options)


def test_missing_bootstrap_servers():
    with pytest.raises(OptionError, match=r"kafka\.bootstrap\.servers.*required"):
        parse_source_options({"subscribe": "a"}, streaming=False)
    with pytest.raises(OptionError, match=r"kafka\.bootstrap\.servers.*required"):
        parse_sink_options({"topic": "a", "kafka.bootstrap.servers": " "})


def test_mode_free_parse_accepts_options_of_either_mode():
    """schema() runs before Spark says batch or stream: it must not reject either's options."""
    source(None, subscribe="a", startingOffsets="latest")
    source(None, subscribe="a", endingOffsets="latest")


def test_sink_options():
    sink = parse_sink_options(
        lowered({**BOOTSTRAP, "topic": "out", "kafka.linger.ms": "5", "includeHeaders": "true"})
    )
    assert sink.topic == "out"
    assert dict(sink.kafka_params) == {"bootstrap.servers": "h1:9092,h2:9092", "linger.ms": "5"}
    assert parse_sink_options(BOOTSTRAP).topic is None


@pytest.mark.parametrize(
    ("options", "option", "fragment"),
    [
        ({"subscribe": "a"}, "subscribe", "not an option for writing"),
        ({"topic": "  "}, "topic", "empty"),
        ({"kafka.value.serializer": "x"}, "kafka.value.serializer", "cannot be set"),
        ({"tpoic": "a"}, "tpoic", "unknown option for writing"),
    ],
)
def test_bad_sink_options_name_the_option(options, option, fragment):
    with pytest.raises(OptionError) as caught:
        parse_sink_options(lowered({**BOOTSTRAP, **options}))
    assert caught.value.option.lower() == option.lower()
    assert fragment in str(caught.value)


def test_option_error_survives_pickling():
    import pickle

    error = pickle.loads(pickle.dumps(OptionError("subscribe", "is wrong")))
    assert error.option == "subscribe"
    assert str(error) == "odradek data source: option 'subscribe': is wrong"


def test_security_options_pass_through_in_librdkafka_names() -> None:
    options = source(**{
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="admin" password="Se=cret";',
        "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": "/ca.pem",
        "subscribe": "t"})
    assert dict(options.kafka_params) == {
        "bootstrap.servers": "h1:9092,h2:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin", "sasl.password": "Se=cret", "ssl.ca.location": "/ca.pem"}
    sink = parse_sink_options({**BOOTSTRAP, "kafka.security.protocol": "SASL_PLAINTEXT",
                               "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.username": "u", "kafka.sasl.password": "p"})
    assert sink.kafka_params["sasl.username"] == "u"


@pytest.mark.parametrize(("options", "option"), [
    ({"kafka.sasl.jaas.config": "not a jaas config"}, "kafka.sasl.jaas.config"),
    ({"kafka.ssl.truststore.type": "JKS", "kafka.ssl.truststore.location": "/ts.jks"}, "kafka.ssl.truststore.location"),
])
def test_unusable_security_options_name_the_option(options: dict[str, str], option: str) -> None:
    with pytest.raises(OptionError) as info:
        source(subscribe="t", **options)
    assert info.value.option == option
