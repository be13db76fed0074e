"""Replicated latency of unbatched producers (issue 14, benchmark 2): 3 local brokers, a
topic of 6 partitions with RF 3, ``acks=all``, ``linger.ms=0`` (every record its own produce
request: the default of kafka-python, aiokafka and the Java client before 4.0), 100-byte
records, one confluent-kafka producer at each of --rates records/s in turn.

For each rate: the rate achieved, produce latency (``produce()`` to its delivery report)
p50/p99, end-to-end latency (send time stamped in the record, CLOCK_MONOTONIC, to the moment
a consumer in another process polls it: replication to all three replicas included, since a
consumer only sees records below the high watermark) p50/p99/p99.9, and the brokers' CPU
(seconds of CPU per second of the phase, all three brokers). The first --warmup-s seconds of
each phase are sent but not counted. The phase and its end-to-end consumer are perf/latency.py's.

Where the CPU went in each phase is printed beside it and in a table at the end
(perf/sysstat.py): CPU-seconds per second of the brokers, ZooKeeper, other idle servers, the
clients (this process, which produces, and the end-to-end consumer) and the rest of the
machine, steal time and the load average -- what tells a slower run from a busier machine.

With ``--baseline REF`` a second cluster runs the brokers of commit REF (a temporary git
worktree, perf/baseline.py); at each rate --rounds rounds (default 3) take turns between the
clusters, and each figure is reported as the median over the rounds with after/before ratios.

With ``--hog 0,0.3,0.6`` each rate also runs beside a busy neighbour that takes that share of
one CPU (a process spinning for that fraction of every 10 ms, at the clients' priority), the
levels in turn in every round: the same brokers on a machine with less CPU to spare, which is
how a slower core or a busier host shows in the latency figures (the neighbour's CPU is in
"others").

With ``--profile RATE`` one more phase at RATE runs with py-spy on broker 0 (it leads a third of
the partitions and follows the rest), and its top functions are printed.

    .venv/bin/python bench/replicated_latency.py [--rates 1000,3000,5000,10000] [--duration 15] [--profile 5000]
        [--baseline REF [--rounds 3]] [--hog 0,0.3,0.6]
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
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from multiprocessing.synchronize import Event
from pathlib import Path

from odradek.local.cluster import LocalCluster
from odradek.perf.baseline import BaselineCluster, checkout, in_turn, median_figures, ratio
from odradek.perf.harness import (
    code_version,
    create_topic_zk,
    pyspy_record,
    summarize_speedscope,
    unwind_on_sigterm,
)
from odradek.perf.latency import paced_phase
from odradek.perf.sysstat import (
    USAGE_HEAD,
    cluster_groups,
    format_usage,
    measured_groups,
    usage_cells,
)

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
PARTITIONS = 6
RF = 3
RECORD_SIZE = 100


# The figures compared, as (column, key, format); "lost" is a count, not compared.
FIGURES = (("achieved", "achieved_rate", "{:,.0f}"), ("produce p50", "produce_p50_ms", "{:.1f} ms"),
           ("p99", "produce_p99_ms", "{:.1f} ms"), ("e2e p50", "e2e_p50_ms", "{:.1f} ms"),
           ("p99", "e2e_p99_ms", "{:.1f} ms"), ("p99.9", "e2e_p999_ms", "{:.1f} ms"),
           ("brokers CPU s/s", "brokers_cpu_per_s", "{:.2f}"))


def _align(lines: list[tuple[str, ...]]) -> str:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in lines)


def report(rows: list[dict]) -> str:
    """One line per rate and code (current, baseline), after/before ratios of every figure
    when both ran, then where the CPU went."""
    lines = [("rate/s", "code", *(head for head, _, _ in FIGURES), "lost")]
    usage = [("rate/s", "code (CPU s/s)", *USAGE_HEAD)]
    for r in rows:
        lines.append((f"{r['rate']:,.0f}", r["code"], *(fmt.format(r[key]) for _, key, fmt in FIGURES),
                      f"{r['missing']:.0f}"))
        usage.append((f"{r['rate']:,.0f}", r["code"], *usage_cells(r["usage"])))
        after = next((a for a in rows if a["rate"] == r["rate"] and a["code"] == "current"), None)
        if r["code"] == "baseline" and after is not None:
            lines.append((f"{r['rate']:,.0f}", "after/before",
                          *(f"{ratio(after[key], r[key]):.2f}" for _, key, _ in FIGURES), ""))
    note = "\nafter/before: current / baseline, medians over the rounds (latency and CPU above 1: slower, costlier)"
    return _align(lines) + (note if len(lines) > len(usage) else "") + "\n\n" + _align(usage)


def _spin(share: float, stop: Event) -> None:
    period = 0.01
    while not stop.is_set():
        until = time.perf_counter() + share * period
        while time.perf_counter() < until:
            pass
        time.sleep((1 - share) * period)


@contextmanager
def neighbour(share: float) -> Iterator[None]:
    """A process taking ``share`` of one CPU while the block runs (none for 0)."""
    if not share:
        yield
        return
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    process = ctx.Process(target=_spin, args=(share, stop), daemon=True)
    process.start()
    try:
        yield
    finally:
        stop.set()
        process.join(5)
        if process.is_alive():
            process.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="1000,3000,5000,10000", help="comma-separated records/s")
    ap.add_argument("--duration", type=float, default=15, help="seconds measured per rate")
    ap.add_argument("--warmup-s", type=float, default=2, help="seconds sent but not counted per rate")
    ap.add_argument("--profile", type=float, default=None, metavar="RATE",
                    help="one more phase at RATE records/s under py-spy (broker 0)")
    ap.add_argument("--baseline", metavar="REF", help="also run the brokers of commit REF, in turns with the current ones")
    ap.add_argument("--rounds", type=int, help="rounds at each rate on each cluster (default: 3 with --baseline, else 1)")
    ap.add_argument("--hog", default="0", help="comma-separated shares of one CPU taken by a neighbour, in turn")
    ap.add_argument("--dir", help="working directory (default: a temporary one, removed afterwards)")
    args = ap.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    hogs = [float(h) for h in args.hog.split(",")]
    if any(not 0 <= h < 1 for h in hogs):
        ap.error("--hog: shares of one CPU, each at least 0 and below 1")
    rounds = args.rounds or (3 if args.baseline else 1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(args.dir or tempfile.mkdtemp(prefix="odradek-latency-bench-"))
    code = code_version()
    baseline = None
    per_round: list[dict] = []
    with ExitStack() as stack:
        clusters = {"current": stack.enter_context(LocalCluster(base / "cluster", 3))}
        if args.baseline:
            baseline = stack.enter_context(checkout(REPO, args.baseline))
            clusters["baseline"] = stack.enter_context(BaselineCluster(baseline, base / "baseline", 3))
        servers = {name: cluster_groups(c) for name, c in clusters.items()}
        print(f"3 brokers, {PARTITIONS} partitions, RF {RF}, acks=all, linger.ms=0, {RECORD_SIZE}-byte records, "
              f"{args.duration:.0f} s per rate, {rounds} round(s); load average {os.getloadavg()[0]:.2f}; "
              f"code {code['commit']}" + (f", baseline {baseline.ref} = {baseline.commit}" if baseline else ""),
              flush=True)
        for rate in rates:
            for r in range(rounds):
                for name, hog in in_turn([(n, h) for n in clusters for h in hogs], r):
                    cluster = clusters[name]
                    topic = f"latency-{int(rate)}-{r}-{hogs.index(hog)}"
                    create_topic_zk(cluster.zookeeper_connect, topic, PARTITIONS, RF)
                    label = f"{name}, hog {hog:g}" if len(hogs) > 1 else name
                    with neighbour(hog):
                        row = {"code": label, "round": r,
                               **paced_phase(cluster, topic, rate, args.duration, args.warmup_s,
                                             measured_groups(servers, name), partitions=PARTITIONS,
                                             replication_factor=RF, record_size=RECORD_SIZE)}
                    per_round.append(row)
                    print(f"  {rate:,.0f}/s round {r + 1} {label}: achieved {row['achieved_rate']:,.0f}/s, produce "
                          f"p99 {row['produce_p99_ms']:.1f} ms, e2e p50/p99 {row['e2e_p50_ms']:.1f}/"
                          f"{row['e2e_p99_ms']:.1f} ms; {format_usage(row['usage'])}", flush=True)
        profile = None
        if args.profile:
            cluster = clusters["current"]
            create_topic_zk(cluster.zookeeper_connect, "latency-profile", PARTITIONS, RF)
            pid = cluster.brokers[0].pid
            assert pid is not None
            with pyspy_record(pid, base / "profile.speedscope.json") as recorded:
                paced_phase(cluster, "latency-profile", args.profile, args.duration, args.warmup_s,
                            measured_groups(servers, "current"), partitions=PARTITIONS, replication_factor=RF,
                            record_size=RECORD_SIZE)
            profile = summarize_speedscope(recorded, 25).format(f"broker 0 at {args.profile:,.0f} records/s")
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    labels = list(dict.fromkeys(row["code"] for row in per_round))
    rows = [median_figures([{k: v for k, v in row.items() if k != "round"} for row in per_round
                            if row["rate"] == rate and row["code"] == label]) for rate in rates for label in labels]
    print()
    print(report(rows))
    if profile:
        print()
        print(profile)
    out = RESULTS / f"replicated-latency-{stamp}.json"
    out.write_text(json.dumps({"started": stamp, "code": code, "cpu_count": os.cpu_count(),
                               "python": sys.version.split()[0], "rounds": rounds,
                               "baseline": {"ref": baseline.ref, "commit": baseline.commit} if baseline else None,
                               "rows": rows, "per_round": per_round, "profile": profile}, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
