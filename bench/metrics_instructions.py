"""The request metrics' cost on the produce path, counted instead of timed: one broker under
valgrind's cachegrind, with and without ``metrics.port``, in one run.

bench/broker_bound.py measures broker CPU per request under real clients, and on this shared
machine one pair of brokers differs from the next by about 10% (its A/A runs), so a cost of
a few per cent needs dozens of broker pairs to show. Here the same work is counted: the
instructions the broker executes and the first- and last-level cache misses cachegrind
simulates, which do not depend on what else the machine runs. The load is what librdkafka
sends in broker_bound's one-record produce phase: one-record produce requests (100-byte
values, acks=1), pipelined --per-write at a time on one connection. Each broker runs twice,
for --warmup requests and for --warmup + --requests, so the difference is --requests
requests' worth with start-up, warm-up and shutdown taken out; both brokers run with the same
hash seed.

Reported per request, with metrics off and on and their ratio: instructions (Ir), L1
instruction and data misses, last-level misses, and an estimate of cycles from cachegrind's
counts (Ir + 10 per L1 miss + 100 per last-level miss, a rough model: branch mispredictions
and the real machine's caches are not in it). With --branch-sim, cachegrind also simulates branch
prediction, and the conditional and indirect branches are reported with their mispredictions
(Bc, Bcm, Bi, Bim; the runs take about a third longer). Needs valgrind (Debian's package).

    .venv/bin/python bench/metrics_instructions.py [--requests 5000] [--warmup 1000] [--per-write 200]
        [--branch-sim] [--dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import re
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from odradek.local.cluster import BrokerProcess, LocalCluster, recv_exactly
from odradek.perf.harness import code_version, create_topic_admin
from odradek.protocol.framing import encode_request
from odradek.protocol.records import SimpleRecord, build_batch

RESULTS = Path(__file__).resolve().parent / "results"
TOPIC = "instructions"
HASH_SEED = "1"
# cachegrind's events, summed into the per-request figures reported.
L1_MISSES = ("I1mr", "D1mr", "D1mw")
LL_MISSES = ("ILmr", "DLmr", "DLmw")


class CachegrindCluster(LocalCluster):
    """A one-broker cluster whose broker runs under cachegrind, writing its counts to ``out``."""

    start_timeout_s = 900.0

    def __init__(self, directory: Path, out: Path, *, metrics: bool, branch_sim: bool = False) -> None:
        super().__init__(directory, 1, metrics=metrics)
        self.out = out
        self.branch_sim = branch_sim

    def broker_command_prefix(self, broker: BrokerProcess) -> list[str]:
        return ["valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--branch-sim={'yes' if self.branch_sim else 'no'}",
                f"--cachegrind-out-file={self.out}"]


def produce_frame(correlation_id: int) -> bytes:
    batch = build_batch([SimpleRecord(value=b"x" * 100, key=None, headers=(), timestamp=0)])
    request = ProduceRequest(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30),
                             topic_data=(TopicProduceData(name=TOPIC, partition_data=(
                                 PartitionProduceData(index=0, records=batch),)),))
    return encode_request(request, correlation_id, "metrics-instructions")


def produce(bootstrap: str, requests: int, per_write: int) -> None:
    """Send ``requests`` produce requests, ``per_write`` at a time, reading every answer."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=600) as sock:
        sent = 0
        while sent < requests:
            n = min(per_write, requests - sent)
            sock.sendall(b"".join(produce_frame(i) for i in range(sent, sent + n)))
            for _ in range(n):
                (size,) = struct.unpack(">i", recv_exactly(sock, 4))
                recv_exactly(sock, size)
            sent += n


