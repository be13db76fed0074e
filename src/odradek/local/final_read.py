"""What a fault run (local/durability.py, local/nemesis.py) hands the checker once its faults
are over: every record of a topic read to its end, and each replica's log bytes."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from odradek.config import KafkaConfig, load_properties
from odradek.local.checker import divergent_replicas
from odradek.local.cluster import LocalCluster
from odradek.local.cluster_state import poll_until

__all__ = ["read_to_the_end", "replica_logs", "settled_replica_logs", "wait_stable"]


def read_to_the_end(config: Mapping[str, object], topic: str, partitions: int, *,
                    transactional: bool = False, timeout_s: float = 300.0,
                    ) -> tuple[dict[int, dict[int, bytes]], dict[int, int]]:
    """Every record of ``topic``'s partitions up to the end offsets found first, per partition
    and offset (values as bytes), and those end offsets. ``transactional``: a log may end with
    a marker, not a record, so a partition's EOF also ends it."""
    consumer = Consumer({**config, "enable.auto.commit": False, "log_level": 0,
                         "enable.partition.eof": transactional})
    final: dict[int, dict[int, bytes]] = {p: {} for p in range(partitions)}
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        remaining = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + timeout_s
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF and transactional:
                        remaining.discard(msg.partition())
                    continue
                final[msg.partition()][msg.offset()] = msg.value()
                if msg.offset() >= ends[msg.partition()] - 1:
                    remaining.discard(msg.partition())
        if remaining:
            raise TimeoutError(f"could not read partitions {sorted(remaining)} to their end")
    finally:
        consumer.close()
    return final, ends


def wait_stable(config: Mapping[str, object], topic: str, partitions: int, *, timeout_s: float = 120.0,
                log: Callable[[str], None] = print) -> dict[int, tuple[int, int]]:
    """Wait until each partition's last stable offset reaches its high watermark (its open
    transactions completed); (LSO, HW) per partition as last seen. A read_committed final read
    stops at the LSO, so a transactional run waits for this first."""
    ends = {isolation: Consumer({**config, "group.id": f"{topic}-lso", "isolation.level": isolation, "log_level": 0})
            for isolation in ("read_committed", "read_uncommitted")}
    offsets: dict[int, tuple[int, int]] = {}

    def stable() -> bool:
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            try:
                offsets[p] = (ends["read_committed"].get_watermark_offsets(tp, timeout=30)[1],
                              ends["read_uncommitted"].get_watermark_offsets(tp, timeout=30)[1])
            except KafkaException as e:  # e.g. a leader just moved: asked again
                log(f"{topic}-{p}: end offsets not known yet: {e}")
                offsets[p] = (-1, 0)
        return all(lso == hw for lso, hw in offsets.values())

    try:
        poll_until(stable, timeout_s, interval_s=0.5)
    finally:
        for consumer in ends.values():
            consumer.close()
    return offsets


def replica_logs(cluster: LocalCluster, topic: str, partitions: int) -> dict[int, dict[int, bytes]]:
    """Each partition's log bytes on each broker (its segment files in order), from whichever
    of the broker's log directories holds it. Every broker must hold every partition (the runs
    use as many replicas as brokers)."""
    logs: dict[int, dict[int, bytes]] = {p: {} for p in range(partitions)}
    for broker_id, broker in cluster.brokers.items():
        dirs = _log_dirs(broker.config_path)
        for p in range(partitions):
            found = [d / f"{topic}-{p}" for d in dirs if (d / f"{topic}-{p}").is_dir()]
            if len(found) != 1:
                raise RuntimeError(f"broker {broker_id} has {len(found)} directories of {topic}-{p} in "
                                   f"{', '.join(map(str, dirs))}: the replica check needs exactly one")
            directory = found[0]
            logs[p][broker_id] = b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))
    return logs


def settled_replica_logs(cluster: LocalCluster, topic: str, partitions: int, ends: Mapping[int, int],
                         timeout_s: float) -> dict[int, dict[int, bytes]]:
    """The replicas' logs once they agree below the high watermarks ``ends``, or as they are
    after ``timeout_s``: followers may still be writing what the leader counts as replicated."""
    logs: dict[int, dict[int, bytes]] = {}

    def agree() -> bool:
        nonlocal logs
        logs = replica_logs(cluster, topic, partitions)
        return not divergent_replicas(logs, ends)

    poll_until(agree, timeout_s)
    return logs


def _log_dirs(config_path: Path) -> list[Path]:
    """A broker's log directories, read from its config file as the broker reads them."""
    return [Path(d) for d in KafkaConfig.from_props(load_properties(config_path)).log_dirs]
