"""Plain confluent-kafka helpers for the data source tests (topics, produce, offsets)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from spark_brokers import OdradekBroker, TansuBroker, unique_topic, wait_for

__all__ = [
    "alter_topic_config",
    "consume_all",
    "create_topic",
    "delete_records",
    "end_offsets",
    "produce",
    "register_broker",
    "unique_topic",
    "wait_for",
]

TIMEOUT_S = 30.0

# Each broker fixture registers itself here, so a test needs only its bootstrap string.
_brokers: dict[str, OdradekBroker | TansuBroker] = {}


def register_broker(broker: OdradekBroker | TansuBroker) -> None:
    _brokers[broker.bootstrap] = broker


def create_topic(
    bootstrap: str, prefix: str, partitions: int = 1, config: Mapping[str, str] | None = None
) -> str:
    """Create a fresh topic on the broker behind ``bootstrap``; return once it is usable."""
    name = unique_topic(prefix)
    _brokers[bootstrap].create_topic(name, partitions, config)
    return name


def alter_topic_config(bootstrap: str, topic: str, config: Mapping[str, str]) -> None:
    """Replace a topic's config overrides (odradek clusters only: through ZooKeeper)."""
    broker = _brokers[bootstrap]
    assert isinstance(broker, OdradekBroker), "topic configs are altered on odradek only"
    broker.alter_topic_config(topic, config)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[int | None, bytes | None, bytes | None]],
    headers: list[tuple[str, bytes | None]] | None = None,
    timestamp: int | None = None,
    **config: str,
) -> list[tuple[int, int]]:
    """Produce (partition, key, value) records; return each one's (partition, offset)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **config})
    reports: list[tuple[int, int] | KafkaError] = []

    def on_delivery(error, message) -> None:
        reports.append(error if error else (message.partition(), message.offset()))

    for partition, key, value in records:
        kwargs = {} if partition is None else {"partition": partition}
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        producer.produce(
            topic, value=value, key=key, headers=headers, on_delivery=on_delivery, **kwargs
        )
    assert producer.flush(TIMEOUT_S) == 0
    failed = [r for r in reports if isinstance(r, KafkaError)]
    assert not failed, failed
    return reports  # type: ignore[return-value]


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    )
    return {tp.partition: f.result().offset for tp, f in futures.items()}


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    """Every record of the topic, read with a plain consumer (expects ``expected`` records)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_topic("check"),
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    found: list = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(found) < expected and time.monotonic() < deadline:
            found.extend(m for m in consumer.consume(1000, 0.5) if m.error() is None)
    finally:
        consumer.close()
    return found


def delete_records(bootstrap: str, topic: str, before: dict[int, int]) -> None:
    """Remove every record below the given offsets (what retention does, on demand)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, p, o) for p, o in before.items()])
    for future in futures.values():
        try:
            future.result(TIMEOUT_S)
        except KafkaException as e:
            raise AssertionError(
                f"the broker refused DeleteRecords, which this test needs to remove old "
                f"records as retention would: {e}"
            ) from e
