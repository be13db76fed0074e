"""The log cleaner on a large log, and what it costs the broker's other clients.

Set-up (the compaction issue's): one broker, a compacted topic of one partition filled with
--gb of records (100-byte values, keys drawn uniformly from --keys distinct keys, 64 MiB
segments), written with the cleaner held back (the topic's min.cleanable.dirty.ratio is 1,
which no log exceeds).

1. idle: a producer in its own process sends 1,000 records/s (acks=1, linger.ms=0) to
   another topic on the same broker for --phase-s seconds; every delivery latency is kept.
2. control: the same, while a pure-Python busy loop runs at the cleaner's priority
   (nice 10) in another process: what any CPU-bound process costs on this machine.
3. cleaning: the same producer again, and meanwhile the topic's min.cleanable.dirty.ratio
   goes to 0.5 (a dynamic topic config change): the cleaner cleans the whole log. The
   latencies of records sent while it cleaned (from the config change to its
   log-cleaner.log line) are compared with the idle and control ones, in the same run.

Reported: the cleaner's MB/s (its own summary line, and the wall time from the config
change to the swap), the log's size before and after, produce p50/p99 idle, control and
cleaning, and when in the cleaning the slow (> 1 ms) deliveries fell.

    .venv/bin/python bench/log_compaction.py [--gb 1.0] [--keys 100000] [--phase-s 20] [--io-max-mbps N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from odradek.local.cluster import LocalCluster
from odradek.perf.common import percentile
from odradek.perf.harness import code_version, create_topic_zk
from odradek.perf.sysstat import process_cpu_seconds
from odradek.zk.admin_zk_client import AdminZkClient
from odradek.zk.client import KafkaZkClient

RESULTS = Path(__file__).resolve().parent / "results"
VALUE_SIZE = 100
SEGMENT_BYTES = 64 << 20
TOPIC, LATENCY_TOPIC = "compacted", "latency"
SUMMARY = re.compile(r"cleaned log compacted-0 .*?: ([\d.,]+) MB of log processed in ([\d.]+) seconds "
                     r"\(([\d.]+) MB/sec\)")


def fill(bootstrap: str, records: int, keys: int, seed: int) -> None:
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
                produce(TOPIC, value=value, key=keyset[rng.randrange(keys)], partition=0)
                break
            except BufferError:
                poll(0.05)
        if i % 10_000 == 0:
            poll(0)
    if p.flush(300) != 0:
        raise SystemExit("fill: records left unsent")


def latencies(bootstrap: str, rate: float, duration_s: float, stop: mp.Event,  # type: ignore[valid-type]
              out: mp.Queue) -> None:  # type: ignore[type-arg]
    """Send ``rate`` records/s for ``duration_s`` or until ``stop``; put [(send ns, latency
    ms)] on ``out``."""
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
    while (now := time.perf_counter()) - start < duration_s and not stop.is_set():
        ahead = start + i * interval - now
        if ahead > 0:
            p.poll(ahead)
            continue
        sent = time.monotonic_ns()
        p.produce(LATENCY_TOPIC, value=value, key=b"k", on_delivery=lambda e, m, s=sent: delivered(e, m, s))
        p.poll(0)
        i += 1
    p.flush(60)
    out.put({"samples": samples, "failed": failed, "sent": i})


def busy_loop(stop: mp.Event) -> None:  # type: ignore[valid-type]
    """The control: a pure-Python CPU hog at the cleaner's priority (nice 10), touching no
    files and no broker, to show what any CPU-bound process costs the broker's clients on
    this machine."""
    os.nice(10)
    x = 0
    while not stop.is_set():
        for i in range(100_000):
            x += i


def log_size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def set_ratio(cluster: LocalCluster, ratio: str) -> None:
    async def run() -> None:
        zk = KafkaZkClient(cluster.zookeeper_connect, session_timeout_ms=30000)
        await zk.start()
        try:
            await AdminZkClient(zk).alter_topic_config(TOPIC, {
                "cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
                "min.cleanable.dirty.ratio": ratio})
        finally:
            await zk.close()

    asyncio.run(run())


def stats(samples: list[tuple[int, float]]) -> dict[str, float]:
    lat = sorted(s[1] for s in samples)
    return {"count": len(lat), "p50_ms": percentile(lat, 0.5), "p99_ms": percentile(lat, 0.99),
            "max_ms": lat[-1] if lat else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.0, help="size of the compacted log (10^9 bytes)")
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--phase-s", type=float, default=20.0, help="length of the idle measurement")
    ap.add_argument("--rate", type=float, default=1000.0, help="latency producer's records/s")
    ap.add_argument("--io-max-mbps", type=float, default=None,
                    help="log.cleaner.io.max.bytes.per.second, in 10^6 bytes/s (default: unthrottled)")
    ap.add_argument("--keep", action="store_true", help="keep the cluster directory")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="odradek-bench-compaction-"))
    overrides = {"log.cleaner.backoff.ms": "1000", "num.partitions": "1", "offsets.topic.replication.factor": "1"}
    if args.io_max_mbps is not None:
        overrides["log.cleaner.io.max.bytes.per.second"] = str(args.io_max_mbps * 1e6)
    cluster = LocalCluster(work, 1, overrides=overrides)
    ctx = mp.get_context("spawn")
    result: dict[str, object] = {"bench": "log_compaction", "code": code_version(), "args": vars(args)}
    try:
        cluster.start()
        create_topic_zk(cluster.zookeeper_connect, TOPIC, 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES), "min.cleanable.dirty.ratio": "1"})
        create_topic_zk(cluster.zookeeper_connect, LATENCY_TOPIC, 1, 1)
        data = cluster.brokers[0].config_path.parent / "data" / f"{TOPIC}-0"
        records = int(args.gb * 1e9 / (VALUE_SIZE + 21))  # ~21 bytes of key and record framing
        started = time.monotonic()
        fillers = [ctx.Process(target=fill, args=(cluster.bootstrap_servers, records // 2, args.keys, seed))
                   for seed in (1, 2)]
        for f in fillers:
            f.start()
        for f in fillers:
            f.join()
        before = log_size(data)
        result["fill"] = {"records": records, "bytes": before, "seconds": time.monotonic() - started}
        print(f"filled {before / 1e9:.2f} GB ({records:,} records) in {time.monotonic() - started:.0f} s",
              flush=True)

        out, stop = ctx.Queue(), ctx.Event()
        idle = ctx.Process(target=latencies, args=(cluster.bootstrap_servers, args.rate, args.phase_s, stop, out))
        idle.start()
        idle_result = out.get(timeout=args.phase_s + 120)
        idle.join()
        hog_stop = ctx.Event()
        hog = ctx.Process(target=busy_loop, args=(hog_stop,))
        hog.start()
        control = ctx.Process(target=latencies, args=(cluster.bootstrap_servers, args.rate, args.phase_s, stop, out))
        control.start()
        control_result = out.get(timeout=args.phase_s + 120)
        control.join()
        hog_stop.set()
        hog.join()

        cleaner_log = cluster.brokers[0].config_path.parent / "log-cleaner.log"
        broker_pid = cluster.brokers[0].pid
        assert broker_pid is not None
        busy = ctx.Process(target=latencies, args=(cluster.bootstrap_servers, args.rate, 900.0, stop, out))
        busy.start()
        time.sleep(3)  # the producer connects and warms up before the cleaning starts
        cpu_before = process_cpu_seconds(broker_pid)
        t_alter = time.monotonic_ns()
        set_ratio(cluster, "0.5")
        match = None
        while match is None:
            time.sleep(0.2)
            if time.monotonic_ns() - t_alter > 900e9:
                raise SystemExit("the cleaning did not finish within 900 s")
            match = SUMMARY.search(cleaner_log.read_text()) if cleaner_log.exists() else None
        t_done = time.monotonic_ns()
        cpu_broker = process_cpu_seconds(broker_pid) - cpu_before
        stop.set()
        busy_result = out.get(timeout=120)
        busy.join()
        during = [s for s in busy_result["samples"] if t_alter <= s[0] <= t_done]
        after = log_size(data)
        lines = [line for line in cleaner_log.read_text().splitlines() if "cleaned log compacted-0" in line]
        result["log_cleaner_line"] = lines[-1] if lines else None
        result["cleaning"] = {
            "summary_mb": float(match.group(1).replace(",", "")), "summary_seconds": float(match.group(2)),
            "summary_mb_per_s": float(match.group(3)), "wall_seconds": (t_done - t_alter) / 1e9,
            "wall_mb_per_s": before / 1e6 / ((t_done - t_alter) / 1e9), "size_before": before,
            "size_after": after, "broker_cpu_s": cpu_broker}
        result["latency_idle"] = {**stats(idle_result["samples"]), "failed": idle_result["failed"]}
        result["latency_cleaning"] = {**stats(during), "failed": busy_result["failed"]}
        # Where the slow deliveries fall in the cleaning: per half second, how many took > 1 ms.
        slow: dict[float, int] = {}
        for sent, ms in during:
            if ms > 1.0:
                bucket = round((sent - t_alter) / 1e9 * 2) / 2
                slow[bucket] = slow.get(bucket, 0) + 1
        result["slow_deliveries_per_half_second"] = dict(sorted(slow.items()))
        result["latency_control"] = {**stats(control_result["samples"]), "failed": control_result["failed"]}
        p99 = {name: result[f"latency_{name}"]["p99_ms"] for name in ("idle", "control", "cleaning")}  # type: ignore[index]
        result["p99_ratio_cleaning_over_idle"] = p99["cleaning"] / p99["idle"]
        result["p99_ratio_control_over_idle"] = p99["control"] / p99["idle"]
        result["p99_ratio_cleaning_over_control"] = p99["cleaning"] / p99["control"]
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / f"log_compaction-{time.strftime('%Y%m%dT%H%M%S')}.json"
        path.write_text(json.dumps(result, indent=2))
        print(json.dumps(result, indent=2))
        print(f"written to {path}")
    finally:
        cluster.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
