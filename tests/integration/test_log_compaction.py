"""Log compaction on real brokers with real clients: every replica cleans its own log to the
latest value per key at the original offsets, tombstones go after delete.retention.ms,
readers of all three Python clients see the gaps correctly, a SIGKILL during cleaning
leaves a whole log, and __consumer_offsets stays bounded."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kio.schema.offset_commit.v8 import request as commit_req
from kio.schema.offset_commit.v8 import response as commit_resp

from odradek.local.cluster import LocalCluster
from odradek.net.client import BrokerConnection
from odradek.protocol.errors import CorruptMessageError
from odradek.protocol.records import decode_batch, iter_batches
from support import create_topic, partition_state, unique_topic, wait_until

Rec = tuple[int, bytes | None, bytes | None]  # (offset, key, value)

CLEANER = {"log.cleaner.backoff.ms": "100"}
KEYS, VERSIONS = 1000, 20
T0 = 1_700_000_000_000


def data_dir(cluster: LocalCluster, broker: int, topic: str, partition: int = 0) -> Path:
    return cluster.brokers[broker].config_path.parent / "data" / f"{topic}-{partition}"


def disk_records(directory: Path) -> list[Rec] | None:
    """Every record in a partition directory's live segment files (None if the files changed
    under the reader: a swap or roll in progress). Mid-swap, the old segments are already
    ``.deleted`` while the ``.swap`` one has not yet taken the live name: a read then would see
    part of the log, so any ``.swap`` or ``.cleaned`` file, or a listing that changed during
    the read, means None."""
    def listing() -> list[str] | None:
        names = sorted(p.name for p in directory.iterdir())
        return None if any(n.endswith((".swap", ".cleaned")) for n in names) else [
            n for n in names if n.endswith(".log")]

    out: list[Rec] = []
    try:
        before = listing()
        if before is None:
            return None
        for name in before:
            data = (directory / name).read_bytes()
            for pos, header in iter_batches(data):
                _, records = decode_batch(data[pos:pos + header.size])
                out.extend((r.offset, r.key, r.value) for r in records)
        if listing() != before:
            return None
    except (FileNotFoundError, CorruptMessageError):
        return None
    return out


def log_size(directory: Path) -> int:
    """The live segments' total size; a segment the cleaner renames away meanwhile counts 0."""
    total = 0
    for path in directory.glob("*.log"):
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            pass
    return total


def latest_per_key(records: list[Rec], *, keep_tombstones: bool) -> list[Rec]:
    latest: dict[bytes | None, Rec] = {}
    for rec in records:
        latest[rec[1]] = rec
    return sorted(r for r in latest.values() if keep_tombstones or r[2] is not None)


def produce(cluster: LocalCluster, topic: str, records: list[tuple[bytes, bytes | None]],
            **conf: object) -> list[Rec]:
    """Produce keyed records in order (acks=all, timestamps T0 + i); returns what was acked."""
    acked: list[Rec] = []
    errors: list[object] = []

    def report(err, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.offset(), msg.key(), msg.value()))

    # batch.size stays below the small segment.bytes these tests use (a produce request must
    # fit a segment).
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5,
                   "enable.idempotence": True, "batch.size": 3000, **conf}) as p:
        for i, (key, value) in enumerate(records):
            p.produce(topic, key=key, value=value, partition=0, timestamp=T0 + i, on_delivery=report)
            p.poll(0)
        assert p.flush(60) == 0
    assert not errors, errors[:3]
    return sorted(acked)


def read_confluent(cluster: LocalCluster, topic: str, start: int = 0) -> list[Rec]:
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": unique_topic("g"),
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, start)])
    out: list[Rec] = []
    try:
        def at_end() -> bool:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    out.append((m.offset(), m.key(), m.value()))
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    return True
            return False
        wait_until(at_end, timeout=60, message=f"confluent-kafka reading {topic}")
    finally:
        c.close()
    return out


def read_kafka_python(cluster: LocalCluster, topic: str, end: int) -> list[Rec]:
    c = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False,
                      consumer_timeout_ms=10_000)
    tp = KpTopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    out: list[Rec] = []
    try:
        while c.position(tp) < end:
            batch = c.poll(timeout_ms=1000)
            out.extend((m.offset, m.key, m.value) for msgs in batch.values() for m in msgs)
    finally:
        c.close()
    return out


