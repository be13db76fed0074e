"""Replicated latency of unbatched producers (issue 14, benchmark 2): 3 local brokers, a
topic of 6 partitions with RF 3, ``acks=all``, ``linger.ms=0`` (every record its own produce
request: the default of kafka-python, aiokafka and the Java client before 4.0), 100-byte
records, one confluent-kafka producer at each of --rates records/s in turn.

For each rate: the rate achieved, produce latency (``produce()`` to its delivery report)
p50/p99, end-to-end latency (send time stamped in the record, CLOCK_MONOTONIC, to the moment
a consumer in another process polls it: replication to all three replicas included, since a
consumer only sees records below the high watermark) p50/p99/p99.9, and the brokers' CPU
(seconds of CPU per second of the phase, all three brokers). The first --warmup-s seconds of
each phase are sent but not counted. The end-to-end consumer is bench/replicated_kreps.py's.

With ``--profile RATE`` one more phase at RATE runs with py-spy on broker 0 (it leads a third of
the partitions and follows the rest), and its top functions are printed.

    .venv/bin/python bench/replicated_latency.py [--rates 1000,3000,5000,10000] [--duration 15] [--profile 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from array import array
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replicated_kreps import STAMP, start_e2e_consumer

from odradek.local.cluster import LocalCluster
from odradek.perf.common import percentile
from odradek.perf.harness import (
    brokers_cpu_seconds,
    code_version,
    create_topic_zk,
    pyspy_record,
    summarize_speedscope,
    wait_full_isr,
)

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS = 6
RF = 3
RECORD_SIZE = 100


def phase(cluster: LocalCluster, topic: str, rate: float, duration_s: float, warmup_s: float) -> dict[str, object]:
    import confluent_kafka as ck

    wait_full_isr(cluster, topic, PARTITIONS, RF)
    measured, warm = int(rate * duration_s), int(rate * warmup_s)
    reader, out = start_e2e_consumer(cluster.bootstrap_servers, topic, measured)

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
                     "enable.idempotence": False, "on_delivery": on_delivery, "log_level": 0})
    pad = b"x" * (RECORD_SIZE - STAMP.size)
    pack, produce, poll, sleep = STAMP.pack, p.produce, p.poll, time.sleep
    interval = 1.0 / rate
    cpu0, wall0 = brokers_cpu_seconds(cluster), time.perf_counter()
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
    cpu_per_s = (brokers_cpu_seconds(cluster) - cpu0) / (time.perf_counter() - wall0)
    result = out.get(timeout=180)
    reader.join(30)
    e2e = sorted(array("d", result.pop("latencies_ms")))
    result.pop("sent_ns")
    prod = sorted(produce_ms)
    return {
        "rate": rate, "achieved_rate": (warm + measured) / send_s, "sent": measured, "received": len(e2e),
        "failed_sends": failed, **result,
        "produce_p50_ms": percentile(prod, 0.5), "produce_p99_ms": percentile(prod, 0.99),
        "e2e_p50_ms": percentile(e2e, 0.5), "e2e_p99_ms": percentile(e2e, 0.99),
        "e2e_p999_ms": percentile(e2e, 0.999), "brokers_cpu_per_s": cpu_per_s,
    }


def report(rows: list[dict[str, object]]) -> str:
    head = ("rate/s", "achieved", "produce p50", "p99", "e2e p50", "p99", "p99.9", "brokers CPU s/s", "lost")
    lines = [head]
    for r in rows:
        lines.append((f"{r['rate']:,.0f}", f"{r['achieved_rate']:,.0f}", f"{r['produce_p50_ms']:.1f} ms",
                      f"{r['produce_p99_ms']:.1f} ms", f"{r['e2e_p50_ms']:.1f} ms", f"{r['e2e_p99_ms']:.1f} ms",
                      f"{r['e2e_p999_ms']:.1f} ms", f"{r['brokers_cpu_per_s']:.2f}", str(r["missing"])))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="1000,3000,5000,10000", help="comma-separated records/s")
    ap.add_argument("--duration", type=float, default=15, help="seconds measured per rate")
    ap.add_argument("--warmup-s", type=float, default=2, help="seconds sent but not counted per rate")
    ap.add_argument("--profile", type=float, default=None, metavar="RATE",
                    help="one more phase at RATE records/s under py-spy (broker 0)")
    ap.add_argument("--dir", help="working directory (default: a temporary one, removed afterwards)")
    args = ap.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(args.dir or tempfile.mkdtemp(prefix="odradek-latency-bench-"))
    code = code_version()
    print(f"3 brokers, {PARTITIONS} partitions, RF {RF}, acks=all, linger.ms=0, {RECORD_SIZE}-byte records, "
          f"{args.duration:.0f} s per rate; load average {os.getloadavg()[0]:.2f}; code {code['commit']}", flush=True)
    rows = []
    with LocalCluster(base / "cluster", 3) as cluster:
        for rate in rates:
            topic = f"latency-{int(rate)}"
            create_topic_zk(cluster.zookeeper_connect, topic, PARTITIONS, RF)
            row = phase(cluster, topic, rate, args.duration, args.warmup_s)
            rows.append(row)
            print(f"  {rate:,.0f}/s: achieved {row['achieved_rate']:,.0f}/s, produce p99 {row['produce_p99_ms']:.1f} ms, "
                  f"e2e p50/p99 {row['e2e_p50_ms']:.1f}/{row['e2e_p99_ms']:.1f} ms", flush=True)
        profile = None
        if args.profile:
            create_topic_zk(cluster.zookeeper_connect, "latency-profile", PARTITIONS, RF)
            pid = cluster.brokers[0].pid
            assert pid is not None
            with pyspy_record(pid, base / "profile.speedscope.json") as recorded:
                phase(cluster, "latency-profile", args.profile, args.duration, args.warmup_s)
            profile = summarize_speedscope(recorded, 25).format(f"broker 0 at {args.profile:,.0f} records/s")
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    print()
    print(report(rows))
    if profile:
        print()
        print(profile)
    out = RESULTS / f"replicated-latency-{stamp}.json"
    out.write_text(json.dumps({"started": stamp, "code": code, "cpu_count": os.cpu_count(),
                               "python": sys.version.split()[0], "rows": rows,
                               "profile": profile}, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
