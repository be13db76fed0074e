"""kafka-python 3.x against a 3-broker cluster: the producer with its default settings
(idempotence on, acks=all), consumers with assign() and seek().

The consumers here are simple consumers (``group_id=None``); kafka-python's group consumers
are covered by tests/integration/test_consumer_groups.py.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from odradek.local.cluster import LocalCluster
from support import (
    Rec,
    address_of,
    assert_acknowledged,
    assert_read_back,
    batch_headers,
    create_topic,
    end_offsets,
    make_records,
)

PARTITIONS = 4
N = 300
# kafka-python refuses None header values ("All headers items must be (str, bytes) tuples").


def produce(cluster: LocalCluster, topic: str, records: Sequence[Rec], **config: object) -> list[Rec]:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers.split(","), **config)
    try:
        if not config:  # the defaults this test is about
            assert producer.config["enable_idempotence"] is True
            assert producer.config["acks"] in (-1, "all")
        futures = [producer.send(topic, key=r.key, value=r.value, headers=list(r.headers), timestamp_ms=r.timestamp)
                   for r in records]
        producer.flush(60)
        acked = []
        for r, future in zip(records, futures, strict=True):
            md = future.get(timeout=60)
            assert md.topic == topic and md.timestamp == r.timestamp, (md, r)
            acked.append(Rec(md.partition, md.offset, r.key, r.value, r.headers, md.timestamp))
    finally:
        producer.close(10)
    return acked


def consume(cluster: LocalCluster, topic: str, start: Mapping[int, int], end: Mapping[int, int]) -> list[Rec]:
    """assign() + seek() to ``start``; poll until every partition's position is ``end``."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers.split(","), group_id=None,
                             enable_auto_commit=False, auto_offset_reset="none")
    out: list[Rec] = []
    try:
        tps = {p: TopicPartition(topic, p) for p in start}
        consumer.assign(list(tps.values()))
        for p, offset in start.items():
            consumer.seek(tps[p], offset)
        deadline = time.monotonic() + 60
        while any(consumer.position(tps[p]) != end[p] for p in start) and time.monotonic() < deadline:
            for tp, messages in consumer.poll(timeout_ms=500).items():
                for m in messages:
                    assert m.topic == topic and m.partition == tp.partition
                    assert m.timestamp_type == 0  # CreateTime
                    out.append(Rec(m.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp))
        positions = {p: consumer.position(tps[p]) for p in start}
        assert positions == dict(end), f"positions {positions}, expected {dict(end)}"
    finally:
        consumer.close()
    return out


