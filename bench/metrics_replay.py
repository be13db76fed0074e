"""The request metrics' cost on the produce path, timed on a fixed load: a broker with and one
without ``metrics.port``, alive together, take turns at the same replayed load, and their CPU
per request is compared.

bench/broker_bound.py times brokers under real clients, whose batching follows the broker's
speed, and one pair of brokers differs from the next by about 10%. bench/metrics_instructions.py
counts instructions, which leave out what the real machine adds. This one sits between: the
load is what metrics_instructions.py replays (one-record produce v9, acks=1, 100-byte values,
--per-write requests pipelined on one connection, every answer read before the next write), sent
to the two brokers in turn in chunks of --chunk requests, the order alternating, --pairs times.
A broker's CPU is its CPU-time clock (every thread's run time, exited ones too, in ns),
read before and after each chunk. Slow spells of the shared machine fall on both brokers of a
pair alike; what differs from one pair of broker processes to the next is averaged by
--generations, each a fresh pair sharing a hash seed (the generation's number).

Reported per generation: CPU us per request of each broker (sums over the pairs) and their
ratio, with metrics over without; then the ratios' median, mean, standard deviation and the
mean's 95% interval.

With ``--baseline REF`` a third broker runs commit REF's code with metrics (a temporary git
worktree, perf/baseline.py) beside the two, in the same turns (the order rotating, each broker
first as often as the others): REF's with/without ratio is reported too, and the current
code's with metrics over REF's, which is how a redesign of the metrics is told from what it
replaces on one machine state.

    .venv/bin/python bench/metrics_replay.py [--generations 8] [--pairs 100] [--chunk 2000]
        [--per-write 200] [--warmup 20000] [--baseline REF]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

from metrics_instructions import TOPIC, produce_frame

from odradek.local.cluster import LocalCluster
from odradek.perf.baseline import BaselineCluster, Checkout, checkout
from odradek.perf.common import PerfError
from odradek.perf.harness import code_version, create_topic_admin
from odradek.perf.sysstat import process_cpu_ns

RESULTS = Path(__file__).resolve().parent / "results"
LABELS = ("without", "with")
BASELINE = "baseline with"


def replay(sock: socket.socket, burst: bytes, per_write: int, requests: int) -> None:
    """Send ``burst`` (``per_write`` frames) until ``requests`` requests are answered."""
    buffered = bytearray()
    for _ in range(requests // per_write):
        sock.sendall(burst)
        answered = 0
        while answered < per_write:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buffered += chunk
            position = 0
            while len(buffered) - position >= 4:
                (size,) = struct.unpack_from(">i", buffered, position)
                if len(buffered) - position - 4 < size:
                    break
                position += 4 + size
                answered += 1
            del buffered[:position]


def generation(base: Path, args: argparse.Namespace, baseline: Checkout | None) -> dict[str, float]:
    """One fresh set of brokers: their CPU us per request over the turns."""
    burst = b"".join(produce_frame(i) for i in range(args.per_write))
    labels = [*LABELS, BASELINE] if baseline is not None else list(LABELS)
    spent = dict.fromkeys(labels, 0)
    with contextlib.ExitStack() as stack:
        socks, pids = {}, {}
        for label in labels:
            if label == BASELINE:
                assert baseline is not None
                cluster: LocalCluster = BaselineCluster(baseline, base / "baseline", 1, metrics=True)
            else:
                cluster = LocalCluster(base / label, 1, metrics=label == "with")
            stack.enter_context(cluster)
            create_topic_admin(cluster.bootstrap_servers, TOPIC, 1, 1)
            host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
            socks[label] = stack.enter_context(socket.create_connection((host, int(port)), timeout=120))
            (broker,) = cluster.brokers.values()
            assert broker.process is not None
            pids[label] = broker.process.pid
            replay(socks[label], burst, args.per_write, args.warmup)
        for n in range(args.pairs):
            for label in turn_order(labels, n):
                before = process_cpu_ns(pids[label])
                replay(socks[label], burst, args.per_write, args.chunk)
                spent[label] += process_cpu_ns(pids[label]) - before
    requests = args.pairs * args.chunk
    return {label: spent[label] / requests / 1e3 for label in labels}


def turn_order(labels: list[str], n: int) -> list[str]:
    """The order of turn ``n``: rotated by one each turn and reversed every other cycle, so
    that over two cycles each broker runs first as often as the others, and before each other
    one as often as after it (two brokers: A B, B A, B A, A B)."""
    k = n % len(labels)
    order = labels[k:] + labels[:k]
    return order[::-1] if (n // len(labels)) % 2 else order


def summarize(ratios: list[float]) -> tuple[dict[str, float], str]:
    """Median, mean and (of two or more) the sd and the mean's 95% interval, and as a line."""
    summary = {"median": statistics.median(ratios), "mean": statistics.mean(ratios)}
    line = f"median {summary['median']:.3f}, mean {summary['mean']:.3f}"
    if len(ratios) > 1:
        summary["sd"] = statistics.stdev(ratios)
        half = 1.96 * summary["sd"] / len(ratios) ** 0.5
        line += f", sd {summary['sd']:.3f}, 95% interval of the mean {summary['mean'] - half:.3f}-" \
                f"{summary['mean'] + half:.3f}"
    return summary, line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--generations", type=int, default=8, help="fresh pairs of brokers")
    ap.add_argument("--pairs", type=int, default=100, help="chunks each broker takes, in turn, per generation")
    ap.add_argument("--chunk", type=int, default=2000, help="requests in a chunk (a multiple of --per-write)")
    ap.add_argument("--per-write", type=int, default=200, help="requests pipelined in one write")
    ap.add_argument("--warmup", type=int, default=20000, help="requests each broker takes first, not timed")
    ap.add_argument("--baseline", metavar="REF", help="also a broker of commit REF with metrics, in the same turns")
    args = ap.parse_args()
    if min(args.generations, args.pairs, args.chunk, args.per_write) < 1 or args.warmup < 0:
        ap.error("--generations, --pairs, --chunk and --per-write take numbers from 1, --warmup from 0")
    if args.chunk % args.per_write or args.warmup % args.per_write:
        ap.error("--chunk and --warmup must be multiples of --per-write")
    if not Path("/proc/self/task").is_dir():
        ap.error("needs /proc (Linux) for the brokers' CPU time")
    with contextlib.ExitStack() as stack:
        baseline = None
        if args.baseline is not None:
            try:
                baseline = stack.enter_context(checkout(Path(__file__).resolve().parents[1], args.baseline))
            except PerfError as e:
                ap.error(f"--baseline {args.baseline}: {e}")
        run(args, baseline)


