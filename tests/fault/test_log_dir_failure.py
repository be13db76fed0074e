"""A log directory failing for real under an acks=all producer (root only: a 2 MiB tmpfs).

Broker 0 keeps its first log directory on a small tmpfs and leads every partition of a topic
with three replicas; the directory-placement rule puts half of its partitions there.  While
an idempotent acks=all producer writes to every partition, the test fills the tmpfs: broker 0's
next append there fails with ENOSPC, the directory goes offline, the controller moves the
leadership of its partitions to the other replicas, and broker 0 keeps leading the partitions
in its healthy directory.  Every acknowledged record is then read back.  Restarted with the
directory still unusable (the tmpfs remounted read-only), broker 0 starts with it offline.
The figures (time to move leadership, records acknowledged and lost) are printed."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.local.zookeeper import EmbeddedZooKeeper
from support import (
    ClusterFactory,
    JbodCluster,
    create_topic,
    end_offsets,
    partition_state,
    run_kafka_tool,
    run_odradek,
    wait_until,
)

TOPIC = "failing-dir"
PARTITIONS = 4
FAILING_BROKER = 0


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, unmounted whatever happens (lazily if something still holds it)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the failing log directory is a tmpfs mounted for the test")
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = _run("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point))
    if mounted.returncode != 0:
        pytest.skip(f"needs root and mount(8): mount -t tmpfs failed: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        if _run("umount", str(mount_point)).returncode != 0:
            _run("umount", "-l", str(mount_point))


@pytest.fixture
def cluster(zookeeper: EmbeddedZooKeeper, tmp_path: Path, small_disk: Path) -> Iterator[JbodCluster]:
    """Three brokers with two log directories each; broker 0's first one is the small disk.
    (Stopped before the small disk is unmounted: fixtures are torn down in reverse.)"""

    class SmallDiskCluster(JbodCluster):
        def log_dirs(self, broker_id: int) -> list[Path]:
            dirs = super().log_dirs(broker_id)
            return [small_disk, dirs[1]] if broker_id == FAILING_BROKER else dirs

    factory = ClusterFactory(zookeeper, tmp_path / "clusters")
    try:
        yield factory(3, cluster_class=SmallDiskCluster,  # type: ignore[misc]
                      overrides={"min.insync.replicas": "2", "replica.lag.time.max.ms": "5000"})
    finally:
        factory.stop_all()


class Writer:
    """An idempotent acks=all producer writing to every partition until stopped; it records
    each acknowledged record as (partition, offset) -> value, and when it was acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 120_000})
        self.acked: dict[tuple[int, int], bytes] = {}
        self.acked_at: dict[tuple[int, int], float] = {}
        self.errors: list[str] = []
        self._lock = threading.Lock()  # the delivery callbacks run on the producer's thread
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _delivered(self, error: object, message: object) -> None:
        if error is not None:
            self.errors.append(str(error))
            return
        key = (message.partition(), message.offset())  # type: ignore[attr-defined]
        with self._lock:
            self.acked[key] = message.value()  # type: ignore[attr-defined]
            self.acked_at[key] = time.monotonic()

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            for p in range(PARTITIONS):
                self.producer.produce(TOPIC, value=b"p%d-%08d" % (p, n), partition=p, on_delivery=self._delivered)
            n += 1
            self.producer.poll(0.002)
        self.producer.flush(120)

    def start(self) -> Writer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)

    def acked_in(self, partitions: set[int], after: float = 0.0) -> int:
        with self._lock:
            return sum(1 for (p, _), at in self.acked_at.items() if p in partitions and at > after)


def fill(disk: Path) -> None:
    """Write a file until the disk is full."""
    with open(disk / "filler", "wb", buffering=0) as f:
        chunk = b"\0" * 65536
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass


def read_back(bootstrap: str) -> dict[tuple[int, int], bytes]:
    """Every record of the topic, up to each partition's high watermark."""
    ends = end_offsets(bootstrap, TOPIC, PARTITIONS)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "log-dir-failure-check",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    found: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and any(
                max((o for q, o in found if q == p), default=-1) + 1 < end for p, end in ends.items()):
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    found[(m.partition(), m.offset())] = m.value()
    finally:
        consumer.close()
    return found


def dirs_of(cluster: JbodCluster, broker: int) -> dict[str, dict]:
    """``odradek log-dirs --describe`` of one broker: each directory's JSON entry."""
    done = run_odradek("log-dirs", "--bootstrap-server", cluster.bootstrap_servers, "--describe",
                       "--broker-list", str(broker))
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads(done.stdout.splitlines()[2])["brokers"]
    return {d["logDir"]: d for d in entry["logDirs"]}


