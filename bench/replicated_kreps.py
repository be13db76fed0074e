"""The replicated rows of Kreps' 2014 benchmark on 3 local brokers.

Jay Kreps, "Benchmarking Apache Kafka: 2 Million Writes Per Second (On Three Cheap
Machines)", 2014: 100-byte records, 6 partitions, replication factor 3, one producer thread:

    3x asynchronous replication (acks=1)    786,980 records/s  (75.1 MB/s)
    3x synchronous replication  (acks=-1)   421,823 records/s  (40.2 MB/s)   sync/async 0.54
    end-to-end latency                      2 ms median, 3 ms p99, 14 ms p99.9

Here: a 3-broker LocalCluster (embedded ZooKeeper) on this one machine, topics of 6
partitions with RF 3 (leaders spread over the brokers), and

1. throughput: `odradek perf produce` (its own process) with acks=1, then acks=-1, each
   sending --records 100-byte records as fast as one producer goes (linger.ms=5,
   batch.size=1000000, batch.num.messages=10000, no compression); records/s, MB/s
   (2^20 bytes of record values) and CPU s/GB of the three brokers together;
2. end-to-end latency: one producer (acks=1, linger.ms=--linger-ms, default librdkafka's 5)
   sends --rate records/s for --duration seconds, each record stamped with its send time
   (CLOCK_MONOTONIC, the same clock in every process of this machine) and a sequence
   number; a consumer in another process reads from the tail with assign() (the
   consumer's defaults: fetch.wait.max.ms=500, fetch.min.bytes=1), one poll() per record,
   and records now - stamp for every record.  A consumer only sees records below the high watermark,
   so this latency includes replication to all three replicas.  The first --warmup-s
   seconds are sent but not counted.

    .venv/bin/python bench/replicated_kreps.py [--records 3000000] [--rate 10000] [--duration 20]
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

from odradek.local.cluster import LocalCluster
from odradek.perf import harness
from odradek.perf.common import MB, percentile
from odradek.perf.harness import code_version, create_topic_zk, run_perf, unwind_on_sigterm
from odradek.perf.latency import STAMP, start_e2e_consumer

RESULTS = Path(__file__).resolve().parent / "results"
GB = float(1 << 30)
PARTITIONS = 6
RF = 3
RECORD_SIZE = 100
BATCHING = ["linger.ms=5", "batch.size=1000000", "batch.num.messages=10000", "compression.type=none"]
KREPS = {"async_rps": 786_980, "async_mbps": 75.1, "sync_rps": 421_823, "sync_mbps": 40.2,
         "ratio": 421_823 / 786_980, "e2e_p50_ms": 2.0, "e2e_p99_ms": 3.0, "e2e_p999_ms": 14.0}


def wait_full_isr(cluster: LocalCluster, topic: str, timeout_s: float = 120) -> float:
    """Seconds until every partition of ``topic`` has a leader and a full ISR."""
    start = time.monotonic()
    harness.wait_full_isr(cluster, topic, PARTITIONS, RF, timeout_s)
    return time.monotonic() - start


def throughput(cluster: LocalCluster, topic: str, acks: str, records: int,
               extra_props: list[str]) -> dict[str, object]:
    wait_full_isr(cluster, topic)
    load = os.getloadavg()[0]
    cpu0 = harness.brokers_cpu_seconds(cluster)
    result = run_perf("produce", ["--bootstrap-server", cluster.bootstrap_servers, "--topic", topic,
                                  "--num-records", str(records), "--record-size", str(RECORD_SIZE),
                                  "--throughput", "-1", "--producer-props", f"acks={acks}", *BATCHING,
                                  *extra_props])
    result["brokers_cpu_s"] = harness.brokers_cpu_seconds(cluster) - cpu0
    result["brokers_cpu_s_per_gb"] = float(result["brokers_cpu_s"]) / (float(result["bytes"]) / GB)
    result["load_avg_before"] = load
    return result


# ----------------------------------------------------------------------------- end to end


def end_to_end(cluster: LocalCluster, topic: str, rate: float, duration_s: float,
               warmup_s: float, linger_ms: int) -> dict[str, object]:
    import confluent_kafka as ck

    wait_full_isr(cluster, topic)
    measured = int(rate * duration_s)
    warm = int(rate * warmup_s)
    reader, out = start_e2e_consumer(cluster.bootstrap_servers, topic, measured, PARTITIONS)

    failed = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "1", "linger.ms": linger_ms,
                     "on_delivery": on_delivery})
    pad = b"x" * (RECORD_SIZE - STAMP.size)
    pack, clock, produce, poll = STAMP.pack, time.monotonic_ns, p.produce, p.poll
    interval = 1.0 / rate
    start = time.perf_counter()
    for i in range(warm + measured):
        while (ahead := start + i * interval - time.perf_counter()) > 0:
            poll(ahead)
        produce(topic, pack(clock(), i - warm if i >= warm else -1) + pad)
        poll(0)
    p.flush(60)
    send_s = time.perf_counter() - start
    result = out.get(timeout=120)
    reader.join(30)
    by_arrival = array("d", result.pop("latencies_ms"))
    sent_ns = array("q", result.pop("sent_ns"))
    lat = sorted(by_arrival)
    return {
        "rate": rate, "linger_ms": linger_ms, "duration_s": duration_s, "warmup_s": warmup_s, "sent": measured,
        "achieved_rate": (warm + measured) / send_s, "received": len(lat), "failed_sends": failed,
        **result,
        "p50_ms": percentile(lat, 0.5), "p99_ms": percentile(lat, 0.99), "p999_ms": percentile(lat, 0.999),
        "avg_ms": sum(lat) / len(lat) if lat else 0.0, "max_ms": lat[-1] if lat else 0.0,
        "per_second": _per_second(sent_ns, by_arrival),
    }


def _per_second(sent_ns: array, latencies: array) -> list[dict[str, float]]:  # type: ignore[type-arg]
    """Median and max latency per second of send time: shows whether the tail is one stall
    or spread out."""
    if not sent_ns:
        return []
    first = min(sent_ns)
    windows: dict[int, list[float]] = {}
    for t, ms in zip(sent_ns, latencies, strict=True):
        windows.setdefault((t - first) // 1_000_000_000, []).append(ms)
    return [{"second": w, "records": len(v), "p50_ms": percentile(sorted(v), 0.5), "max_ms": max(v)}
            for w, v in sorted(windows.items())]


# ----------------------------------------------------------------------------- report


def report(async_: dict[str, object], sync: dict[str, object], e2e: dict[str, object]) -> str:
    ratio = float(sync["records_per_sec"]) / float(async_["records_per_sec"])  # type: ignore[arg-type]
    rows = [
        ("3x async (acks=1)", f"{async_['records_per_sec']:,.0f} rec/s ({async_['mb_per_sec']:.1f} MB/s)",
         f"{KREPS['async_rps']:,} rec/s ({KREPS['async_mbps']} MB/s)"),
        ("3x sync (acks=-1)", f"{sync['records_per_sec']:,.0f} rec/s ({sync['mb_per_sec']:.1f} MB/s)",
         f"{KREPS['sync_rps']:,} rec/s ({KREPS['sync_mbps']} MB/s)"),
        ("sync / async", f"{ratio:.2f}", f"{KREPS['ratio']:.2f}"),
        (f"e2e latency median @{e2e['rate']:,.0f}/s, linger {e2e['linger_ms']} ms",
         f"{e2e['p50_ms']:.2f} ms", "2 ms"),
        ("e2e latency p99", f"{e2e['p99_ms']:.2f} ms", "3 ms"),
        ("e2e latency p99.9", f"{e2e['p999_ms']:.2f} ms", "14 ms"),
        ("brokers CPU s/GB async / sync",
         f"{async_['brokers_cpu_s_per_gb']:.1f} / {sync['brokers_cpu_s_per_gb']:.1f}", "-"),
        ("producer latency p50/p99 async",
         f"{async_['p50_ms']:.1f} / {async_['p99_ms']:.1f} ms", "-"),
        ("producer latency p50/p99 sync", f"{sync['p50_ms']:.1f} / {sync['p99_ms']:.1f} ms", "-"),
    ]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in [*rows, ("", "odradek (this run)", "")])
    lines = [f"{'':{w0}}   {'odradek (this run)':{w1}}   Kreps 2014 (3 brokers on 3 machines)"]
    lines.append("-" * len(lines[0]))
    lines += [f"{a:{w0}}   {b:{w1}}   {c}" for a, b, c in rows]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=3_000_000, help="records per throughput phase")
    ap.add_argument("--rate", type=float, default=10_000, help="end-to-end phase: records/s")
    ap.add_argument("--duration", type=float, default=20, help="end-to-end phase: seconds measured")
    ap.add_argument("--warmup-s", type=float, default=2, help="end-to-end phase: seconds not counted")
    ap.add_argument("--linger-ms", type=int, default=5, help="end-to-end phase: the producer's linger.ms")
    ap.add_argument("--producer-props", nargs="*", default=[],
                    help="extra properties for both throughput producers, e.g. "
                         "max.in.flight.requests.per.connection=5 (the Java producer's default; "
                         "librdkafka pipelines up to 1,000,000 requests per connection)")
    ap.add_argument("--dir", help="working directory (default: a temporary one, removed afterwards)")
    args = ap.parse_args()

    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(args.dir or tempfile.mkdtemp(prefix="odradek-kreps-"))
    code = code_version()
    print(f"3 brokers, {PARTITIONS} partitions, RF {RF}, {RECORD_SIZE}-byte records; "
          f"{args.records:,} records per throughput phase; producer {' '.join(BATCHING + args.producer_props)}; load average {os.getloadavg()[0]:.2f}; "
          f"work dir {base}; code {code['commit']}"
          f"{' + uncommitted ' + ', '.join(code['dirty']) if code['dirty'] else ''}", flush=True)  # type: ignore[arg-type]
    with LocalCluster(base / "cluster", 3) as cluster:
        for t in ("warmup", "async", "sync", "e2e"):
            create_topic_zk(cluster.zookeeper_connect, f"kreps-{t}", PARTITIONS, RF)
        wait_full_isr(cluster, "kreps-warmup")
        run_perf("produce", ["--bootstrap-server", cluster.bootstrap_servers, "--topic", "kreps-warmup",
                             "--num-records", "200000", "--record-size", str(RECORD_SIZE),
                             "--producer-props", "acks=1", *BATCHING])
        a = throughput(cluster, "kreps-async", "1", args.records, args.producer_props)
        print(f"  async: {a['records_per_sec']:,.0f} rec/s, brokers {a['brokers_cpu_s']:.1f} s CPU, "
              f"client {a['client_cpu_s']:.1f} s", flush=True)
        s = throughput(cluster, "kreps-sync", "-1", args.records, args.producer_props)
        print(f"  sync:  {s['records_per_sec']:,.0f} rec/s, brokers {s['brokers_cpu_s']:.1f} s CPU, "
              f"client {s['client_cpu_s']:.1f} s", flush=True)
        e = end_to_end(cluster, "kreps-e2e", args.rate, args.duration, args.warmup_s, args.linger_ms)
        worst = sorted(e["per_second"], key=lambda w: -w["max_ms"])[:3]  # type: ignore[index]
        print("  e2e worst seconds: " + ", ".join(
            f"s{w['second']}: max {w['max_ms']:.0f} ms (p50 {w['p50_ms']:.1f})" for w in worst), flush=True)
        print(f"  e2e:   {e['received']:,} of {e['sent']:,} records at {e['achieved_rate']:,.0f}/s, "
              f"{e['duplicates']} duplicates, {e['missing']} missing, {e['failed_sends']} failed sends",
              flush=True)
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    print()
    print(report(a, s, e))
    out = RESULTS / f"replicated_kreps-{stamp}.json"
    out.write_text(json.dumps({"started": stamp, "code": code, "records": args.records,
                               "batching": BATCHING + args.producer_props,
                               "cpu_count": os.cpu_count(), "python": sys.version.split()[0],
                               "async": a, "sync": s, "e2e": e, "kreps_2014": KREPS,
                               "mb": MB}, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