def run(args: argparse.Namespace, baseline: Checkout | None) -> None:
    against = f", beside {baseline.ref} ({baseline.commit}) with metrics" if baseline is not None else ""
    print(f"one-record produce, {args.per_write} to a write, {args.pairs} turns of {args.chunk:,}-request chunks, "
          f"{args.generations} generations{against}; broker CPU us per request", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="odradek-metrics-replay-") as tmp:
        for g in range(args.generations):
            os.environ["PYTHONHASHSEED"] = str(g)  # the brokers inherit it
            started = time.monotonic()
            r = generation(Path(tmp) / f"g{g}", args, baseline)
            r["ratio"] = r["with"] / r["without"]
            line = f"  generation {g + 1}: without {r['without']:.2f}, with {r['with']:.2f}: {r['ratio']:.3f}"
            if baseline is not None:
                r["baseline ratio"] = r[BASELINE] / r["without"]
                r["with/baseline"] = r["with"] / r[BASELINE]
                line += f"; {baseline.ref} with {r[BASELINE]:.2f}: {r['baseline ratio']:.3f}"
            results.append(r)
            print(f"{line} ({time.monotonic() - started:.0f} s)", flush=True)
    summary, line = summarize([r["ratio"] for r in results])
    print(f"with/without: {line}")
    summaries = {"with/without": summary}
    if baseline is not None:
        for key, title in (("baseline ratio", f"{baseline.ref} with/without"),
                           ("with/baseline", f"with/{baseline.ref} with")):
            summaries[title], line = summarize([r[key] for r in results])
            print(f"{title}: {line}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = RESULTS / f"metrics-replay-{stamp}.json"
    out.write_text(json.dumps({"started": stamp, "code": code_version(), "python": sys.version.split()[0],
                               "args": vars(args), "baseline": baseline.commit if baseline is not None else None,
                               "generations": results, "summary": summaries["with/without"],
                               "summaries": summaries}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