def leader(cluster: JbodCluster, partition: int) -> int | None:
    state = partition_state(cluster, TOPIC, partition)
    return None if state is None else state["leader"]


def test_a_full_disk_moves_leadership_off_its_partitions_and_loses_nothing(cluster: JbodCluster,
                                                                            small_disk: Path) -> None:
    create_topic(cluster, TOPIC, config={"min.insync.replicas": "2"},
                 assignment=[[0, 1, 2], [0, 2, 1], [0, 1, 2], [0, 2, 1]])
    placed = {d: {int(p["partition"].rsplit("-", 1)[1]) for p in e["partitions"] if p["partition"].startswith(TOPIC)}
              for d, e in dirs_of(cluster, FAILING_BROKER).items()}
    on_small, on_healthy = placed[str(small_disk)], placed[str(cluster.log_dirs(FAILING_BROKER)[1])]
    assert on_small and on_healthy and on_small | on_healthy == set(range(PARTITIONS))
    writer = Writer(cluster.bootstrap_servers).start()
    try:
        wait_until(lambda: writer.acked_in(set(range(PARTITIONS))) >= 2000, timeout=60, message="records acknowledged")
        fill(small_disk)
        failed_at = time.monotonic()
        wait_until(lambda: all(leader(cluster, p) not in (None, FAILING_BROKER) for p in on_small),
                   timeout=60, interval=0.01, message="leadership moved off the failed directory")
        moved_after = time.monotonic() - failed_at
        # Broker 0 still leads (and serves) the partitions of its healthy directory.
        wait_until(lambda: writer.acked_in(on_healthy, after=failed_at + moved_after) >= 500
                   and writer.acked_in(on_small, after=failed_at + moved_after) >= 500,
                   timeout=60, message="records acknowledged on every partition after the failure")
        assert all(leader(cluster, p) == FAILING_BROKER for p in on_healthy)
    finally:
        writer.stop()
    for p in on_small:
        assert FAILING_BROKER not in partition_state(cluster, TOPIC, p)["isr"]
    dirs = dirs_of(cluster, FAILING_BROKER)
    assert dirs[str(small_disk)]["error"] == "org.apache.kafka.common.errors.KafkaStorageException"
    assert dirs[str(small_disk)]["partitions"] == []
    assert {int(p["partition"].rsplit("-", 1)[1]) for p in dirs[str(cluster.log_dirs(FAILING_BROKER)[1])]["partitions"]
            if p["partition"].startswith(TOPIC)} == on_healthy
    describe = ("--bootstrap-server", cluster.bootstrap_servers, "--describe", "--broker-list", str(FAILING_BROKER))
    assert run_odradek("log-dirs", *describe).stdout == \
        run_kafka_tool("kafka-2.8", "kafka.admin.LogDirsCommand", *describe).stdout

    found = read_back(cluster.bootstrap_servers)
    lost = {k: v for k, v in writer.acked.items() if found.get(k) != v}
    print(f"\nlog dir failure: leadership of partitions {sorted(on_small)} moved off broker {FAILING_BROKER} "
          f"{moved_after:.3f} s after its directory filled up; {len(writer.acked)} records acknowledged "
          f"({writer.acked_in(set(range(PARTITIONS)), after=failed_at)} after the failure, "
          f"{writer.acked_in(on_healthy, after=failed_at)} of them by broker {FAILING_BROKER}'s healthy "
          f"directory), {len(lost)} lost; producer errors: {len(writer.errors)}")
    assert lost == {}
    assert writer.errors == []

    # Restarted with the directory still unusable, the broker starts with it offline.
    cluster.stop_broker(FAILING_BROKER)
    assert _run("mount", "-o", "remount,ro", str(small_disk)).returncode == 0
    cluster.start_broker(FAILING_BROKER)
    dirs = dirs_of(cluster, FAILING_BROKER)
    assert dirs[str(small_disk)]["error"] == "org.apache.kafka.common.errors.KafkaStorageException"
    assert dirs[str(cluster.log_dirs(FAILING_BROKER)[1])]["error"] is None
    wait_until(lambda: all(FAILING_BROKER in partition_state(cluster, TOPIC, p)["isr"] for p in on_healthy),
               timeout=60, message="the healthy directory's replicas back in their ISRs")
    assert all(FAILING_BROKER not in partition_state(cluster, TOPIC, p)["isr"] for p in on_small)