def counted_run(base: Path, *, metrics: bool, requests: int, per_write: int, branch_sim: bool) -> dict[str, int]:
    """Start the broker under cachegrind, produce, stop it; its whole-run counts."""
    out = base / "cachegrind.out"
    with CachegrindCluster(base / "cluster", out, metrics=metrics, branch_sim=branch_sim) as cluster:
        create_topic_admin(cluster.bootstrap_servers, TOPIC, 1, 1)
        produce(cluster.bootstrap_servers, requests, per_write)
        ((broker_id, broker),) = cluster.brokers.items()
        cluster.signal_broker(broker_id, signal.SIGTERM)
        assert broker.process is not None
        broker.process.wait(900)  # cachegrind writes its counts as the broker exits
    text = out.read_text()
    events = re.search(r"^events: (.*)$", text, re.M)
    summary = re.search(r"^summary: (.*)$", text, re.M)
    if events is None or summary is None:
        raise RuntimeError(f"no counts in {out}: did the broker exit cleanly?")
    return dict(zip(events.group(1).split(), map(int, summary.group(1).split()), strict=True))


def per_request(short: dict[str, int], long: dict[str, int], requests: int) -> dict[str, float]:
    """The counts of ``requests`` requests (the long run's less the short run's), per request,
    with the summed misses and the cycle estimate."""
    each = {event: (long[event] - short[event]) / requests for event in long}
    each["L1 misses"] = sum(each[event] for event in L1_MISSES)
    each["LL misses"] = sum(each[event] for event in LL_MISSES)
    each["est. cycles"] = each["Ir"] + 10 * each["L1 misses"] + 100 * each["LL misses"]
    return each


def report(off: dict[str, float], on: dict[str, float]) -> str:
    rows = [("per request", "metrics off", "metrics on", "on/off")]
    # Conditional and indirect branches and their mispredictions, with --branch-sim.
    branches = [event for event in ("Bc", "Bcm", "Bi", "Bim") if event in off]
    for event in ("Ir", "I1mr", "D1mr", "D1mw", "L1 misses", "LL misses", "est. cycles", *branches):
        ratio = f"{on[event] / off[event]:.3f}" if off[event] >= 1 else "-"  # not of counts near zero
        rows.append((event, f"{off[event]:,.0f}", f"{on[event]:,.0f}", ratio))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                               enumerate(zip(row, widths, strict=True))) for row in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=5000, help="requests counted (beyond the warm-up)")
    ap.add_argument("--warmup", type=int, default=1000, help="requests of the short run, taken out")
    ap.add_argument("--per-write", type=int, default=200, help="requests pipelined in one write")
    ap.add_argument("--branch-sim", action="store_true", help="also simulate branch prediction (mispredictions)")
    ap.add_argument("--dir", help="working directory, kept (its */cachegrind.out for cg_diff and cg_annotate; "
                                  "default: a temporary one, removed)")
    args = ap.parse_args()
    if args.requests < 1 or args.warmup < 1 or args.per_write < 1:
        ap.error("--requests, --warmup and --per-write take numbers from 1")
    if shutil.which("valgrind") is None:
        ap.error("needs valgrind on PATH (Debian: apt-get install valgrind)")
    os.environ["PYTHONHASHSEED"] = HASH_SEED  # the brokers inherit it
    counts: dict[str, dict[str, dict[str, int]]] = {}
    with contextlib.ExitStack() as stack:
        tmp = args.dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="odradek-instructions-"))
        for metrics in (False, True):
            label = "on" if metrics else "off"
            for name, n in (("short", args.warmup), ("long", args.warmup + args.requests)):
                started = time.monotonic()
                counts.setdefault(label, {})[name] = counted_run(Path(tmp) / f"{label}-{name}", metrics=metrics,
                                                                 requests=n, per_write=args.per_write,
                                                                 branch_sim=args.branch_sim)
                print(f"metrics {label}, {n:,} requests: {counts[label][name]['Ir']:,} instructions "
                      f"({time.monotonic() - started:.0f} s)", flush=True)
    off, on = (per_request(counts[label]["short"], counts[label]["long"], args.requests) for label in ("off", "on"))
    print(f"\n{args.requests:,} one-record produce requests, {args.per_write} to a write, counted by cachegrind\n")
    print(report(off, on))
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = RESULTS / f"metrics-instructions-{stamp}.json"
    out.write_text(json.dumps({"started": stamp, "code": code_version(), "python": sys.version.split()[0],
                               "requests": args.requests, "warmup": args.warmup, "per_write": args.per_write,
                               "branch_sim": args.branch_sim,
                               "counts": counts, "per_request": {"off": off, "on": on}}, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
