"""The request metrics' cost on the produce path, timed on a fixed load: a broker with and one
without ``metrics.port``, alive together, take turns at the same replayed load, and their CPU
per request is compared.

bench/broker_bound.py times brokers under real clients, whose batching follows the broker's
speed, and one pair of brokers differs from the next by about 10%. bench/metrics_instructions.py
counts instructions, which leave out what the real machine adds. This one sits between: the
load is what metrics_instructions.py replays (one-record produce v9, acks=1, 100-byte values,
--per-write requests pipelined on one connection, every answer read before the next write), sent
to the two brokers in turn in chunks of --chunk requests, the order alternating, --pairs times.
A broker's CPU is the sum of its threads' run time (/proc/<pid>/task/*/schedstat, nanoseconds),
read before and after each chunk. Slow spells of the shared machine fall on both brokers of a
pair alike; what differs from one pair of broker processes to the next is averaged by
--generations, each a fresh pair sharing a hash seed (the generation's number).

Reported per generation: CPU us per request of each broker (sums over the pairs) and their
ratio, with metrics over without; then the ratios' median, mean, standard deviation and the
mean's 95% interval.

    .venv/bin/python bench/metrics_replay.py [--generations 8] [--pairs 100] [--chunk 2000]
        [--per-write 200] [--warmup 20000]
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
from odradek.perf.harness import code_version, create_topic_admin

RESULTS = Path(__file__).resolve().parent / "results"
LABELS = ("without", "with")


def cpu_ns(pid: int) -> int:
    """The run time of every thread of ``pid`` so far."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
    return total


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


def generation(base: Path, args: argparse.Namespace) -> dict[str, float]:
    """One fresh pair of brokers: their CPU us per request over the pairs of chunks."""
    burst = b"".join(produce_frame(i) for i in range(args.per_write))
    spent = dict.fromkeys(LABELS, 0)
    with contextlib.ExitStack() as stack:
        socks, pids = {}, {}
        for label in LABELS:
            cluster = stack.enter_context(LocalCluster(base / label, 1, metrics=label == "with"))
            create_topic_admin(cluster.bootstrap_servers, TOPIC, 1, 1)
            host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
            socks[label] = stack.enter_context(socket.create_connection((host, int(port)), timeout=120))
            (broker,) = cluster.brokers.values()
            assert broker.process is not None
            pids[label] = broker.process.pid
            replay(socks[label], burst, args.per_write, args.warmup)
        for n in range(args.pairs):
            for label in LABELS if n % 2 == 0 else LABELS[::-1]:
                before = cpu_ns(pids[label])
                replay(socks[label], burst, args.per_write, args.chunk)
                spent[label] += cpu_ns(pids[label]) - before
    requests = args.pairs * args.chunk
    return {label: spent[label] / requests / 1e3 for label in LABELS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--generations", type=int, default=8, help="fresh pairs of brokers")
    ap.add_argument("--pairs", type=int, default=100, help="chunks each broker takes, in turn, per generation")
    ap.add_argument("--chunk", type=int, default=2000, help="requests in a chunk (a multiple of --per-write)")
    ap.add_argument("--per-write", type=int, default=200, help="requests pipelined in one write")
    ap.add_argument("--warmup", type=int, default=20000, help="requests each broker takes first, not timed")
    args = ap.parse_args()
    if min(args.generations, args.pairs, args.chunk, args.per_write) < 1 or args.warmup < 0:
        ap.error("--generations, --pairs, --chunk and --per-write take numbers from 1, --warmup from 0")
    if args.chunk % args.per_write or args.warmup % args.per_write:
        ap.error("--chunk and --warmup must be multiples of --per-write")
    if not Path("/proc/self/task").is_dir():
        ap.error("needs /proc (Linux) for the brokers' CPU time")
    print(f"one-record produce, {args.per_write} to a write, {args.pairs} pairs of {args.chunk:,}-request chunks, "
          f"{args.generations} generations; broker CPU us per request", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="odradek-metrics-replay-") as tmp:
        for g in range(args.generations):
            os.environ["PYTHONHASHSEED"] = str(g)  # the brokers inherit it
            started = time.monotonic()
            r = generation(Path(tmp) / f"g{g}", args)
            r["ratio"] = r["with"] / r["without"]
            results.append(r)
            print(f"  generation {g + 1}: without {r['without']:.2f}, with {r['with']:.2f}: "
                  f"{r['ratio']:.3f} ({time.monotonic() - started:.0f} s)", flush=True)
    ratios = [r["ratio"] for r in results]
    summary = {"median": statistics.median(ratios), "mean": statistics.mean(ratios)}
    line = f"with/without: median {summary['median']:.3f}, mean {summary['mean']:.3f}"
    if len(ratios) > 1:
        summary["sd"] = statistics.stdev(ratios)
        half = 1.96 * summary["sd"] / len(ratios) ** 0.5
        line += f", sd {summary['sd']:.3f}, 95% interval of the mean {summary['mean'] - half:.3f}-" \
                f"{summary['mean'] + half:.3f}"
    print(line)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = RESULTS / f"metrics-replay-{stamp}.json"
    out.write_text(json.dumps({"started": stamp, "code": code_version(), "python": sys.version.split()[0],
                               "args": vars(args), "generations": results, "summary": summary}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
