"""The log cleaner at work, and what it costs the broker's other clients (bench/log_compaction.py,
bench/vs_kafka.py): a compacted topic filled with keyed records while its cleaning is held
back, a producer whose every delivery latency is kept, the dynamic topic config change that
lets the cleaner loose, and the cleaner's own summary line in ``log-cleaner.log``.

The summary is Kafka's (``LogCleaner.recordStats``), which odradek writes on one line and
Kafka on several; both say "<MB> MB of log processed in <s> seconds (<MB/s> MB/sec)", in
Kafka's MB of 2^20 bytes (``LogCleaner.mb``) and odradek's of 10^6 (``CLEANER_MB``)."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from odradek.local.cluster import LocalCluster
from odradek.perf.common import PerfError, percentile
from odradek.zk.admin_zk_client import AdminZkClient
from odradek.zk.client import KafkaZkClient

__all__ = ["CLEANER_MB", "VALUE_SIZE", "CleanerSummary", "cleaner_summary", "fill", "latencies", "latency_stats", "log_size",
           "set_topic_config", "wait_cleaned"]

VALUE_SIZE = 100
# Bytes in the MB of each broker's cleaner summary.
CLEANER_MB = {"odradek": 1_000_000, "kafka": 1 << 20}


def fill(bootstrap: str, topic: str, records: int, keys: int, seed: int) -> None:
    """``records`` records of ``VALUE_SIZE`` bytes to partition 0 of ``topic``, keys drawn
    uniformly from ``keys`` distinct ones by a generator seeded with ``seed`` (the same seeds
    give the same data)."""
    import confluent_kafka as ck

    rng = random.Random(seed)
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 50,
                     "batch.size": 1_000_000, "batch.num.messages": 10_000,
                     "compression.type": "none", "queue.buffering.max.messages": 500_000})
    value = b"v" * VALUE_SIZE
    keyset = [b"key-%07d" % k for k in range(keys)]
    produce, poll = p.produce, p.poll
    for i in range(records):
        while True:
            try:
                produce(topic, value=value, key=keyset[rng.randrange(keys)], partition=0)
                break
            except BufferError:
                poll(0.05)
        if i % 10_000 == 0:
            poll(0)
    if p.flush(300) != 0:
        raise PerfError("fill: records left unsent")


def latencies(bootstrap: str, topic: str, rate: float, duration_s: float, stop: mp.Event,  # type: ignore[valid-type]
              out: mp.Queue) -> None:  # type: ignore[type-arg]
    """Send ``rate`` records/s (acks=1, linger.ms=0) to ``topic`` for ``duration_s`` or until
    ``stop``; put ``{"samples": [(send ns, latency ms)], "failed", "sent"}`` on ``out``."""
    import confluent_kafka as ck

    samples: list[tuple[int, float]] = []
    failed = 0

    def delivered(err: object, _msg: object, sent: int) -> None:
        nonlocal failed
        if err is not None:
            failed += 1
        else:
            samples.append((sent, (time.monotonic_ns() - sent) / 1e6))

    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    value = b"x" * VALUE_SIZE
    interval = 1.0 / rate
    start = time.perf_counter()
    i = 0
    while (now := time.perf_counter()) - start < duration_s and not stop.is_set():  # type: ignore[attr-defined]
        ahead = start + i * interval - now
        if ahead > 0:
            # poll() takes whole milliseconds: under one it returns at once and the loop would
            # spin a core the broker needs (as perf/latency.py's pacing explains).
            if ahead >= 0.002:
                p.poll(ahead - 0.001)
            else:
                time.sleep(ahead)
            continue
        sent = time.monotonic_ns()
        p.produce(topic, value=value, key=b"k", on_delivery=lambda e, m, s=sent: delivered(e, m, s))
        p.poll(0)
        i += 1
    p.flush(60)
    out.put({"samples": samples, "failed": failed, "sent": i})


def latency_stats(samples: Sequence[tuple[int, float]]) -> dict[str, float]:
    """Count, p50, p99 and max of ``(send ns, latency ms)`` samples."""
    lat = sorted(s[1] for s in samples)
    return {"count": len(lat), "p50_ms": percentile(lat, 0.5), "p99_ms": percentile(lat, 0.99),
            "max_ms": lat[-1] if lat else 0.0}


def log_size(directory: Path) -> int:
    """Bytes of the log segments (``*.log``) of one partition's directory."""
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def set_topic_config(cluster: LocalCluster, topic: str, config: dict[str, str]) -> None:
    """Replace ``topic``'s dynamic config in ZooKeeper (with the change notification both
    brokers watch)."""
    async def run() -> None:
        zk = KafkaZkClient(cluster.zookeeper_connect, session_timeout_ms=30000)
        await zk.start()
        try:
            await AdminZkClient(zk).alter_topic_config(topic, config)
        finally:
            await zk.close()

    asyncio.run(run())


@dataclass(frozen=True, slots=True)
class CleanerSummary:
    mb: float  # as the broker counts MB: Kafka 2^20 bytes, odradek 10^6
    seconds: float
    mb_per_s: float
    line: str  # the summary as logged, on one line


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def cleaner_summary(text: str, log_name: str) -> CleanerSummary | None:
    """The last cleaning of ``log_name`` (``<topic>-<partition>``) that a ``log-cleaner.log``
    reports, Kafka's several lines or odradek's one; None before the first."""
    pattern = re.compile(rf"cleaned log {re.escape(log_name)} \(dirty section = [^)]*\):?\s*([\d.,]+) MB of log "
                         r"processed in ([\d.,]+) seconds \(([\d.,]+) MB/sec\)")
    found = list(pattern.finditer(text))
    if not found:
        return None
    m = found[-1]
    return CleanerSummary(_number(m.group(1)), _number(m.group(2)), _number(m.group(3)), " ".join(m.group(0).split()))


def wait_cleaned(log: Path, log_name: str, timeout_s: float = 900) -> CleanerSummary:
    """Until ``log`` (a broker's log-cleaner.log) reports a cleaning of ``log_name``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        summary = cleaner_summary(log.read_text(errors="replace"), log_name) if log.exists() else None
        if summary is not None:
            return summary
        time.sleep(0.2)
    raise PerfError(f"{log_name} was not cleaned within {timeout_s:.0f} s")
