"""aiokafka 0.14 against a 3-broker cluster: producers (default, idempotent, gzip) and a
consumer with assign() and seek().

The consumers here are simple consumers (``group_id=None``); aiokafka's group consumers are
covered by tests/integration/test_consumer_groups.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from odradek.local.cluster import LocalCluster
from support import (
    PartitionInfo,
    Rec,
    address_of,
    assert_acknowledged,
    assert_read_back,
    batch_headers,
    create_topic,
    end_offsets,
    make_records,
    wait_until,
)

PARTITIONS = 4
N = 300


async def produce(cluster: LocalCluster, topic: str, records: Sequence[Rec], **config: object) -> list[Rec]:
    producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, **config)
    await producer.start()
    try:
        futures = [await producer.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                                       timestamp_ms=r.timestamp) for r in records]
        metadata = await asyncio.wait_for(asyncio.gather(*futures), 60)
    finally:
        await producer.stop()
    acked = []
    for r, md in zip(records, metadata, strict=True):
        # timestamp_type 0: the broker answered log_append_time -1 (CreateTime).  md.timestamp
        # is not checked: aiokafka 0.14 gives every record of a batch the first record's
        # timestamp (MessageBatch.done overwrites its loop variable); the records read back
        # carry their own.
        assert md.topic == topic and md.timestamp_type == 0, (md, r)
        acked.append(Rec(md.partition, md.offset, r.key, r.value, r.headers, r.timestamp))
    return acked


async def consume(cluster: LocalCluster, topic: str, start: Mapping[int, int], end: Mapping[int, int]) -> list[Rec]:
    consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=None,
                                enable_auto_commit=False, auto_offset_reset="none")
    await consumer.start()
    out: list[Rec] = []
    try:
        tps = {p: TopicPartition(topic, p) for p in start}
        consumer.assign(list(tps.values()))
        for p, offset in start.items():
            consumer.seek(tps[p], offset)

        async def positions() -> dict[int, int]:
            return {p: await consumer.position(tp) for p, tp in tps.items()}

        async def read_all() -> None:
            while await positions() != dict(end):
                for tp, messages in (await consumer.getmany(timeout_ms=500)).items():
                    for m in messages:
                        assert m.topic == topic and m.partition == tp.partition and m.timestamp_type == 0
                        out.append(Rec(m.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp))

        await asyncio.wait_for(read_all(), 60)
    finally:
        await consumer.stop()
    return out


def round_trip(cluster: LocalCluster, topic: str, records: Sequence[Rec], **config: object
               ) -> tuple[dict[int, PartitionInfo], list[Rec]]:
    info = create_topic(cluster, topic, PARTITIONS, 3)
    acked = asyncio.run(produce(cluster, topic, records, **config))
    assert_acknowledged(records, acked, PARTITIONS)
    counts = {p: sum(1 for r in acked if r.partition == p) for p in info}
    assert sum(1 for c in counts.values() if c) >= 2, counts
    # The default acks=1 acknowledges before the followers have the records.
    ends = wait_until(lambda: (e := end_offsets(cluster.bootstrap_servers, topic, len(info)))
                      and all(e[p] >= counts[p] for p in e) and e,
                      message="high watermarks to cover every acknowledged record")
    assert ends == counts
    assert_read_back(acked, asyncio.run(consume(cluster, topic, dict.fromkeys(info, 0), counts)))
    middle = {p: c // 2 for p, c in counts.items() if c}
    assert_read_back([r for r in acked if r.partition in middle and r.offset >= middle[r.partition]],
                     asyncio.run(consume(cluster, topic, middle, {p: counts[p] for p in middle})))
    return info, acked


def test_default_producer(module_cluster: LocalCluster) -> None:
    round_trip(module_cluster, "aiokafka-default", make_records(N, seed=31))


def test_idempotent_gzip_producer(module_cluster: LocalCluster) -> None:
    topic = "aiokafka-idempotent"
    info, _ = round_trip(module_cluster, topic, make_records(N, seed=32), enable_idempotence=True,
                         compression_type="gzip", linger_ms=20)
    for p, meta in info.items():
        headers = batch_headers(address_of(module_cluster, meta.leader), topic, p)
        assert all(h.producer_id >= 0 and h.compression.name == "GZIP" for h in headers), headers
        assert any(h.records_count > 1 for h in headers), "linger.ms=20 built no multi-record batch"

