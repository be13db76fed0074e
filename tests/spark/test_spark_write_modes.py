"""Save modes of batch writes. Spark's Kafka sink (format "kafka") accepts Append and its
default ErrorIfExists, and refuses Overwrite and Ignore. Spark refuses ErrorIfExists and
Ignore for every Python data source itself, before any of the data source's code runs (not
even its constructor), so ``df.write.format("odradek")`` needs ``.mode("append")``; the
data source refuses Overwrite with its own message."""

from __future__ import annotations

import pytest

from support import end_offsets


def writer(spark, bootstrap, topic):
    df = spark.createDataFrame([("a",), ("b",)], "value string")
    return (
        df.write.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
    )


@pytest.mark.parametrize(
    ("mode", "spark_name"),
    [(None, "ErrorIfExists"), ("error", "ErrorIfExists"), ("ignore", "Ignore")],
)
def test_spark_refuses_modes_other_than_append_before_writing(
    spark, kafka_bootstrap, odradek_broker, mode, spark_name
):
    topic = odradek_broker.new_topic("savemode")
    write = writer(spark, kafka_bootstrap, topic)
    if mode is not None:
        write = write.mode(mode)
    with pytest.raises(Exception) as caught:
        write.save()
    assert str(caught.value).startswith(
        f'[UNSUPPORTED_DATA_SOURCE_SAVE_MODE] The data source "odradek" cannot be written '
        f'in the "{spark_name}" mode.'
    )
    assert end_offsets(kafka_bootstrap, topic, 1) == {0: 0}


def test_overwrite_is_refused_by_the_data_source_and_append_writes(spark, kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("savemode")
    with pytest.raises(Exception) as caught:
        writer(spark, kafka_bootstrap, topic).mode("overwrite").save()
    assert "option 'mode': Kafka topics can only be appended to; use mode 'append'" in str(
        caught.value
    )
    assert end_offsets(kafka_bootstrap, topic, 1) == {0: 0}

    writer(spark, kafka_bootstrap, topic).mode("append").save()
    assert end_offsets(kafka_bootstrap, topic, 1) == {0: 2}
