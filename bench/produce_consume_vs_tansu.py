"""odradek vs Tansu, side by side in one invocation.

One odradek broker (a 1-broker LocalCluster with its embedded ZooKeeper) and one Tansu broker
(`--storage-engine memory://tansu/`) run at the same time; each phase loads one of them while
the other idles.  For 1 and 6 partitions, 100-byte records, acks=1, the same producer and
consumer (`odradek perf produce|consume`, each its own process) run against both:

    produce  N records, then   consume  the same N records from the beginning

and the table shows records/s, MB/s (2^20 bytes of record values, as Kafka's tools count),
the ratio odradek/Tansu, and broker CPU seconds per GB (utime+stime of the broker process
from /proc/<pid>/stat before and after the phase, per 2^30 bytes of record values; for
odradek the broker process only, not ZooKeeper).  The order of the two brokers alternates
between partition counts, and each phase is preceded by a short warm-up on its own topic.

Client settings (identical for both brokers):
    producer: acks=1 linger.ms=5 batch.size=1000000 batch.num.messages=10000
              compression.type=none  (the last three are librdkafka's defaults, stated)
    consumer: assign() from the beginning, max.partition.fetch.bytes=1048576 (Kafka's
              --fetch-size default), fetch.queue.backoff.ms=1 (the perf tool's default)

With --profile, after the measured phases, the odradek broker is sampled with py-spy during
an extra produce phase and an extra consume phase (6 partitions), then with perf during two
more; speedscope files and
a top-functions summary land in bench/results/; where Linux `perf` is installed and
permitted, a perf.data file (CPU samples of the broker, user and kernel) is recorded too and
summarised by shared object, native function and syscall.  The measured phases are not
profiled; py-spy samples the thread holding the GIL (see odradek.perf.harness.pyspy_record).

    .venv/bin/python bench/produce_consume_vs_tansu.py [--records 2000000] [--rounds 3] [--profile]

With --baseline SRC the peer is not Tansu but a second odradek broker running the source tree
SRC (e.g. a `git worktree add /tmp/base <commit>` of an earlier commit), so a change is measured
against the code before it side by side, with the same clients (this tree's perf tools) for both:

    git worktree add --detach /tmp/base <commit>
    .venv/bin/python bench/produce_consume_vs_tansu.py --rounds 4 --baseline /tmp/base/src
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from odradek.local.cluster import LocalCluster
from odradek.perf.harness import (
    TansuBroker,
    code_version,
    create_topic_admin,
    create_topic_zk,
    perf_record,
    pyspy_record,
    run_perf,
    summarize_perf,
    summarize_speedscope,
    unwind_on_sigterm,
)
from odradek.perf.sysstat import process_cpu_seconds

RESULTS = Path(__file__).resolve().parent / "results"
GB = float(1 << 30)
PRODUCER_PROPS = ["acks=1", "linger.ms=5", "batch.size=1000000", "batch.num.messages=10000",
                  "compression.type=none"]
FETCH_SIZE = 1024 * 1024


class Target:
    """A broker under test: how to reach it, whose CPU to read, how to make a topic."""

    def __init__(self, name: str, bootstrap: str, pid: int, create) -> None:  # type: ignore[no-untyped-def]
        self.name = name
        self.bootstrap = bootstrap
        self.pid = pid
        self.create = create


def produce(target: Target, topic: str, records: int, record_size: int,
            extra_props: list[str]) -> dict[str, object]:
    cpu0 = process_cpu_seconds(target.pid)
    result = run_perf("produce", ["--bootstrap-server", target.bootstrap, "--topic", topic,
                                  "--num-records", str(records), "--record-size", str(record_size),
                                  "--throughput", "-1", "--producer-props", *PRODUCER_PROPS, *extra_props])
    result["broker_cpu_s"] = process_cpu_seconds(target.pid) - cpu0
    return result


def consume(target: Target, topic: str, records: int) -> dict[str, object]:
    cpu0 = process_cpu_seconds(target.pid)
    result = run_perf("consume", ["--bootstrap-server", target.bootstrap, "--topic", topic,
                                  "--messages", str(records), "--fetch-size", str(FETCH_SIZE)])
    result["broker_cpu_s"] = process_cpu_seconds(target.pid) - cpu0
    return result


def cpu_per_gb(result: dict[str, object]) -> float:
    return float(result["broker_cpu_s"]) / (float(result["bytes"]) / GB)  # type: ignore[arg-type]


def run_config(targets: list[Target], partitions: int, records: int, record_size: int,
               warmup: int, extra_props: list[str], label: str) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for target in targets:
        warm = f"warmup-{label}-p{partitions}"
        topic = f"bench-{label}-p{partitions}"
        target.create(warm, partitions)
        target.create(topic, partitions)
        if warmup:
            produce(target, warm, warmup, record_size, extra_props)
            consume(target, warm, warmup)
        p = produce(target, topic, records, record_size, extra_props)
        c = consume(target, topic, records)
        if int(c["records"]) != records or int(c["bytes"]) != records * record_size:  # type: ignore[call-overload]
            raise SystemExit(f"{target.name}: consumed {c['records']} records / {c['bytes']} bytes, "
                             f"expected {records} / {records * record_size}")
        out[target.name] = {"produce": p, "consume": c}
        print(f"  {target.name:8} p={partitions}: produce {p['records_per_sec']:>10,.0f} rec/s "
              f"(broker {p['broker_cpu_s']:.1f} s CPU, client {p['client_cpu_s']:.1f} s), "
              f"consume {c['records_per_sec']:>10,.0f} rec/s "
              f"(broker {c['broker_cpu_s']:.1f} s CPU, client {c['client_cpu_s']:.1f} s)", flush=True)
    return out


def table(results: dict[int, dict[str, dict[str, object]]], peer: str) -> str:
    head = (f"{'phase':8} {'parts':>5} | {'odradek rec/s':>13} {'MB/s':>7} | {peer + ' rec/s':>11} "
            f"{'MB/s':>7} | {'ratio':>5} | {'odr CPU s/GB':>12} {peer + ' CPU s/GB':>14} {'ratio':>5}")
    lines = [head, "-" * len(head)]
    for partitions, by_broker in results.items():
        for phase in ("produce", "consume"):
            o, t = by_broker["odradek"][phase], by_broker[peer][phase]
            oc, tc = cpu_per_gb(o), cpu_per_gb(t)
            lines.append(
                f"{phase:8} {partitions:>5} | {o['records_per_sec']:>13,.0f} {o['mb_per_sec']:>7.1f} | "
                f"{t['records_per_sec']:>11,.0f} {t['mb_per_sec']:>7.1f} | "
                f"{float(o['records_per_sec']) / float(t['records_per_sec']):>5.2f} | "  # type: ignore[arg-type]
                f"{oc:>12.1f} {tc:>14.1f} {oc / tc if tc else float('inf'):>5.2f}")
    return "\n".join(lines)


def ratio_summary(rounds: list[dict[int, dict[str, dict[str, object]]]], peer: str) -> str:
    """Per phase: every round's odradek/peer records/s ratio and their median."""
    lines = [f"odradek/{peer} records/s over {len(rounds)} rounds (each measured side by side):"]
    for partitions in rounds[0]:
        for phase in ("produce", "consume"):
            ratios = [float(rnd[partitions]["odradek"][phase]["records_per_sec"])  # type: ignore[arg-type]
                      / float(rnd[partitions][peer][phase]["records_per_sec"])  # type: ignore[arg-type]
                      for rnd in rounds]
            lines.append(f"  {phase:8} p={partitions}: median {statistics.median(ratios):.2f}  "
                         f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)})")
    return "\n".join(lines)


