"""Plain confluent-kafka producing, reading and record deletion; every client is closed
before the function returns."""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from support.topics import unique_topic

__all__ = ["consume_all", "delete_records", "produce"]

TIMEOUT_S = 30.0


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[int | None, bytes | None, bytes | None]],
    headers: list[tuple[str, bytes | None]] | None = None,
    timestamp: int | None = None,
    **config: str,
) -> list[tuple[int, int]]:
    """Produce (partition, key, value) records with acks=all; return each one's (partition, offset)."""
    reports: list[tuple[int, int] | KafkaError] = []

    def on_delivery(error, message) -> None:
        reports.append(error if error else (message.partition(), message.offset()))

    with Producer({"bootstrap.servers": bootstrap, "acks": "all", **config}) as producer:
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
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        futures = admin.delete_records([TopicPartition(topic, p, o) for p, o in before.items()])
        for future in futures.values():
            try:
                future.result(TIMEOUT_S)
            except KafkaException as e:
                raise AssertionError(
                    f"the broker refused DeleteRecords, which this test needs to remove old "
                    f"records as retention would: {e}"
                ) from e
