"""Produce to a compacted topic with real clients: a record without a key is refused with
INVALID_RECORD (Kafka's LogValidator.validateKey), the rejected records are named in
ProduceResponse v8+ record_errors with Kafka's message, nothing of the request is appended,
and keyed records (and tombstones) are taken as before."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer
from kafka.errors import InvalidRecordError

from odradek.local.cluster import LocalCluster
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import CompressionType, SimpleRecord, build_batch
from support import address_of, create_topic, end_offsets, produce_records, unique_topic

TIMEOUT = 30


def compacted_topic(cluster: LocalCluster, prefix: str) -> tuple[str, int]:
    """A new compacted topic of one partition on three replicas, and its leader."""
    topic = unique_topic(prefix)
    info = create_topic(cluster, topic, 1, 3, {"cleanup.policy": "compact"})
    return topic, info[0].leader


def confluent_deliveries(cluster: LocalCluster, topic: str, records: list[tuple[bytes | None, bytes | None]],
                         **config: str) -> list[KafkaError | None]:
    """Produce (key, value) records in one batch; each one's delivery error (None: delivered)."""
    reports: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "retries": 0,
                         "linger.ms": 50, "message.timeout.ms": 20000, **config})
    for key, value in records:
        producer.produce(topic, value, key=key, on_delivery=lambda err, _msg: reports.append(err))
    assert producer.flush(TIMEOUT) == 0
    return reports


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_confluent_keyless_record_is_refused_and_nothing_appended(module_cluster: LocalCluster,
                                                                  compression: str) -> None:
    topic, _ = compacted_topic(module_cluster, f"compacted-{compression}")
    keyed = confluent_deliveries(module_cluster, topic, [(b"a", b"1"), (b"b", b"2"), (b"a", None)],
                                 **{"compression.type": compression})
    assert keyed == [None, None, None]  # a tombstone has a key: it is fine
    assert end_offsets(module_cluster.bootstrap_servers, topic, 1) == {0: 3}

    errors = confluent_deliveries(module_cluster, topic, [(b"c", b"3"), (None, b"no key"), (b"d", b"4")],
                                  **{"compression.type": compression})

    assert all(e is not None for e in errors), errors
    # The whole batch fails: librdkafka reports INVALID_RECORD for the records the broker named
    # and INVALID_RECORD or _INVALID_DIFFERENT_RECORD (KIP-467) for the others.
    assert errors[1].code() == KafkaError.INVALID_RECORD, errors
    assert {e.code() for e in errors} <= {KafkaError.INVALID_RECORD, KafkaError._INVALID_DIFFERENT_RECORD}
    assert end_offsets(module_cluster.bootstrap_servers, topic, 1) == {0: 3}
    assert confluent_deliveries(module_cluster, topic, [(b"e", b"5")]) == [None]
    assert end_offsets(module_cluster.bootstrap_servers, topic, 1) == {0: 4}


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.GZIP])
def test_produce_response_names_the_keyless_records(module_cluster: LocalCluster,
                                                    compression: CompressionType) -> None:
    topic, leader = compacted_topic(module_cluster, "compacted-wire")
    batch = build_batch([SimpleRecord(b"v0", None), SimpleRecord(b"v1", b"k"), SimpleRecord(b"v2", None)],
                        compression=compression)

    response = produce_records(address_of(module_cluster, leader), topic, 0, batch)

    message = f"Compacted topic cannot accept message without key in topic partition {topic}-0."
    assert response.error_code == ErrorCode.invalid_record
    assert response.error_message == "One or more records have been rejected"
    assert [(e.batch_index, e.batch_index_error_message) for e in response.record_errors] == [
        (0, message), (2, message)]
    assert end_offsets(module_cluster.bootstrap_servers, topic, 1) == {0: 0}
    keyed = build_batch([SimpleRecord(b"v", b"k")], compression=compression)
    assert produce_records(address_of(module_cluster, leader), topic, 0, keyed).error_code == ErrorCode.none


def test_kafka_python_keyless_record_is_refused(module_cluster: LocalCluster) -> None:
    topic, _ = compacted_topic(module_cluster, "compacted-kafka-python")
    producer = KafkaProducer(bootstrap_servers=module_cluster.bootstrap_servers, acks="all", retries=0)
    try:
        assert producer.send(topic, key=b"k", value=b"v").get(timeout=TIMEOUT).offset == 0
        with pytest.raises(InvalidRecordError):
            producer.send(topic, value=b"no key").get(timeout=TIMEOUT)
        assert producer.send(topic, key=b"k", value=b"v2").get(timeout=TIMEOUT).offset == 1
    finally:
        producer.close()
    assert end_offsets(module_cluster.bootstrap_servers, topic, 1) == {0: 2}