def profile(odradek: Target, records: int, record_size: int, extra_props: list[str],
            stamp: str) -> dict[str, object]:
    partitions = 6
    runs = itertools.count()

    def run_phase(phase: str) -> dict[str, object]:
        if phase == "produce":
            topic = f"profile-{stamp}-{next(runs)}-p{partitions}"
            odradek.create(topic, partitions)
            topics.append(topic)
            return produce(odradek, topic, records, record_size, extra_props)
        return consume(odradek, topics.pop(0), records)

    topics: list[str] = []
    out: dict[str, object] = {}
    for phase in ("produce", "consume"):
        # Two runs per phase: py-spy pauses the broker for every sample, which would show in
        # perf's view as scheduler and futex time.
        path = RESULTS / f"odradek-broker-{phase}-{stamp}.speedscope.json"
        with pyspy_record(odradek.pid, path):
            r = run_phase(phase)
        summary = summarize_speedscope(path)
        print(summary.format(f"\nodradek broker, {phase}, {partitions} partitions, py-spy ({path.name}): "
                             f"{r['records_per_sec']:,.0f} rec/s while sampled, broker CPU "
                             f"{r['broker_cpu_s']:.2f} s"))
        out[phase] = {"speedscope": str(path), "records_per_sec": r["records_per_sec"],
                      "broker_cpu_s": r["broker_cpu_s"], "sampled_s": summary.sampled_s,
                      "self_top": summary.self_top, "inclusive_top": summary.inclusive_top}
        native_path = RESULTS / f"odradek-broker-{phase}-{stamp}.perf.data"
        with perf_record(odradek.pid, native_path) as native:
            if native is None:
                continue
            r = run_phase(phase)
        np = summarize_perf(native)
        print(np.format(f"odradek broker, {phase}, perf ({native.name}): {r['records_per_sec']:,.0f} rec/s "
                        f"while sampled, broker CPU {r['broker_cpu_s']:.2f} s"))
        out[phase].update(perf_data=str(native), perf_records_per_sec=r["records_per_sec"],  # type: ignore[union-attr]
                          perf_broker_cpu_s=r["broker_cpu_s"], perf_dsos=np.dsos,
                          perf_symbols=np.symbols, perf_kernel=np.kernel_paths)
    return out


