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
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from odradek.local.cluster import LocalCluster
from odradek.perf.compaction import (
    VALUE_SIZE,
    fill,
    latencies,
    latency_stats,
    log_size,
    set_topic_config,
    wait_cleaned,
)
from odradek.perf.harness import code_version, create_topic_zk, unwind_on_sigterm
from odradek.perf.sysstat import process_cpu_seconds

RESULTS = Path(__file__).resolve().parent / "results"
SEGMENT_BYTES = 64 << 20
TOPIC, LATENCY_TOPIC = "compacted", "latency"


def busy_loop(stop: mp.Event) -> None:  # type: ignore[valid-type]
    """The control: a pure-Python CPU hog at the cleaner's priority (nice 10), touching no
    files and no broker, to show what any CPU-bound process costs the broker's clients on
    this machine."""
    os.nice(10)
    x = 0
    while not stop.is_set():
        for i in range(100_000):
            x += i


def set_ratio(cluster: LocalCluster, ratio: str) -> None:
    set_topic_config(cluster, TOPIC, {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
                                      "min.cleanable.dirty.ratio": ratio})


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
        fillers = [ctx.Process(target=fill, args=(cluster.bootstrap_servers, TOPIC, records // 2, args.keys, seed))
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
        idle = ctx.Process(target=latencies, args=(cluster.bootstrap_servers, LATENCY_TOPIC, args.rate, args.phase_s, stop, out))
        idle.start()
        idle_result = out.get(timeout=args.phase_s + 120)
        idle.join()
        hog_stop = ctx.Event()
        hog = ctx.Process(target=busy_loop, args=(hog_stop,))
        hog.start()
        control = ctx.Process(target=latencies, args=(cluster.bootstrap_servers, LATENCY_TOPIC, args.rate, args.phase_s, stop, out))
        control.start()
        control_result = out.get(timeout=args.phase_s + 120)
        control.join()
        hog_stop.set()
        hog.join()

        cleaner_log = cluster.brokers[0].config_path.parent / "log-cleaner.log"
        broker_pid = cluster.brokers[0].pid
        assert broker_pid is not None
        busy = ctx.Process(target=latencies, args=(cluster.bootstrap_servers, LATENCY_TOPIC, args.rate, 900.0, stop, out))
        busy.start()
        time.sleep(3)  # the producer connects and warms up before the cleaning starts
        cpu_before = process_cpu_seconds(broker_pid)
        t_alter = time.monotonic_ns()
        set_ratio(cluster, "0.5")
        summary = wait_cleaned(cleaner_log, f"{TOPIC}-0")
        t_done = time.monotonic_ns()
        cpu_broker = process_cpu_seconds(broker_pid) - cpu_before
        stop.set()
        busy_result = out.get(timeout=120)
        busy.join()
        during = [s for s in busy_result["samples"] if t_alter <= s[0] <= t_done]
        after = log_size(data)
        result["log_cleaner_line"] = summary.line
        result["cleaning"] = {
            "summary_mb": summary.mb, "summary_seconds": summary.seconds, "summary_mb_per_s": summary.mb_per_s, "wall_seconds": (t_done - t_alter) / 1e9,
            "wall_mb_per_s": before / 1e6 / ((t_done - t_alter) / 1e9), "size_before": before,
            "size_after": after, "broker_cpu_s": cpu_broker}
        result["latency_idle"] = {**latency_stats(idle_result["samples"]), "failed": idle_result["failed"]}
        result["latency_cleaning"] = {**latency_stats(during), "failed": busy_result["failed"]}
        # Where the slow deliveries fall in the cleaning: per half second, how many took > 1 ms.
        slow: dict[float, int] = {}
        for sent, ms in during:
            if ms > 1.0:
                bucket = round((sent - t_alter) / 1e9 * 2) / 2
                slow[bucket] = slow.get(bucket, 0) + 1
        result["slow_deliveries_per_half_second"] = dict(sorted(slow.items()))
        result["latency_control"] = {**latency_stats(control_result["samples"]), "failed": control_result["failed"]}
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
    unwind_on_sigterm()
    sys.exit(main())
