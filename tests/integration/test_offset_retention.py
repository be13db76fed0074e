"""Offset retention (KIP-211) on a real broker with ``offsets.retention.minutes=1`` (the
smallest the key takes) and a check every second: the committed offsets of a group that emptied
expire a minute after it emptied and the group is removed; a group whose member is still there
keeps them; tombstones for the offsets and the group's metadata are in ``__consumer_offsets``
for the cleaner, and the group's offsets stay gone after the broker restarts (it reloads them
from that log).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from odradek.broker.group.hashing import partition_for_group
from odradek.broker.group.offsets_records import GroupMetadataKey, OffsetCommitKey, decode_key
from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from support import ClusterFactory, create_topic, run_odradek, wait_until

TOPIC = "retained"
OFFSETS_PARTITIONS = 2
RETENTION_S = 60
OVERRIDES = {"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "1000",
             "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS), "offsets.topic.replication.factor": "1",
             "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


@pytest.fixture
def cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("offset-retention"))
    try:
        yield factory(1, overrides=OVERRIDES)
    finally:
        factory.stop_all()


def consumer(cluster: LocalCluster, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, "session.timeout.ms": 6000,
                     "heartbeat.interval.ms": 500})


def read_and_commit(c: Consumer, records: int) -> None:
    c.subscribe([TOPIC])
    seen = []

    def read() -> bool:
        msg = c.poll(0.2)
        if msg is not None and msg.error() is None:
            seen.append(msg)
        return len(seen) >= records

    wait_until(read, timeout=60, interval=0, message=f"{records} records read")
    c.commit(asynchronous=False)


def committed(cluster: LocalCluster, group: str) -> int:
    """The group's committed offset of partition 0 (-1001: none), asked by a fresh client."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    try:
        (tp,) = c.committed([TopicPartition(TOPIC, 0)], timeout=10)
        return tp.offset
    finally:
        c.close()


def listed_groups(cluster: LocalCluster) -> set[str]:
    done = run_odradek("consumer-groups", "--bootstrap-server", cluster.bootstrap_servers, "--list")
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def tombstoned_keys(cluster: LocalCluster, group: str) -> list[object]:
    """The keys of the null-valued records of ``group``'s __consumer_offsets partition."""
    reader = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "tombstone-reader",
                       "enable.auto.commit": False})
    partition = partition_for_group(group, OFFSETS_PARTITIONS)
    _, end = reader.get_watermark_offsets(TopicPartition("__consumer_offsets", partition), timeout=10)
    reader.assign([TopicPartition("__consumer_offsets", partition, OFFSET_BEGINNING)])
    keys = []
    try:
        position = 0
        while position < end:
            msg = reader.poll(5)
            assert msg is not None, f"__consumer_offsets-{partition} read to {position} of {end}"
            assert msg.error() is None, msg.error()
            position = msg.offset() + 1
            if msg.value() is None:
                keys.append(decode_key(msg.key()))
    finally:
        reader.close()
    return keys


def test_offsets_of_an_empty_group_expire_and_the_group_goes(cluster: LocalCluster) -> None:
    create_topic(cluster, TOPIC, 1, 1)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as producer:
        for i in range(10):
            producer.produce(TOPIC, value=b"%d" % i)
        assert producer.flush(30) == 0
    live = consumer(cluster, "stays")
    read_and_commit(live, 10)
    leaving = consumer(cluster, "leaves")
    read_and_commit(leaving, 10)
    leaving.close()
    emptied = time.monotonic()
    assert committed(cluster, "leaves") == 10 and "leaves" in listed_groups(cluster)

    wait_until(lambda: committed(cluster, "leaves") < 0, timeout=RETENTION_S + 60, interval=1,
               message="the emptied group's offsets expired")
    expired_after = time.monotonic() - emptied
    print(f"offsets of the emptied group expired {expired_after:.1f} s after it emptied "
          f"(offsets.retention.minutes=1, checked every 1 s)")
    assert RETENTION_S - 1 <= expired_after <= RETENTION_S + 15
    wait_until(lambda: "leaves" not in listed_groups(cluster), timeout=10, message="the expired group removed")
    assert committed(cluster, "stays") == 10  # its member is still there (and subscribed)
    assert "stays" in listed_groups(cluster)
    keys = tombstoned_keys(cluster, "leaves")
    assert OffsetCommitKey("leaves", TOPIC, 0) in keys
    assert GroupMetadataKey("leaves") in keys
    live.close()

    (broker_id,) = cluster.brokers
    cluster.stop_broker(broker_id)
    cluster.start_broker(broker_id)
    wait_until(lambda: committed(cluster, "stays") == 10, timeout=60, message="the broker reloaded its groups")
    assert committed(cluster, "leaves") < 0