def odradek_target(cluster: LocalCluster, name: str) -> Target:
    broker = next(iter(cluster.brokers.values()))
    assert broker.pid is not None
    zk = cluster.zookeeper_connect
    return Target(name, cluster.bootstrap_servers, broker.pid, lambda t, n: create_topic_zk(zk, t, n, 1))


@contextlib.contextmanager
def baseline_cluster(directory: Path, src: str):  # type: ignore[no-untyped-def]
    """A 1-broker LocalCluster whose broker runs the source tree ``src`` (its processes inherit
    PYTHONPATH, which is set only while they start)."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(Path(src).resolve())
    try:
        cluster = LocalCluster(directory, 1).__enter__()
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before
    try:
        yield cluster
    finally:
        cluster.__exit__(None, None, None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000, help="records per measured phase")
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--partitions", default="1,6", help="comma-separated partition counts")
    ap.add_argument("--warmup", type=int, default=200_000, help="warm-up records before each phase (0: none)")
    ap.add_argument("--producer-props", nargs="*", default=[], help="extra producer properties (both brokers)")
    ap.add_argument("--profile", action="store_true", help="py-spy the odradek broker in extra phases")
    ap.add_argument("--profile-records", type=int, default=None, help="records per profiled phase")
    ap.add_argument("--dir", help="working directory (default: a temporary one, removed afterwards)")
    ap.add_argument("--baseline", metavar="SRC",
                    help="compare with an odradek broker run from this source tree instead of Tansu")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat every phase this many times (the order of the brokers alternates) "
                         "and report each round's ratios and their median")
    args = ap.parse_args()

    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(args.dir or tempfile.mkdtemp(prefix="odradek-vs-tansu-"))
    base.mkdir(parents=True, exist_ok=True)
    counts = [int(p) for p in args.partitions.split(",")]
    code = code_version()
    print(f"records/phase {args.records:,} x {args.record_size} B; producer {' '.join(PRODUCER_PROPS + args.producer_props)}; "
          f"consumer fetch-size {FETCH_SIZE}; load average {os.getloadavg()[0]:.2f}; work dir {base}; "
          f"code {code['commit']}{' + uncommitted ' + ', '.join(code['dirty']) if code['dirty'] else ''}",  # type: ignore[arg-type]
          flush=True)

    with contextlib.ExitStack() as stack:
        odradek = odradek_target(stack.enter_context(LocalCluster(base / "odradek", 1)), "odradek")
        if args.baseline:
            peer = odradek_target(stack.enter_context(baseline_cluster(base / "baseline", args.baseline)),
                                  "baseline")
        else:
            tansu = stack.enter_context(TansuBroker(base / "tansu.log"))
            peer = Target("tansu", tansu.bootstrap_servers, tansu.pid,
                          lambda t, n: create_topic_admin(tansu.bootstrap_servers, t, n, 1))
        rounds: list[dict[int, dict[str, dict[str, object]]]] = []
        for r in range(args.rounds):
            results: dict[int, dict[str, dict[str, object]]] = {}
            for i, partitions in enumerate(counts):
                order = [odradek, peer] if (i + r) % 2 == 0 else [peer, odradek]
                results[partitions] = run_config(order, partitions, args.records, args.record_size, args.warmup,
                                                 args.producer_props, f"{stamp.replace('-', '')}r{r}")
            rounds.append(results)
            print()
            print(f"round {r + 1} of {args.rounds}" if args.rounds > 1 else "", end="\n" if args.rounds > 1 else "")
            print(table(results, peer.name))
        if args.rounds > 1:
            print()
            print(ratio_summary(rounds, peer.name))
        profiles = None
        if args.profile:
            profiles = profile(odradek, args.profile_records or args.records, args.record_size,
                               args.producer_props, stamp.replace("-", ""))

    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    out = RESULTS / f"produce_consume_vs_tansu-{stamp}.json"
    out.write_text(json.dumps({
        "started": stamp, "code": code, "records": args.records, "record_size": args.record_size,
        "producer_props": PRODUCER_PROPS + args.producer_props, "fetch_size": FETCH_SIZE,
        "cpu_count": os.cpu_count(), "python": sys.version.split()[0], "peer": peer.name,
        "baseline": args.baseline,
        "results": {str(k): v for k, v in rounds[0].items()},
        "rounds": [{str(k): v for k, v in rnd.items()} for rnd in rounds], "profiles": profiles,
    }, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