def read_aiokafka(cluster: LocalCluster, topic: str, end: int) -> list[Rec]:
    async def run() -> list[Rec]:
        c = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False)
        await c.start()
        tp = AioTopicPartition(topic, 0)
        out: list[Rec] = []
        try:
            c.assign([tp])
            await c.seek_to_beginning(tp)
            while await c.position(tp) < end:
                batch = await c.getmany(tp, timeout_ms=1000)
                out.extend((m.offset, m.key, m.value) for m in batch.get(tp, []))
        finally:
            await c.stop()
        return out

    return asyncio.run(asyncio.wait_for(run(), 60))


def test_every_replica_compacts_to_the_latest_value_per_key_and_tombstones_expire(cluster_factory) -> None:
    cluster = cluster_factory(3, overrides=CLEANER)
    topic = unique_topic("compacted")
    create_topic(cluster, topic, config={
        "cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "15000"})
    records = [(b"key-%04d" % k, b"value-%04d-%02d" % (k, v)) for v in range(VERSIONS) for k in range(KEYS)]
    records += [(b"key-%04d" % k, None) for k in range(0, KEYS, 10)]  # tombstones
    # Two large records close the segment holding the last tombstones: the active segment is
    # never cleaned, so everything before it is.
    records += [(b"~end-1", b"x" * 12_000), (b"~end-2", b"x" * 12_000)]
    acked = produce(cluster, topic, records)
    assert len(acked) == len(records)
    produced_bytes = sum(len(k) + len(v or b"") for k, v in records)
    with_tombstones = latest_per_key(acked, keep_tombstones=True)
    live = latest_per_key(acked, keep_tombstones=False)
    assert len(with_tombstones) == KEYS + 2 and len(live) == KEYS - KEYS // 10 + 2

    dirs = [data_dir(cluster, b, topic) for b in range(3)]
    for d in dirs:  # each replica cleans its own log
        wait_until(lambda d=d: disk_records(d) == with_tombstones, timeout=60,
                   message=f"{d} cleaned to the latest value per key, tombstones kept")
    assert all(log_size(d) < produced_bytes / 5 for d in dirs), [log_size(d) for d in dirs]
    end = acked[-1][0] + 1
    assert read_confluent(cluster, topic) == with_tombstones
    assert read_kafka_python(cluster, topic, end) == with_tombstones
    assert read_aiokafka(cluster, topic, end) == with_tombstones
    # A fetch from an offset that was cleaned away returns the next record.
    removed = acked[0][0]
    assert removed not in {o for o, _, _ in with_tombstones}
    assert read_confluent(cluster, topic, start=removed)[0] == with_tombstones[0]

    for d in dirs:  # once cleaned and delete.retention.ms old, tombstones go
        wait_until(lambda d=d: disk_records(d) == live, timeout=90,
                   message=f"{d} without its tombstones")
    assert read_confluent(cluster, topic) == live
    assert read_kafka_python(cluster, topic, end) == live
    assert read_aiokafka(cluster, topic, end) == live
    for b in range(3):
        cleaner_log = cluster.brokers[b].config_path.parent / "log-cleaner.log"
        assert f"cleaned log {topic}-0" in cleaner_log.read_text()


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_list_offsets_answers_across_the_gaps(cluster_factory, codec: str) -> None:
    """Also: compressed batches are cleaned into batches of the same codec."""
    cluster = cluster_factory(1, overrides=CLEANER)
    topic = unique_topic("gaps")
    create_topic(cluster, topic, replication_factor=1, config={
        "cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"})
    # Incompressible closing records: they fill a segment even when compressed.
    records = [(b"k%d" % (i % 50), b"v%d" % i) for i in range(2000)] + [(b"~end", os.urandom(3500))] * 2
    acked = produce(cluster, topic, records, **{"enable.idempotence": False, "compression.type": codec})
    expected = latest_per_key(acked[:-1], keep_tombstones=True) + acked[-1:]
    d = data_dir(cluster, 0, topic)
    wait_until(lambda: disk_records(d) == expected, timeout=60, message="cleaned")
    codecs = set()
    for path in d.glob("*.log"):
        data = path.read_bytes()
        for pos, h in iter_batches(data):
            _, recs = decode_batch(data[pos:pos + h.size])
            if any(r.key.startswith(b"k") for r in recs):  # (librdkafka sends what lz4 cannot shrink plain)
                codecs.add(h.compression.name.lower())
    assert codecs == {codec}
    assert read_confluent(cluster, topic) == expected
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": unique_topic("g")})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, acked[-1][0] + 1)
        # Record i carries timestamp T0 + i: asking for a removed record's time answers the next
        # surviving record's offset.
        for removed in (0, 1000, 1900):
            found = c.offsets_for_times([TopicPartition(topic, 0, T0 + removed)], timeout=10)[0].offset
            assert found == min(o for o, _, _ in expected if o >= removed)
    finally:
        c.close()


def test_keyless_records_are_refused_by_a_compacted_topic(cluster_factory) -> None:
    cluster = cluster_factory(1, overrides=CLEANER)
    topic = unique_topic("keyless")
    create_topic(cluster, topic, replication_factor=1, config={"cleanup.policy": "compact,delete"})
    errors: list[KafkaError] = []
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "retries": 0}) as p:
        p.produce(topic, value=b"no key", partition=0, on_delivery=lambda err, _m: errors.append(err))
        assert p.flush(30) == 0
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": unique_topic("g")})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 0)
    finally:
        c.close()


