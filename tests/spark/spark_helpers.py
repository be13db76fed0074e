"""Plain confluent-kafka helpers for the data source tests (topics, produce, offsets)."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

TIMEOUT_S = 30.0

# Tansu 0.6 answers ListOffsets(latest) with the base offset of a partition's last record
# batch + 1 rather than its log end offset, so a "latest" lookup falls short whenever the
# last batch holds several records. Writing one record per batch is valid against every
# broker and keeps Tansu honest; drop this when the fixture runs odradek.
ONE_RECORD_PER_BATCH = {"batch.num.messages": "1"}
WRITE_OPTIONS = {f"kafka.{k}": v for k, v in ONE_RECORD_PER_BATCH.items()}

_counter = itertools.count()


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{next(_counter)}-{uuid.uuid4().hex[:6]}"


def create_topic(bootstrap: str, prefix: str, partitions: int = 1) -> str:
    """Create a fresh topic and wait until every partition has a leader."""
    name = unique_topic(prefix)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(TIMEOUT_S)
    wait_for(
        lambda: _leaders_known(admin, name, partitions), f"leaders of {name}", timeout=TIMEOUT_S
    )
    return name


def _leaders_known(admin: AdminClient, topic: str, partitions: int) -> bool:
    metadata = admin.list_topics(topic=topic, timeout=TIMEOUT_S).topics.get(topic)
    return (
        metadata is not None
        and metadata.error is None
        and len(metadata.partitions) == partitions
        and all(p.leader >= 0 for p in metadata.partitions.values())
    )


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[int | None, bytes | None, bytes | None]],
    headers: list[tuple[str, bytes | None]] | None = None,
    **config: str,
) -> list[tuple[int, int]]:
    """Produce (partition, key, value) records; return each one's (partition, offset)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **config})
    reports: list[tuple[int, int] | KafkaError] = []

    def on_delivery(error, message) -> None:
        reports.append(error if error else (message.partition(), message.offset()))

    for partition, key, value in records:
        kwargs = {} if partition is None else {"partition": partition}
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


def wait_for(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
