"""Driver-side offset lookups (no Spark): the process-wide client and the latest-offset cache."""

from __future__ import annotations

from odradek.spark.offset_reader import KafkaOffsetReader, admin_client
from odradek.spark.offsets import TopicPartition
from odradek.spark.options import parse_source_options
from support import produce, wait_until


def reader(bootstrap: str, **options: str) -> KafkaOffsetReader:
    return KafkaOffsetReader(
        parse_source_options({"kafka.bootstrap.servers": bootstrap, **options}, streaming=True)
    )


def test_one_admin_client_per_process_and_config(kafka_bootstrap):
    params = {"bootstrap.servers": kafka_bootstrap}
    assert admin_client(params) is admin_client(dict(params))
    assert admin_client(params) is admin_client({**params, "group.id": "ignored-by-admin"})
    assert admin_client(params) is not admin_client({**params, "client.id": "other"})


def test_latest_offsets_are_cached_briefly(kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("cache", partitions=1)
    offsets = reader(kafka_bootstrap, subscribe=topic)
    tp = TopicPartition(topic, 0)
    assert offsets.latest_now() == {tp: 0}

    produce(kafka_bootstrap, topic, [(0, None, b"x")] * 3)
    assert offsets.latest_now(max_age_s=60) == {tp: 0}  # still the cached answer
    assert offsets.latest_now(max_age_s=0) == {tp: 3}
    produce(kafka_bootstrap, topic, [(0, None, b"x")] * 2)
    wait_until(lambda: offsets.latest_now() == {tp: 5}, message="the cache to expire", timeout=10)


def test_pickled_reader_carries_no_client_or_cache(kafka_bootstrap, odradek_broker):
    import pickle

    topic = odradek_broker.new_topic("pickle", partitions=1)
    offsets = reader(kafka_bootstrap, subscribe=topic)
    offsets.latest_now()
    clone = pickle.loads(pickle.dumps(offsets))
    assert clone._latest is None
    assert clone.options == offsets.options


def test_partitions_of_each_subscription_kind(kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("kinds", partitions=3)
    assert reader(kafka_bootstrap, subscribe=topic).partitions() == [
        TopicPartition(topic, p) for p in range(3)
    ]
    assert reader(kafka_bootstrap, subscribe="no-such-topic-here").partitions() == []
    assert reader(kafka_bootstrap, subscribe=f"{topic},no-such-topic-here").partitions() == [
        TopicPartition(topic, p) for p in range(3)
    ]
    assert reader(kafka_bootstrap, subscribePattern=topic[:-2] + "..").partitions() == [
        TopicPartition(topic, p) for p in range(3)
    ]
    assert reader(kafka_bootstrap, assign=f'{{"{topic}":[1]}}').partitions() == [
        TopicPartition(topic, 1)
    ]