def restart_with(cluster: LocalCluster, broker: int, key: str, value: str) -> None:
    """Stop (if running) and start a broker with one setting changed in its server.properties."""
    if cluster.brokers[broker].alive:
        cluster.stop_broker(broker)
    path = cluster.brokers[broker].config_path
    lines = [line for line in path.read_text().splitlines() if not line.startswith(f"{key}=")]
    path.write_text("\n".join([*lines, f"{key}={value}"]) + "\n")
    cluster.start_broker(broker)


@pytest.mark.parametrize("kill_after_s", [0.0, 1.0, 2.0])
def test_sigkill_during_cleaning_leaves_the_old_or_the_new_log(cluster_factory, kill_after_s: float) -> None:
    cluster = cluster_factory(1, overrides={**CLEANER, "log.cleaner.enable": "false",
                                            "log.cleaner.io.max.bytes.per.second": "5000000"})
    topic = unique_topic("crash")
    create_topic(cluster, topic, replication_factor=1, config={
        "cleanup.policy": "compact", "segment.bytes": "262144", "min.cleanable.dirty.ratio": "0.01"})
    records = [(b"k%05d" % (i % 5000), b"v%07d" % i + b"." * 90) for i in range(60_000)]
    records += [(b"~end-1", b"x" * 200_000), (b"~end-2", b"x" * 200_000)]
    original = produce(cluster, topic, records, **{"enable.idempotence": False, "linger.ms": 20,
                                                    "batch.size": 100_000})
    d = data_dir(cluster, 0, topic)
    assert disk_records(d) == original
    active = max(int(path.stem) for path in d.glob("*.log"))
    cleaned = latest_per_key([r for r in original if r[0] < active], keep_tombstones=True) + [
        r for r in original if r[0] >= active]

    # One cleaning of the whole log, throttled to take over a second: kill the broker while
    # the cleaner writes, or swaps in, the cleaned segments.
    restart_with(cluster, 0, "log.cleaner.enable", "true")
    wait_until(lambda: any(n.endswith((".cleaned", ".swap")) for n in os.listdir(d)), timeout=60,
               interval=0.005, message="cleaning started")
    time.sleep(kill_after_s)  # a point in the cleaning, not a condition: any point must be safe
    cluster.kill_broker(0)
    restart_with(cluster, 0, "log.cleaner.enable", "false")
    after = disk_records(d)
    assert after in (original, cleaned), "the log after the crash is neither the old nor the cleaned one"
    for path in sorted(d.glob("*.log")):  # recovery passes: every batch on disk is whole
        data = path.read_bytes()
        assert sum(h.size for _, h in iter_batches(data)) == len(data)
    assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap"))]
    assert read_confluent(cluster, topic) == after
    restart_with(cluster, 0, "log.cleaner.enable", "true")
    wait_until(lambda: disk_records(d) == cleaned, timeout=60, message="cleaned after the restart")


