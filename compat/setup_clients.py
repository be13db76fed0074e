"""Setting the scene for a suite's cases with confluent-kafka (librdkafka), fast and without a
JVM: topics created and awaited, records produced, a group's offsets committed.  What a suite
tests runs through its own programs; these only prepare."""

from __future__ import annotations

import time
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local.cluster import LocalCluster

__all__ = ["SetupClients"]

TIMEOUT_S = 30.0


class SetupClients:
    """librdkafka clients of ``cluster``'s administrator (plain or secured)."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.config = cluster.client_properties()

    def create_topic(self, topic: str, partitions: int = 1, replication_factor: int = 3,
                     config: Mapping[str, str] | None = None) -> None:
        """Create ``topic`` and wait until its every partition has a leader and a full ISR."""
        admin = AdminClient(self.config)
        admin.create_topics([NewTopic(topic, partitions, replication_factor, config=dict(config or {}))])[
            topic].result(TIMEOUT_S)
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            meta = admin.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
            if meta is not None and meta.error is None and len(meta.partitions) == partitions and all(
                    p.leader >= 0 and len(p.isrs) == replication_factor for p in meta.partitions.values()):
                return
            time.sleep(0.1)
        raise AssertionError(f"topic {topic} has no leaders and full ISRs after {TIMEOUT_S:.0f} s")

    def produce(self, topic: str, count: int, partition: int = 0, prefix: str = "v", **config: str) -> None:
        """``count`` records ``k<i>``/``<prefix><i>`` to one partition, acks=all."""
        failed: list[KafkaError] = []
        with Producer({**self.config, "acks": "all", **config}) as producer:
            for i in range(count):
                producer.produce(topic, key=f"k{i}", value=f"{prefix}{i}", partition=partition,
                                 on_delivery=lambda err, _msg: err and failed.append(err))
            assert producer.flush(TIMEOUT_S) == 0, "records left unsent"
        assert not failed, failed[:3]

    def transactional_producer(self, transactional_id: str) -> Producer:
        """An initialized transactional producer (the caller ends its transactions and closes it);
        its transactions may stay open for 15 minutes (tools run slowly on a loaded machine)."""
        producer = Producer({**self.config, "transactional.id": transactional_id, "transaction.timeout.ms": 900000})
        producer.init_transactions(TIMEOUT_S)
        return producer

    def commit_group(self, group: str, topic: str, partitions: int, expected: int) -> None:
        """Consume ``expected`` records of ``topic`` in ``group`` and commit its positions (past
        any transaction marker); the member then leaves."""
        consumer = Consumer({**self.config, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        try:
            consumer.subscribe([topic])
            got = 0
            deadline = time.monotonic() + TIMEOUT_S
            while got < expected and time.monotonic() < deadline:
                got += sum(1 for m in consumer.consume(100, 0.5) if m.error() is None)
            assert got == expected, f"{group} read {got} of {expected} records of {topic}"
            consumer.commit(asynchronous=False)
            committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], TIMEOUT_S)
            assert sum(max(tp.offset, 0) for tp in committed) >= expected, committed
        finally:
            consumer.close()
