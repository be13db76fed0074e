"""End-to-end latency of records on a local cluster (bench/replicated_kreps.py,
bench/replicated_latency.py, bench/vs_kafka.py).

Each record is stamped with its send time (CLOCK_MONOTONIC, the same clock in every process of
this machine) and a sequence number (-1: warm-up, sent but not counted).  A consumer in another
process sits at the tail of every partition and records now - stamp for every record it polls;
a consumer only sees records below the high watermark, so on a replicated topic the latency
includes replication to every replica in the ISR."""

from __future__ import annotations

import multiprocessing as mp
import os
import struct
import time
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

from odradek.local.cluster import LocalCluster
from odradek.perf.common import PerfError, percentile
from odradek.perf.harness import wait_full_isr
from odradek.perf.sysstat import UsageWindow

__all__ = ["STAMP", "paced_phase", "start_e2e_consumer"]

STAMP = struct.Struct(">qq")  # send time (ns, CLOCK_MONOTONIC), sequence (-1: warm-up)


def _e2e_consumer(bootstrap: str, topic: str, partitions: int, expected: int, ready: mp.Event,  # type: ignore[valid-type]
                  out: mp.Queue, idle_timeout_s: float) -> None:  # type: ignore[type-arg]
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-{os.getpid()}",
                     "enable.auto.commit": False, "enable.partition.eof": False,
                     "fetch.queue.backoff.ms": 1})
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_END) for p in range(partitions)])
    # Resolving OFFSET_END takes a ListOffsets round trip per partition; poll a moment so
    # the consumer sits at the tail before the producer starts.
    until = time.monotonic() + 2.0
    while time.monotonic() < until:
        c.consume(num_messages=1000, timeout=0.1)
    ready.set()  # type: ignore[attr-defined]
    latencies = array("d")
    sent_at = array("q")
    seen: set[int] = set()
    duplicates = warmups = errors = 0
    last = time.monotonic()
    clock, unpack = time.monotonic_ns, STAMP.unpack_from
    poll = c.poll  # one record at a time: consume(n, timeout) would wait to fill its batch
    while len(seen) < expected and time.monotonic() - last < idle_timeout_s:
        m = poll(0.05)
        if m is None:
            continue
        now = clock()
        if m.error() is not None:
            errors += 1
            continue
        sent, seq = unpack(m.value())
        last = time.monotonic()
        if seq < 0:
            warmups += 1
        elif seq in seen:
            duplicates += 1
        else:
            seen.add(seq)
            latencies.append((now - sent) / 1e6)
            sent_at.append(sent)
    c.close()
    missing = expected - len(seen)
    out.put({"latencies_ms": latencies.tobytes(), "sent_ns": sent_at.tobytes(),
             "duplicates": duplicates, "missing": missing,
             "warmup_seen": warmups, "errors": errors})  # type: ignore[attr-defined]


def start_e2e_consumer(bootstrap: str, topic: str, expected: int, partitions: int = 6
                       ) -> tuple[mp.Process, mp.Queue]:  # type: ignore[type-arg]
    """The end-to-end consumer of ``partitions`` of ``topic`` in a process of its own, sitting
    at the tail: (process, the queue its result arrives on, once it has seen ``expected``
    records or none for 15 s)."""
    ctx = mp.get_context("spawn")
    ready, out = ctx.Event(), ctx.Queue()
    reader = ctx.Process(target=_e2e_consumer, args=(bootstrap, topic, partitions, expected, ready, out, 15.0))
    reader.start()
    if not ready.wait(60):
        reader.kill()
        raise PerfError("end-to-end consumer did not start")
    return reader, out  # type: ignore[return-value]


def paced_phase(cluster: LocalCluster, topic: str, rate: float, duration_s: float, warmup_s: float,
                groups: Mapping[str, Sequence[int]], *, partitions: int = 6, replication_factor: int = 3,
                record_size: int = 100, producer: Mapping[str, object] | None = None) -> dict[str, Any]:
    """One producer in this process sends ``rate`` records/s of ``record_size`` bytes to
    ``topic`` for ``warmup_s`` + ``duration_s`` (acks=all, linger.ms=0 unless ``producer``
    says otherwise), the end-to-end consumer reads them: the rate achieved, produce latency
    (``produce()`` to its delivery report) and end-to-end latency percentiles, and the CPU of
    ``groups`` (``brokers``, ...) and of the rest over the sending."""
    import confluent_kafka as ck

    wait_full_isr(cluster, topic, partitions, replication_factor)
    measured, warm = int(rate * duration_s), int(rate * warmup_s)
    reader, out = start_e2e_consumer(cluster.bootstrap_servers, topic, measured, partitions)

    produce_ms = array("d")
    failed = 0
    clock = time.monotonic_ns

    def on_delivery(err: object, msg: object) -> None:
        nonlocal failed
        if err is not None:
            failed += 1
            return
        sent, seq = STAMP.unpack_from(msg.value())  # type: ignore[attr-defined]
        if seq >= 0:
            produce_ms.append((clock() - sent) / 1e6)

    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0,
                     "enable.idempotence": False, "on_delivery": on_delivery, "log_level": 0, **(producer or {})})
    pad = b"x" * (record_size - STAMP.size)
    pack, produce, poll, sleep = STAMP.pack, p.produce, p.poll, time.sleep
    interval = 1.0 / rate
    window = UsageWindow(groups)
    start = time.perf_counter()
    for i in range(warm + measured):
        while (ahead := start + i * interval - time.perf_counter()) > 0:
            # confluent-kafka's poll() takes whole milliseconds: poll(0.0005) returns at once,
            # and a pacing loop built on it spins a core the brokers need (on 2 cores, 0.7 of
            # one at 1,000 records/s).  Sleep out the last millisecond instead.
            if ahead >= 0.002:
                poll(ahead - 0.001)
            else:
                sleep(ahead)
        while True:
            try:
                produce(topic, pack(clock(), i - warm if i >= warm else -1) + pad)
                break
            except BufferError:
                poll(0.001)
        poll(0)
    send_s = time.perf_counter() - start
    p.flush(120)
    usage = window.stop()
    result = out.get(timeout=180)
    reader.join(30)
    e2e = sorted(array("d", result.pop("latencies_ms")))
    result.pop("sent_ns")
    prod = sorted(produce_ms)
    return {
        "rate": rate, "achieved_rate": (warm + measured) / send_s, "sent": measured, "received": len(e2e),
        "failed_sends": failed, **result,
        "produce_p50_ms": percentile(prod, 0.5), "produce_p99_ms": percentile(prod, 0.99),
        "produce_p999_ms": percentile(prod, 0.999),
        "e2e_p50_ms": percentile(e2e, 0.5), "e2e_p99_ms": percentile(e2e, 0.99),
        "e2e_p999_ms": percentile(e2e, 0.999), "brokers_cpu_per_s": usage.cpu_s["brokers"] / usage.seconds,
        "usage": usage.as_dict(),
    }