def test_consumer_offsets_stay_bounded_and_load_after_a_restart(cluster_factory) -> None:
    cluster = cluster_factory(1, overrides={
        **CLEANER, "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "102400"})
    topic = unique_topic("committed")
    create_topic(cluster, topic, partitions=3, replication_factor=1)
    group = unique_topic("group")
    commits = 30_000  # 5.4 MB of commit records over 102,400-byte segments
    host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)

    async def commit_many() -> None:
        conn = BrokerConnection(host, int(port), "commit-test")
        await conn.connect(timeout_s=10)
        try:
            for start in range(0, commits, 500):
                requests = [commit_req.OffsetCommitRequest(
                    group_id=group, generation_id_or_member_epoch=-1, member_id="",
                    group_instance_id=None, topics=(commit_req.OffsetCommitRequestTopic(
                        name=topic, partitions=tuple(commit_req.OffsetCommitRequestPartition(
                            partition_index=p, committed_offset=i * 3 + p, committed_leader_epoch=-1,
                            committed_metadata="") for p in range(3))),))
                    for i in range(start, start + 500)]
                responses = await asyncio.gather(*(
                    conn.send(r, commit_resp.OffsetCommitResponse, timeout_s=60) for r in requests))
                assert all(pr.error_code == 0 for resp in responses for t in resp.topics
                           for pr in t.partitions)
        finally:
            await conn.close()

    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    try:  # the group coordinator (and __consumer_offsets) exist before the pipelined commits
        c.commit(offsets=[TopicPartition(topic, p, 0) for p in range(3)], asynchronous=False)
    finally:
        c.close()
    asyncio.run(commit_many())
    d = data_dir(cluster, 0, "__consumer_offsets")
    written = commits * 3 * 60  # each commit record is well over 60 bytes
    # Bounded: the active segment (up to 102,400 bytes) and a few cleaned records, whatever was written.
    wait_until(lambda: log_size(d) < written / 20, timeout=120,
               message="__consumer_offsets-0 cleaned to a bounded size")
    cluster.stop_broker(0)
    cluster.start_broker(0)
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    try:
        committed = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)
    finally:
        c.close()
    assert [tp.offset for tp in committed] == [(commits - 1) * 3 + p for p in range(3)]



def test_leader_epoch_truncation_on_a_compacted_partition(cluster_factory) -> None:
    """KIP-101 on cleaned logs: records only the old leader had are truncated when it
    returns as a follower, and every replica ends with the same latest value per key."""
    cluster = cluster_factory(3, overrides={**CLEANER, "replica.lag.time.max.ms": "30000",
                                            "zookeeper.session.timeout.ms": "8000",
                                            "replica.fetch.wait.max.ms": "100"})
    topic = unique_topic("compacted-diverge")
    leader, follower = 0, 1
    create_topic(cluster, topic, assignment=[[leader, follower]], config={
        "cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"})
    common = produce(cluster, topic, [(b"k%d" % (i % 30), b"common-%d" % i) for i in range(600)])
    dirs = {b: data_dir(cluster, b, topic) for b in (leader, follower)}
    for d in dirs.values():  # both replicas have cleaned some of it
        wait_until(lambda d=d: (recs := disk_records(d)) is not None and len(recs) < 400, timeout=60,
                   message=f"{d} cleaned")
    cluster.signal_broker(follower, signal.SIGSTOP)
    # A fetch the follower sent before it stopped may be parked at the leader for up to
    # replica.fetch.wait.max.ms; nothing outside the leader can observe it, so wait it out.
    time.sleep(1.0)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "1", "linger.ms": 0}) as p:
        for i in range(5):
            p.produce(topic, key=b"lost-%d" % i, value=b"lost", partition=0)
        assert p.flush(30) == 0
    cluster.kill_broker(leader)
    cluster.signal_broker(follower, signal.SIGCONT)
    wait_until(lambda: partition_state(cluster, topic, 0)["leader"] == follower, timeout=60,
               message="follower elected from the ISR")
    new = produce(cluster, topic, [(b"k%d" % (i % 30), b"new-%d" % i) for i in range(0, 300, 7)],
                  **{"enable.idempotence": False})
    cluster.start_broker(leader)
    expected = {k: v for _, k, v in latest_per_key(common + new, keep_tombstones=True)}

    def converged(d: Path) -> bool:
        recs = disk_records(d)
        if recs is None or any(k.startswith(b"lost") for _, k, _ in recs):
            return False
        return {k: v for _, k, v in latest_per_key(recs, keep_tombstones=True)} == expected

    for d in dirs.values():
        wait_until(lambda d=d: converged(d), timeout=90, message=f"{d} truncated and caught up")
    read = read_confluent(cluster, topic)
    assert [o for o, _, _ in read] == sorted({o for o, _, _ in read})
    assert {k: v for _, k, v in latest_per_key(read, keep_tombstones=True)} == expected


