"""What transactions cost a producer and a consumer (bench/transactions.py,
bench/vs_kafka.py): records sent by an idempotent producer or in transactions of a given
size (begin, produce, commit_transaction), and records read back with either isolation level."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from odradek.local.cluster import LocalCluster
from odradek.perf.common import PerfError, import_confluent_kafka
from odradek.perf.harness import read_partitions_to_end, wait_full_isr
from odradek.perf.sysstat import UsageWindow, cluster_groups

__all__ = ["PRODUCER", "consume", "produce"]

RECORD_SIZE = 100
# Batched, acks=all: what transactions are measured against is a producer already batching.
PRODUCER = {"acks": "all", "linger.ms": 5, "batch.size": 1_000_000, "batch.num.messages": 10_000,
            "compression.type": "none", "log_level": 0}


def produce(cluster: LocalCluster, topic: str, records: int, commit_every: int | None, *, partitions: int = 6,
            replication_factor: int = 3, groups: Mapping[str, Sequence[int]] | None = None) -> dict[str, Any]:
    """``records`` records to ``topic`` (round robin over ``partitions``): idempotent
    (``commit_every`` None) or in transactions of ``commit_every`` records; the CPU of
    ``groups`` (default: the cluster's brokers and ZooKeeper) over the phase."""
    ck = import_confluent_kafka()
    wait_full_isr(cluster, topic, partitions, replication_factor)
    failed = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    config: dict[str, object] = {"bootstrap.servers": cluster.bootstrap_servers, "on_delivery": on_delivery,
                                 **PRODUCER}
    if commit_every is None:
        config["enable.idempotence"] = True
    else:
        config["transactional.id"] = f"bench-{topic}"
    producer = ck.Producer(config)
    if commit_every is not None:
        producer.init_transactions(60)
    value = b"x" * RECORD_SIZE
    window = UsageWindow(groups if groups is not None else cluster_groups(cluster))
    start = time.perf_counter()
    sent = 0
    transactions = 0
    while sent < records:
        batch = min(commit_every or records, records - sent)
        if commit_every is not None:
            producer.begin_transaction()
        for i in range(batch):
            while True:
                try:
                    producer.produce(topic, value, partition=(sent + i) % partitions)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.poll(0)
        sent += batch
        if commit_every is not None:
            producer.commit_transaction(60)
            transactions += 1
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    usage = window.stop()
    if remaining or failed:
        raise PerfError(f"{topic}: {remaining} records unsent, {failed} failed")
    return {"records": records, "seconds": elapsed, "records_per_sec": records / elapsed,
            "transactions": transactions, "ms_per_transaction": elapsed * 1000 / transactions if transactions else 0.0,
            "brokers_cpu_s": usage.cpu_s["brokers"], "usage": usage.as_dict()}


def consume(cluster: LocalCluster, topic: str, isolation: str, partitions: int = 6) -> dict[str, float]:
    """Read every partition of ``topic`` from the start to its end (EOF) with ``isolation``
    (``read_committed``, ``read_uncommitted``)."""
    count, elapsed = read_partitions_to_end({"bootstrap.servers": cluster.bootstrap_servers,
                                             "group.id": f"bench-{isolation}-{topic}", "isolation.level": isolation},
                                            topic, partitions)
    return {"records": count, "seconds": elapsed, "records_per_sec": count / elapsed}
