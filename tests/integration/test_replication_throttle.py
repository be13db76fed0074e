"""Replication throttles with real processes: a partition with data reassigned to a new
replica with ``reassign-partitions --execute --throttle``; the bytes the new replica holds,
sampled on its disk, stay under the throttle rate, and ``--verify`` removes the throttles
once the move is done."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from odradek.local.cluster import LocalCluster
from support import ClusterFactory, controller_of, create_topic, run_odradek, wait_until

RATE = 100_000  # bytes/s
RECORDS, RECORD_BYTES = 1500, 1000
THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
             "leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def log_bytes(cluster: LocalCluster, broker: int, topic: str) -> int:
    directory = cluster.brokers[broker].config_path.parent / "data" / f"{topic}-0"
    try:
        return sum(entry.stat().st_size for entry in os.scandir(directory) if entry.name.endswith(".log"))
    except FileNotFoundError:
        return 0


def configs(cluster: LocalCluster, path: str) -> dict[str, str]:
    zk = cluster.zk_client()
    return json.loads(zk.get(path)[0])["config"] if zk.exists(path) else {}


def test_a_throttled_reassignment_stays_under_the_rate(cluster_factory: ClusterFactory, tmp_path: Path) -> None:
    cluster = cluster_factory(3)
    source, _ = controller_of(cluster)
    target = next(b for b in range(3) if b != source)
    create_topic(cluster, "heavy", assignment=[[source]])
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "batch.size": 16384,
                   "linger.ms": 5}) as producer:
        for i in range(RECORDS):
            producer.produce("heavy", value=os.urandom(RECORD_BYTES), key=str(i).encode(), partition=0)
        assert producer.flush(60) == 0
    total = log_bytes(cluster, source, "heavy")
    assert total > RECORDS * RECORD_BYTES
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "heavy", "partition": 0,
                                                              "replicas": [source, target]}]}))
    args = ("reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers, "--reassignment-json-file",
            str(plan))
    # Sampled from before the command starts (under load the command itself may take seconds).
    samples: list[tuple[float, int]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append((time.monotonic(), log_bytes(cluster, target, "heavy")))
            if samples[-1][1] >= total:
                return
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        executed = run_odradek(*args, "--execute", "--throttle", str(RATE))
        assert executed.returncode == 0, executed.stderr
        assert f"The inter-broker throttle limit was set to {RATE} B/s" in executed.stdout
        sampler.join(120)
    finally:
        done.set()
    assert samples[-1][1] >= total, "the new replica did not get the whole log in 120 s"
    t0, first = next((t, size) for t, size in samples if size > 0)
    t1 = samples[-1][0]
    average = (total - first) / (t1 - t0)
    # The fastest 3 s of the copy (the throttle lets one window's worth through at once).
    spans = [(b - a_size) / (tb - ta) for ta, a_size in samples for tb, b in samples if 3.0 <= tb - ta <= 3.5]
    fastest = max(spans, default=average)
    print(f"\nthrottle {RATE} B/s: {total} bytes copied in {t1 - t0:.1f} s ({first} in the first sample): "
          f"{average:.0f} B/s on average after it, {fastest:.0f} B/s in the fastest 3 s")
    assert average <= RATE * 1.1
    assert fastest <= RATE * 1.5
    assert t1 - t0 >= (total - first) / RATE * 0.8  # throttled indeed: unthrottled it takes well under a second
    on_source = configs(cluster, f"/config/brokers/{source}")
    assert on_source.get("leader.replication.throttled.rate") == str(RATE)

    def verified() -> bool:
        result = run_odradek(*args, "--verify")
        return "Reassignment of partition heavy-0 is complete." in result.stdout

    wait_until(verified, timeout=60, message="--verify finds the reassignment complete")
    for path in ("/config/topics/heavy", *(f"/config/brokers/{b}" for b in range(3))):
        assert not set(configs(cluster, path)) & set(THROTTLES), path