def test_an_idempotent_producers_emptied_last_batch_is_kept_and_readers_pass_it(cluster_factory) -> None:
    """Every record of an idempotent producer's last batch is superseded: the cleaner keeps
    the batch, empty, so the producer's state survives a reload, and all three clients read
    past it."""
    cluster = cluster_factory(1, overrides=CLEANER)
    topic = unique_topic("emptied")
    create_topic(cluster, topic, replication_factor=1, config={
        "cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"})
    first = produce(cluster, topic, [(b"k%d" % i, b"first") for i in range(10)],
                    **{"enable.idempotence": True, "linger.ms": 50})
    later = produce(cluster, topic, [(b"k%d" % i, b"later") for i in range(10)]
                    + [(b"~end-1", b"x" * 3500), (b"~end-2", b"x" * 3500)],
                    **{"enable.idempotence": False})
    expected = later
    d = data_dir(cluster, 0, topic)

    def emptied_batch_kept() -> bool:
        if disk_records(d) != expected:
            return False
        headers = [h for path in sorted(d.glob("*.log")) for _, h in iter_batches(path.read_bytes())]
        return any(h.records_count == 0 and h.producer_id >= 0 and h.last_offset == first[-1][0]
                   for h in headers)

    wait_until(emptied_batch_kept, timeout=60, message="cleaned, the idempotent producer's batch kept empty")
    end = expected[-1][0] + 1
    assert read_confluent(cluster, topic) == expected
    assert read_kafka_python(cluster, topic, end) == expected
    assert read_aiokafka(cluster, topic, end) == expected
    cluster.stop_broker(0)
    cluster.start_broker(0)
    assert read_confluent(cluster, topic) == expected


def test_the_cleaner_follows_dynamic_broker_configs(cluster_factory) -> None:
    """log.cleaner.enable and the cluster-wide log.cleaner.min.cleanable.ratio change through
    IncrementalAlterConfigs, without a restart, and the cleaner acts on them."""
    cluster = cluster_factory(1, overrides={**CLEANER, "log.cleaner.enable": "false",
                                            "log.cleaner.min.cleanable.ratio": "0.99"})
    topic = unique_topic("dynamic")
    create_topic(cluster, topic, replication_factor=1, config={
        "cleanup.policy": "compact", "segment.bytes": "4096"})
    records = [(b"k%d" % (i % 10), b"v%d" % i) for i in range(1000)] + [(b"~end", b"x" * 3500)] * 2
    acked = produce(cluster, topic, records, **{"enable.idempotence": False})
    expected = latest_per_key(acked[:-1], keep_tombstones=True) + acked[-1:]
    d = data_dir(cluster, 0, topic)
    with AdminClient({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        def set_broker(key: str, value: str) -> None:
            resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
                ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
            assert admin.incremental_alter_configs([resource])[resource].result(timeout=30) is None

        set_broker("log.cleaner.enable", "true")
        # The whole log is dirty (ratio 1.0): above 0.99, so it is cleaned once the cleaner runs.
        wait_until(lambda: disk_records(d) == expected, timeout=60, message="cleaned once enabled")
        more = produce(cluster, topic, [(b"k%d" % (i % 10), b"w%d" % i) for i in range(200)]
                       + [(b"~end", b"y" * 3500)] * 2, **{"enable.idempotence": False})
        # Little dirty data against the clean part now: below 0.99, left alone ...
        size = log_size(d)
        assert disk_records(d) == expected + more
        # ... until the threshold drops: the topic has no override, so it follows the broker.
        set_broker("log.cleaner.min.cleanable.ratio", "0.01")
        wait_until(lambda: log_size(d) < size, timeout=60, message="cleaned once the threshold dropped")
        latest = {k: v for _, k, v in latest_per_key(acked + more, keep_tombstones=True)}

        def on_disk() -> dict[bytes, bytes] | None:  # None while a swap is under way
            found = disk_records(d)
            return None if found is None else {k: v for _, k, v in latest_per_key(found, keep_tombstones=True)}

        # The first smaller size can be seen in the middle of the cleaner's swap of segments.
        assert wait_until(on_disk, timeout=30, message="the segments readable after the swap") == latest
