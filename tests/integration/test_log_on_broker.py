"""The log as a broker runs it: auto topic creation, segment rolls and retention, and
recovery of a torn tail after a SIGKILL — with real brokers and a real client."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from odradek.local.cluster import LocalCluster
from odradek.protocol.records import iter_batches
from support import create_topic, partition_state, run_odradek, wait_until


def produce(cluster: LocalCluster, topic: str, values: list[bytes], **conf: object) -> list[int]:
    offsets: list[int] = [-1] * len(values)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0, "acks": "all", **conf}) as p:
        for i, v in enumerate(values):
            def report(err, msg, i=i):
                assert err is None, err
                offsets[i] = msg.offset()
            p.produce(topic, value=v, partition=0, on_delivery=report)
            p.poll(0)
        assert p.flush(60) == 0
    return offsets


def read_from(cluster: LocalCluster, topic: str, offset: int, expect: int) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "log-test",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, offset)])
    out: list[tuple[int, bytes]] = []
    try:
        def done() -> bool:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    out.append((m.offset(), m.value()))
                elif m.error().code() == KafkaError._PARTITION_EOF and len(out) >= expect:
                    return True
            return len(out) >= expect
        wait_until(done, timeout=60, message=f"reading {topic}")
    finally:
        c.close()
    return out


def earliest_latest(cluster: LocalCluster, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "log-test"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def log_dir(cluster: LocalCluster, broker: int, topic: str) -> Path:
    return cluster.brokers[broker].config_path.parent / "data" / f"{topic}-0"


def test_metadata_auto_creates_topics_when_the_broker_allows_it(cluster_factory) -> None:
    cluster = cluster_factory(3, overrides={"auto.create.topics.enable": "true", "num.partitions": "4",
                                            "default.replication.factor": "2"})
    produce(cluster, "appeared", [b"hello"])  # librdkafka asks Metadata for it, then produces
    zk = cluster.zk_client()
    assert zk.exists("/brokers/topics/appeared")
    wait_until(lambda: all((s := partition_state(cluster, "appeared", p)) is not None and len(s["isr"]) == 2
                           for p in range(4)), message="auto-created topic online")
    out = run_odradek("topics", "--zookeeper", cluster.zookeeper_connect, "--describe", "--topic", "appeared").stdout
    assert out.splitlines()[0].startswith("Topic:appeared\tPartitionCount:4\tReplicationFactor:2")
    assert read_from(cluster, "appeared", 0, 1) == [(0, b"hello")]


def test_segments_roll_and_retention_deletes_whole_old_segments(cluster_factory) -> None:
    cluster = cluster_factory(1, overrides={"log.retention.check.interval.ms": "300"})
    create_topic(cluster, "rolling", 1, 1, {"segment.bytes": "4000", "retention.bytes": "12000"})
    values = [f"{i:05d}".encode() * 20 for i in range(300)]  # 100-byte values, one batch each
    offsets = produce(cluster, "rolling", values, **{"batch.num.messages": 1})
    assert offsets == list(range(300))
    # Segments rolled at segment.bytes; retention keeps about retention.bytes of them.  (A
    # retention pass may run while the records are still coming: wait for one after the last.)
    def kept_bytes() -> float:
        try:
            return sum(seg.stat().st_size for seg in log_dir(cluster, 0, "rolling").glob("*.log"))
        except FileNotFoundError:  # a segment being deleted right now
            return float("inf")

    wait_until(lambda: earliest_latest(cluster, "rolling")[0] > 0 and kept_bytes() <= 12000 + 4000,
               message="retention to bring the log down to retention.bytes")
    earliest, latest = earliest_latest(cluster, "rolling")
    assert latest == 300
    segments = sorted(log_dir(cluster, 0, "rolling").glob("*.log"))
    assert 2 <= len(segments) <= 5
    assert int(segments[0].stem) == earliest  # whole segments were deleted
    assert all(seg.stat().st_size <= 4000 for seg in segments)
    kept = sum(seg.stat().st_size for seg in segments)
    assert kept <= 12000 + 4000  # at most retention.bytes plus the active segment
    # What is left reads back exactly, from the new log start.
    assert read_from(cluster, "rolling", earliest, 300 - earliest) == [
        (o, values[o]) for o in range(earliest, 300)]
    index_files = sorted(log_dir(cluster, 0, "rolling").glob("*.index"))
    assert [p.stem for p in index_files] == [p.stem for p in segments]


def test_a_torn_tail_after_sigkill_is_truncated_and_the_rest_is_served(cluster_factory) -> None:
    cluster = cluster_factory(1)
    create_topic(cluster, "torn", 1, 1)
    values = [f"v{i}".encode() * 10 for i in range(50)]
    assert produce(cluster, "torn", values, acks=1) == list(range(50))
    cluster.kill_broker(0)  # no clean shutdown: recovery runs at the next start
    segment = sorted(log_dir(cluster, 0, "torn").glob("*.log"))[-1]
    data = segment.read_bytes()
    batches = list(iter_batches(data))
    last_pos, last = batches[-1]
    # A torn write: the last batch is cut in the middle, and garbage follows.
    segment.write_bytes(data[:last_pos + last.size // 2] + b"\xde\xad")
    cluster.start_broker(0)
    wait_until(lambda: (s := partition_state(cluster, "torn", 0)) is not None and s["leader"] == 0)
    _, latest = earliest_latest(cluster, "torn")
    assert latest == last.base_offset  # everything before the torn batch survives
    assert read_from(cluster, "torn", 0, latest) == [(o, values[o]) for o in range(latest)]
    # The log is whole again: appends continue right after the intact batches.
    assert produce(cluster, "torn", [b"after"]) == [latest]
    server_log = cluster.brokers[0].log_path.read_text()
    assert "unclean shutdown" in server_log