def test_default_producer_and_assign_consumer(module_cluster: LocalCluster) -> None:
    topic = "kafka-python-defaults"
    info = create_topic(module_cluster, topic, PARTITIONS, 3)
    records = make_records(N, seed=21, with_null_header_values=False)
    acked = produce(module_cluster, topic, records)
    assert_acknowledged(records, acked, PARTITIONS)
    counts = {p: sum(1 for r in acked if r.partition == p) for p in info}
    assert sum(1 for c in counts.values() if c) >= 2, counts
    # acks=all: the high watermarks already cover them
    assert end_offsets(module_cluster.bootstrap_servers, topic, len(info)) == counts
    assert_read_back(acked, consume(module_cluster, topic, dict.fromkeys(info, 0), counts))

    # Idempotence is on: every batch carries one producer id and per-partition sequences
    # that continue from batch to batch.
    producer_ids = set()
    for p, meta in info.items():
        sequence = 0
        for h in batch_headers(address_of(module_cluster, meta.leader), topic, p):
            assert h.producer_id >= 0 and h.producer_epoch >= 0 and h.base_sequence == sequence, h
            producer_ids.add(h.producer_id)
            sequence = h.last_sequence + 1
        assert sequence == counts[p]
    assert len(producer_ids) == 1, producer_ids

    middle = {p: c // 2 for p, c in counts.items() if c}
    assert_read_back([r for r in acked if r.partition in middle and r.offset >= middle[r.partition]],
                     consume(module_cluster, topic, middle, {p: counts[p] for p in middle}))


def test_gzip_producer(module_cluster: LocalCluster) -> None:
    topic = "kafka-python-gzip"
    info = create_topic(module_cluster, topic, PARTITIONS, 3)
    records = make_records(120, seed=22, with_null_header_values=False)
    acked = produce(module_cluster, topic, records, compression_type="gzip", linger_ms=20)
    assert_acknowledged(records, acked, PARTITIONS)
    counts = {p: sum(1 for r in acked if r.partition == p) for p in info}
    assert end_offsets(module_cluster.bootstrap_servers, topic, len(info)) == counts
    assert_read_back(acked, consume(module_cluster, topic, dict.fromkeys(info, 0), counts))


def test_offset_lookups(module_cluster: LocalCluster) -> None:
    """beginning_offsets / end_offsets / offsets_for_times (ListOffsets) without a group."""
    topic = "kafka-python-offsets"
    info = create_topic(module_cluster, topic, 2, 3)
    acked = produce(module_cluster, topic, make_records(40, seed=23, with_null_header_values=False))
    consumer = KafkaConsumer(bootstrap_servers=module_cluster.bootstrap_servers.split(","), group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in info]
        counts = {p: sum(1 for r in acked if r.partition == p) for p in info}
        assert consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert consumer.end_offsets(tps) == {tp: counts[tp.partition] for tp in tps}
        for tp in tps:
            mine = [r for r in acked if r.partition == tp.partition]
            if not mine:
                continue
            probe = sorted(r.timestamp for r in mine)[len(mine) // 3]
            want = next(r for r in mine if r.timestamp >= probe)
            found = consumer.offsets_for_times({tp: probe})[tp]
            assert (found.offset, found.timestamp) == (want.offset, want.timestamp), (found, want)
            assert consumer.offsets_for_times({tp: max(r.timestamp for r in mine) + 1})[tp] is None
    finally:
        consumer.close()


def test_incremental_fetch_sessions(module_cluster: LocalCluster) -> None:
    """kafka-python 3 fetches with KIP-227 sessions: a full fetch, then incremental ones that
    list only what changed.  Partitions that were idle when the session began, and a
    partition that gets records only later, are still read exactly, in order."""
    topic = "kafka-python-sessions"
    info = create_topic(module_cluster, topic, PARTITIONS, 3)
    producer = KafkaProducer(bootstrap_servers=module_cluster.bootstrap_servers.split(","), acks="all")
    consumer = KafkaConsumer(bootstrap_servers=module_cluster.bootstrap_servers.split(","), group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100)
    sent: dict[int, list[bytes]] = {p: [] for p in info}
    got: dict[int, list[bytes]] = {p: [] for p in info}
    try:
        consumer.assign([TopicPartition(topic, p) for p in info])

        def poll_until(done: object) -> None:
            deadline = time.monotonic() + 60
            while not done() and time.monotonic() < deadline:  # type: ignore[operator]
                for tp, messages in consumer.poll(timeout_ms=200).items():
                    got[tp.partition].extend(m.value for m in messages)

        for round_ in range(6):
            # Only partition 0 is busy at first; the last partition joins in round 4.
            for p in [0, PARTITIONS - 1] if round_ >= 4 else [0]:
                for i in range(5):
                    value = f"{p}-{round_}-{i}".encode()
                    producer.send(topic, value=value, partition=p).get(timeout=30)
                    sent[p].append(value)
            poll_until(lambda: got == sent)
            assert got == sent, (round_, got, sent)
        # The busy partition's leader kept one session through every round.
        handler = consumer._fetcher._session_handlers[info[0].leader]  # the client's session state
        assert handler.next_metadata.session_id != 0 and handler.next_metadata.epoch > 1, handler.next_metadata
    finally:
        producer.close(10)
        consumer.close()
