"""Bad options fail with one message that names the option, as early as Spark lets us:
at load() for rules of every mode, at the first action (batch) or start() (streaming) for
the rules of one mode, since Spark tells a data source which mode it is in only then."""

from __future__ import annotations

import pytest


def load(spark, **options):
    return spark.read.format("odradek").options(**options).load()


def single_message(caught: pytest.ExceptionInfo) -> str:
    lines = [line for line in str(caught.value).splitlines() if "OptionError" in line]
    assert lines, str(caught.value)
    return lines[-1]


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"subscribe": "t"}, "option 'kafka.bootstrap.servers': is required"),
        ({"kafka.bootstrap.servers": "{bs}"}, "option 'subscribe': set exactly one of"),
        (
            {"kafka.bootstrap.servers": "{bs}", "subscribe": "t", "subscribePattern": "t.*"},
            "(got subscribe / subscribePattern)",
        ),
        (
            {"kafka.bootstrap.servers": "{bs}", "subscribe": "t", "startingOffsets": "{bad"},
            "option 'startingOffsets': is not valid JSON",
        ),
        (
            {"kafka.bootstrap.servers": "{bs}", "subscribe": "t", "failOnDataLoss": "yes"},
            "option 'failOnDataLoss': must be 'true' or 'false'",
        ),
        (
            {
                "kafka.bootstrap.servers": "{bs}",
                "subscribe": "t",
                "kafka.group.id": "g",
                "kafka.auto.offset.reset": "latest",
            },
            "option 'kafka.auto.offset.reset': cannot be set",
        ),
        (
            {"kafka.bootstrap.servers": "{bs}", "subscribe": "t", "startingOffset": "earliest"},
            "option 'startingoffset': unknown option for reading",
        ),
    ],
)
def test_load_fails_on_bad_options(spark, kafka_bootstrap, options, fragment):
    options = {k: v.replace("{bs}", kafka_bootstrap) for k, v in options.items()}
    with pytest.raises(Exception) as caught:
        load(spark, **options)
    assert fragment in single_message(caught)


def test_batch_only_rules_fail_at_the_first_action(spark, kafka_bootstrap):
    df = load(
        spark,
        **{
            "kafka.bootstrap.servers": kafka_bootstrap,
            "subscribe": "t",
            "startingOffsets": "latest",
        },
    )
    with pytest.raises(Exception) as caught:
        df.count()
    assert "option 'startingOffsets': cannot be 'latest' for batch queries" in single_message(
        caught
    )


def test_stream_only_rules_fail_at_start(spark, kafka_bootstrap, tmp_path):
    df = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", "t")
        .option("endingOffsets", "latest")
        .load()
    )
    query = (
        df.writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        with pytest.raises(Exception) as caught:
            query.awaitTermination(120)
    finally:
        query.stop()
    assert "option 'endingOffsets': is not valid in streaming queries" in single_message(caught)


def test_offsets_json_must_name_every_subscribed_partition(spark, kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("named", partitions=2)
    df = load(
        spark,
        **{
            "kafka.bootstrap.servers": kafka_bootstrap,
            "subscribe": topic,
            "startingOffsets": f'{{"{topic}":{{"0":0}}}}',
        },
    )
    with pytest.raises(Exception) as caught:
        df.count()
    message = single_message(caught)
    assert "option 'startingOffsets': must name every partition" in message
    assert f"{topic}-1" in message


def test_user_schema_is_refused(spark, kafka_bootstrap):
    df = (
        spark.read.format("odradek")
        .schema("value string")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", "t")
        .load()
    )
    with pytest.raises(Exception) as caught:
        df.count()
    assert "fixed schema" in single_message(caught)


@pytest.mark.parametrize(
    ("ddl", "options", "mode", "fragment"),
    [
        ("value string", {}, "append", "option 'topic': set the 'topic' option or give"),
        ("key string", {"topic": "t"}, "append", "needs a 'value' column"),
        ("value int", {"topic": "t"}, "append", "column 'value' must be string or binary"),
        (
            "value string, partition string",
            {"topic": "t"},
            "append",
            "column 'partition' must be int",
        ),
        (
            "value string, headers string",
            {"topic": "t"},
            "append",
            "column 'headers' must be array",
        ),
        (
            "value string",
            {"topic": "t"},
            "overwrite",
            "option 'mode': Kafka topics can only be appended",
        ),
        (
            "value string",
            {"topic": "t", "subscribe": "t"},
            "append",
            "option 'subscribe': is not an option for writing",
        ),
    ],
)
def test_write_fails_on_bad_columns_or_options(spark, kafka_bootstrap, ddl, options, mode, fragment):
    df = spark.createDataFrame([], ddl)
    with pytest.raises(Exception) as caught:
        (
            df.write.format("odradek")
            .mode(mode)
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .options(**options)
            .save()
        )
    assert fragment in single_message(caught)
