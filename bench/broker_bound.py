"""The broker measured, not the client (issue 14, benchmark 1): one odradek broker and one Tansu
broker, side by side in one run, loaded by several confluent-kafka processes so that no single
Python client loop sets the pace.

Phases, on each broker in turn (100-byte records, a topic of --partitions partitions):

1. unbatched produce: --clients producer processes, ``linger.ms=0``, ``acks=1``, as fast as they
   go for --seconds (librdkafka still puts the records queued while a request is in flight
   into the next one), and the same with ``batch.num.messages=1``: one record per request,
   what a producer sending one record at a time costs the broker;
2. batched produce: the same with ``linger.ms=5``, ``batch.size=1000000``;
3. fetch: --clients consumer processes read what phase 1 wrote from the start, with small
   fetches (``fetch.max.bytes`` / ``max.partition.fetch.bytes`` 16 KiB), for --seconds.

Requests are counted by the clients themselves (librdkafka's statistics: requests sent per
broker and type), the broker's CPU from /proc. Reported per phase: requests/s, records/s, broker
CPU seconds per second, requests per broker CPU-second, broker CPU microseconds per request,
and odradek / Tansu ratios; and where the machine's CPU went (perf/sysstat.py): the broker's,
ZooKeeper's, the other idle servers', the clients' and everyone else's CPU-seconds per second,
steal and the load average.

With ``--metrics`` the current broker serves /metrics (``metrics.port``) and a thread here
scrapes it every 15 s, as Prometheus would; ``--metrics --baseline HEAD --no-tansu`` is then
the metrics' cost (after/before: the same code with and without them).

With ``--baseline REF`` the brokers of commit REF (a temporary git worktree, perf/baseline.py)
run beside the current ones; --rounds rounds (default 3) take turns between them phase by
phase, and every figure is reported as the median over the rounds with after/before ratios.
``--no-tansu`` leaves Tansu out.

With ``--generations G`` all of that runs G times, each time with brokers started afresh. A
broker process has its own luck (where its objects landed in memory, its hash seed), which
moves its CPU per request by several per cent for as long as it lives, so rounds against one
pair of processes can agree with each other and still be off; across generations that luck
averages out. The brokers of one generation share a hash seed (``PYTHONHASHSEED``: the
generation's number), so that part of the luck is the same on both sides of each ratio. The
after/before ratio of CPU per request is then listed per generation, with their median, mean
and standard deviation.

With ``--together`` the brokers are not loaded in turns but all at once, each by its own
--clients processes, so that both sides of each round's ratio share the moment and what else
the machine (and the host under it) does then. In turns, one broker's CPU per request swings
by 10% and more from one 4-s round to the next on this machine, which is what limits them;
loaded together the brokers compete for the same CPUs, as evenly as the scheduler shares them.

With ``--rate R`` the producers of every produce phase are paced: R records a second to each
broker in all (as fast as they go when the broker cannot take that many), instead of as fast as
they go. Unpaced, the clients take nearly both CPUs and the brokers wait for theirs, and how the
records fall into requests then moves with the moment's scheduling (a broker kept waiting gets
fewer, bigger requests), so its CPU per request swings from round to round; paced below the
machine's capacity, both brokers of a round get the same records at the same pace.

``--phases`` runs only the phases named (comma-separated: unbatched, one-record, batched,
fetch; fetch reads what unbatched wrote, so it needs it).

    .venv/bin/python bench/broker_bound.py [--clients 3] [--seconds 10] [--partitions 6]
        [--phases unbatched,one-record,batched,fetch] [--metrics]
        [--rate R] [--baseline REF [--rounds 3] [--generations 1] [--no-tansu] [--together]]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

from odradek.local.cluster import LocalCluster
from odradek.perf.baseline import (
    BaselineCluster,
    Checkout,
    checkout,
    in_turn,
    median_figures,
    ratio,
)
from odradek.perf.harness import TansuBroker, code_version, create_topic_admin, unwind_on_sigterm
from odradek.perf.load import RECORD_SIZE, run_clients
from odradek.perf.sysstat import (
    USAGE_HEAD,
    cluster_groups,
    format_usage,
    measured_groups,
    usage_cells,
)

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
UNBATCHED = {"linger.ms": 0, "acks": "1"}
ONE_RECORD = {"linger.ms": 0, "acks": "1", "batch.num.messages": 1}
BATCHED = {"linger.ms": 5, "acks": "1", "batch.size": 1_000_000, "batch.num.messages": 10_000}
SMALL_FETCH = {"fetch.max.bytes": 16384, "max.partition.fetch.bytes": 16384, "message.max.bytes": 16384,
               "fetch.wait.max.ms": 100}
# Phase -> producer settings (None: consumers, reading what the unbatched phase wrote).
PHASES: dict[str, dict | None] = {"unbatched produce": UNBATCHED, "one-record produce": ONE_RECORD,
                                  "batched produce": BATCHED, "fetch": None}


def _figures(r: dict) -> tuple[float, ...]:
    return (r["records_per_s"], r["requests_per_s"], r["broker_cpu_s"] / r["seconds"], r["requests_per_cpu_s"],
            r["cpu_us_per_request"], r["records_per_cpu_s"])


def _align(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                     for r in rows)


def report(results: dict[str, dict[str, dict]], phases: Iterable[str]) -> str:
    """The figures of each broker per phase, odradek/Tansu and after/before (current/baseline)
    ratios of each, then where the CPU went."""
    rows = [("phase", "broker", "records/s", "requests/s", "CPU s/s", "req per CPU-s", "CPU us/req",
             "records per CPU-s")]
    comparisons = [(label, a, b) for label, a, b in (("odradek/tansu", "odradek", "tansu"),
                                                    ("after/before", "odradek", "baseline"))
                   if a in results and b in results]
    for phase in phases:
        for broker in results:
            r = results[broker][phase]
            rows.append((phase, broker, f"{r['records_per_s']:,.0f}", f"{r['requests_per_s']:,.0f}",
                         f"{r['broker_cpu_s'] / r['seconds']:.2f}", f"{r['requests_per_cpu_s']:,.0f}",
                         f"{r['cpu_us_per_request']:,.0f}", f"{r['records_per_cpu_s']:,.0f}"))
        for label, a, b in comparisons:
            rows.append((phase, label, *(f"{ratio(x, y):.2f}" for x, y in
                                         zip(_figures(results[a][phase]), _figures(results[b][phase]), strict=True))))
    usage = [("phase", "broker (CPU s/s)", *USAGE_HEAD)]
    usage += [(phase, broker, *usage_cells(results[broker][phase]["usage"])) for phase in phases for broker in results]
    note = ("\nafter/before: current / baseline, medians over the rounds (above 1: more per second, more per "
            "CPU-second; for CPU s/s and CPU us/req, more CPU)" if "baseline" in results else "")
    return _align(rows) + note + "\n\n" + _align(usage)


class Scraper:
    """Fetches each /metrics every ``interval_s`` in a thread, as Prometheus would, while in use."""

    def __init__(self, urls: list[str], interval_s: float = 15.0) -> None:
        self.urls = urls
        self.interval_s = interval_s
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-scraper", daemon=True)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        print(f"{self.scrapes} scrapes of /metrics", flush=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for url in self.urls:
                with urllib.request.urlopen(url, timeout=10) as response:
                    response.read()
                self.scrapes += 1


def run_generation(args: argparse.Namespace, base: Path, rounds: range, phases: dict[str, dict | None],
                   baseline: Checkout | None) -> dict[str, dict[str, list[dict]]]:
    """Start the brokers, run ``rounds`` (round numbers: they set the turns, see in_turn) of
    each of ``phases`` on each, stop them. Returns the results by broker and phase, a list of rounds each."""
    mine: dict[str, dict[str, list[dict]]] = {}
    with ExitStack() as stack:
        servers: dict[str, tuple[str, dict[str, list[int]]]] = {}
        cluster = stack.enter_context(LocalCluster(base / "odradek", 1, metrics=args.metrics))
        if args.metrics:
            stack.enter_context(Scraper([cluster.metrics_url(b) for b in cluster.brokers.values()]))
        servers["odradek"] = (cluster.bootstrap_servers, cluster_groups(cluster))
        if baseline is not None:
            old = stack.enter_context(BaselineCluster(baseline, base / "baseline", 1))
            servers["baseline"] = (old.bootstrap_servers, cluster_groups(old))
        if not args.no_tansu:
            tansu = stack.enter_context(TansuBroker(base / "tansu.log"))
            servers["tansu"] = (tansu.bootstrap_servers, {"brokers": [tansu.pid]})
        all_groups = {n: g for n, (_, g) in servers.items()}  # the processes measured, by broker
        for r in rounds:
            for phase, settings in phases.items():
                names = in_turn(list(servers), r)
                if settings is None:
                    topic = f"bound-unbatched-{r}"  # what this round's unbatched phase wrote
                else:
                    topic = f"bound-{phase.split()[0]}-{r}"
                    for name in names:
                        create_topic_admin(servers[name][0], topic, args.partitions, 1)
                runs = [functools.partial(run_clients, servers[name][0], measured_groups(all_groups, name), topic,
                                          args.clients, args.seconds, producer=settings, consumer=SMALL_FETCH,
                                          rate=args.rate)
                        for name in names]
                if args.together:  # every broker loaded at once, each by its own clients
                    with ThreadPoolExecutor(len(runs)) as pool:
                        results = list(pool.map(lambda run: run(), runs))
                else:
                    results = [run() for run in runs]
                for name, result in zip(names, results, strict=True):
                    mine.setdefault(name, {}).setdefault(phase, []).append(result)
                    print(f"  round {r + 1} {name} {phase}: {result['requests_per_cpu_s']:,.0f} requests per "
                          f"broker CPU-s; {format_usage(result['usage'])}", flush=True)
    return mine


def generation_ratios(generations: list[dict[str, dict[str, list[dict]]]],
                      phases: Iterable[str]) -> dict[str, list[float]]:
    """Per phase, each generation's after/before ratio of broker CPU per request (medians over
    its rounds)."""
    def cpu_us(runs: list[dict]) -> float:
        return statistics.median(r["cpu_us_per_request"] for r in runs)

    return {phase: [ratio(cpu_us(g["odradek"][phase]), cpu_us(g["baseline"][phase])) for g in generations]
            for phase in phases}


def report_generations(ratios: dict[str, list[float]]) -> str:
    rows = [("phase", "CPU us/req after/before, each generation", "median", "mean", "sd")]
    for phase, values in ratios.items():
        sd = statistics.stdev(values) if len(values) > 1 else float("nan")
        rows.append((phase, " ".join(f"{v:.3f}" for v in values), f"{statistics.median(values):.3f}",
                     f"{statistics.mean(values):.3f}", f"{sd:.3f}"))
    return _align(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=3, help="client processes per phase")
    ap.add_argument("--seconds", type=float, default=10, help="seconds per phase")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--baseline", metavar="REF", help="also run the brokers of commit REF, in turns with the current ones")
    ap.add_argument("--rounds", type=int, help="rounds of every phase on every broker (default: 3 with --baseline, else 1)")
    ap.add_argument("--generations", type=int, default=1,
                    help="start the brokers afresh this many times, --rounds rounds each (with --baseline)")
    ap.add_argument("--no-tansu", action="store_true", help="leave Tansu out (with --baseline)")
    ap.add_argument("--together", action="store_true",
                    help="load every broker at once, each with its own --clients processes, instead of in turns")
    ap.add_argument("--phases", default=",".join(phase.split()[0] for phase in PHASES),
                    help="the phases to run, comma-separated (default: all)")
    ap.add_argument("--rate", type=float, help="pace each produce phase's producers: this many records a second to "
                    "each broker, in all (default: as fast as they go)")
    ap.add_argument("--dir", help="working directory (default: a temporary one, removed afterwards)")
    ap.add_argument("--metrics", action="store_true",
                    help="the current broker serves /metrics, scraped every 15 s (with --baseline HEAD: their cost)")
    args = ap.parse_args()
    if args.no_tansu and not args.baseline:
        ap.error("--no-tansu leaves nothing to compare with without --baseline")
    if args.rate is not None and args.rate <= 0:
        ap.error("--rate takes a number of records a second above 0")
    if args.generations < 1 or (args.generations > 1 and not args.baseline):
        ap.error("--generations takes a number from 1, and more than 1 only with --baseline")
    by_word = {phase.split()[0]: phase for phase in PHASES}
    wanted = args.phases.split(",")
    if not wanted or any(word not in by_word for word in wanted):
        ap.error(f"--phases takes some of {', '.join(by_word)}, comma-separated")
    if "fetch" in wanted and "unbatched" not in wanted:
        ap.error("--phases: fetch reads what unbatched wrote, so it needs unbatched")
    phases = {phase: settings for phase, settings in PHASES.items() if phase.split()[0] in wanted}
    rounds = args.rounds or (3 if args.baseline else 1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(args.dir or tempfile.mkdtemp(prefix="odradek-bound-bench-"))
    code = code_version()
    baseline = None
    generations: list[dict[str, dict[str, list[dict]]]] = []
    with ExitStack() as stack:
        if args.baseline:
            baseline = stack.enter_context(checkout(REPO, args.baseline))
        print(f"{args.clients} client processes, {args.seconds:.0f} s per phase, {args.partitions} partitions, "
              f"{RECORD_SIZE}-byte records"
              + (f", produce paced at {args.rate:,.0f} records/s a broker" if args.rate else "")
              + f", {rounds} round(s) x {args.generations} generation(s); "
              f"load average {os.getloadavg()[0]:.2f}; code {code['commit']}"
              + (f", baseline {baseline.ref} = {baseline.commit}" if baseline else "")
              + ("; brokers loaded together" if args.together else "; brokers loaded in turns"), flush=True)
        for g in range(args.generations):
            if args.generations > 1:
                print(f" generation {g + 1}: brokers started afresh", flush=True)
            numbers = range(g * rounds, (g + 1) * rounds)  # the turns go on alternating across generations
            if args.generations > 1:  # the brokers (started from here) of a generation share a hash seed
                os.environ["PYTHONHASHSEED"] = str(g + 1)
            generations.append(run_generation(args, base / f"generation-{g + 1}", numbers, phases, baseline))
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    per_round = {name: {phase: [run for g in generations for run in g[name][phase]] for phase in phases}
                 for name in generations[0]}
    results = {name: {phase: median_figures(runs) for phase, runs in phases.items()}
               for name, phases in per_round.items()}
    ratios = generation_ratios(generations, phases) if baseline is not None else None
    print()
    print(report(results, phases))
    if ratios is not None and args.generations > 1:
        print("\n" + report_generations(ratios))
    out = RESULTS / f"broker-bound-{stamp}.json"
    out.write_text(json.dumps({"started": stamp, "code": code, "clients": args.clients, "seconds": args.seconds,
                               "partitions": args.partitions, "rate": args.rate, "cpu_count": os.cpu_count(),
                               "python": sys.version.split()[0], "rounds": rounds, "generations": args.generations,
                               "together": args.together,
                               "baseline": {"ref": baseline.ref, "commit": baseline.commit} if baseline else None,
                               "results": results, "generation_ratios": ratios, "per_round": per_round},
                              indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
