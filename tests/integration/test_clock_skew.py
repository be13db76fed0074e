"""A broker whose wall clock is stepped (``ODRADEK_TEST_CLOCK``, broker/clock_skew.py: the
nemesis's clock faults) behaves as Kafka's, whose ``Time.milliseconds`` is the wall clock: it
stamps LogAppendTime records with the stepped clock, refuses CreateTime records too far from it
(``message.timestamp.difference.max.ms``), and a forward step expires an open transaction
(the coordinator aborts it). Every record acknowledged across the steps stays readable."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from support.clients import produce
from support.cluster import ClusterFactory
from support.topics import create_topic, unique_topic
from support.transactions import (
    TXN_OVERRIDES,
    HangingProducer,
    lso_and_hw,
    read_topic,
    values,
    wait_lso_reaches_hw,
)
from support.waiting import wait_until

HOUR_MS = 3_600_000


def step(clock: Path, offset_ms: int) -> None:
    clock.write_text(json.dumps({"offset_ms": offset_ms, "rate": 1.0}))


def read_timestamps(bootstrap: str, topic: str) -> list[tuple[bytes, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("clock"), "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[bytes, int]] = []
    try:
        deadline = time.monotonic() + 30
        end = lso_and_hw(bootstrap, topic, 0)[1]
        while len(out) < end and time.monotonic() < deadline:
            out += [(m.value(), m.timestamp()[1]) for m in consumer.consume(100, 0.5) if m.error() is None]
    finally:
        consumer.close()
    return out


def test_a_stepped_clock_stamps_refuses_and_expires_as_kafka_does(
        cluster_factory: ClusterFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = tmp_path / "clock.json"
    step(clock, -HOUR_MS)
    monkeypatch.setenv("ODRADEK_TEST_CLOCK", str(clock))
    cluster = cluster_factory(1, overrides={**TXN_OVERRIDES, "transaction.state.log.replication.factor": "1",
                                            "transaction.state.log.min.isr": "1"})
    bootstrap = cluster.bootstrap_servers
    stamped = unique_topic("appendtime")
    create_topic(cluster, stamped, replication_factor=1, config={"message.timestamp.type": "LogAppendTime"})

    # An hour back: the broker stamps its own (stepped) time.
    produce(bootstrap, stamped, [(0, None, b"an hour back")])
    now = time.time() * 1000
    [(_, back)] = read_timestamps(bootstrap, stamped)
    assert abs(back - (now - HOUR_MS)) < 60_000

    # Two hours forward, applied within 100 ms of the file's change.
    step(clock, 2 * HOUR_MS)

    def forward_stamp() -> bool:
        produce(bootstrap, stamped, [(0, None, b"forward")])
        return read_timestamps(bootstrap, stamped)[-1][1] > time.time() * 1000 + HOUR_MS

    wait_until(forward_stamp, timeout=10, interval=0.2, message="records stamped two hours ahead")
    records = read_timestamps(bootstrap, stamped)
    assert records[0] == (b"an hour back", back)  # the time index going back and forth loses nothing
    assert all(value == b"forward" for value, _ in records[1:])

    # CreateTime records more than 10 minutes from the broker's clock are refused.
    strict = unique_topic("strict")
    create_topic(cluster, strict, replication_factor=1, config={"message.timestamp.difference.max.ms": "600000"})
    errors: list[KafkaError] = []
    with Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0}) as producer:
        producer.produce(strict, b"real time", partition=0, on_delivery=lambda err, _: errors.append(err))
        producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.INVALID_TIMESTAMP]
    produce(bootstrap, strict, [(0, None, b"broker time")], timestamp=int(time.time() * 1000) + 2 * HOUR_MS)

    # A transaction opened at (stepped) time T with a 60 s timeout expires once the clock is
    # stepped another hour: the coordinator aborts it, the LSO moves on.
    held = unique_topic("held")
    create_topic(cluster, held, replication_factor=1)
    hanging = HangingProducer(bootstrap, held, count=2, transaction_timeout_ms=60_000)
    try:
        assert lso_and_hw(bootstrap, held, 0) == (0, 2)
        step(clock, 3 * HOUR_MS)
        assert wait_lso_reaches_hw(bootstrap, held, 0, timeout=30) == 3  # two records and the abort marker
    finally:
        hanging.kill()
    assert values(read_topic(bootstrap, held, 1, "read_committed")) == []
