"""The request metrics' cost on the produce path, inside one broker process: the broker serves
/metrics and its request metrics are switched off and on in turns (bench/flip_hook: SIGHUP
reads a mode file), every --interval seconds, under one long load of bench/broker_bound.py's
producers (--phase; default one-record: ``batch.num.messages=1``, one record per request).

Between two brokers the CPU per request differs by several per cent for as long as they live
(where their objects landed, their hash seeds), which is why broker_bound.py needs many
generations. Here both sides are the same process, the same client connections and the same
moment of the machine: each cycle is one interval with metrics and one without (their order
alternating), and its ratio compares them. What is measured per interval, read from /proc:
the broker's CPU (its CPU-time clock: every thread's, exited ones too) and its event loop's (the main
thread: request handling), over the record bytes appended to the topic's log files (one
record per request: bytes are requests; converted to requests with the run's bytes per request
as the clients count them).

Reported: the mean ratio with metrics over without, with its 95% interval, and the median, for
the broker's CPU and the event loop's; per generation when there are several (each a fresh
broker, hash seed = its number). A switch takes effect at the next request of each connection;
the 0.1 s after it are left out.

    .venv/bin/python bench/metrics_flip.py [--seconds 420] [--interval 2] [--generations 1]
        [--phase one-record|unbatched|batched] [--clients 3] [--partitions 6]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from broker_bound import PHASES, SMALL_FETCH

from odradek.local.cluster import BrokerProcess, LocalCluster
from odradek.perf.harness import code_version, create_topic_admin, unwind_on_sigterm
from odradek.perf.load import run_clients
from odradek.perf.sysstat import cluster_groups, process_cpu_ns

HOOK = Path(__file__).resolve().parent / "flip_hook"
RESULTS = Path(__file__).resolve().parent / "results"
TOPIC = "flip"
SETTLE_S = 0.1  # after a switch, left out of the interval


class FlipCluster(LocalCluster):
    """A one-broker local cluster with metrics whose broker imports bench/flip_hook at start-up."""

    def __init__(self, directory: Path, mode_file: Path) -> None:
        super().__init__(directory, 1, metrics=True)
        self.mode_file = mode_file

    def broker_command_prefix(self, broker: BrokerProcess) -> list[str]:
        rest = os.environ.get("PYTHONPATH")
        path = f"{HOOK}{os.pathsep}{rest}" if rest else str(HOOK)
        return ["env", f"PYTHONPATH={path}", f"ODRADEK_FLIP_MODE_FILE={self.mode_file}"]


def loop_cpu_ns(pid: int) -> int:
    """The run time of the main thread (the event loop) of ``pid``."""
    return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[0])


def log_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.glob(f"**/{TOPIC}-*/*.log"))


def generation(base: Path, args: argparse.Namespace, first_cycle: int) -> dict[str, Any]:
    """One broker: cycles of (metrics on, off) intervals under one load; per cycle the on/off
    ratios of CPU per byte appended, the broker's and its loop's."""
    mode_file = base / "mode"
    mode_file.write_text("on")
    ratios: dict[str, list[float]] = {"broker": [], "loop": []}
    spent = {"on": [0, 0, 0], "off": [0, 0, 0]}  # broker ns, loop ns, bytes
    with FlipCluster(base / "cluster", mode_file) as cluster:
        (broker,) = cluster.brokers.values()
        assert broker.process is not None
        pid = broker.process.pid
        create_topic_admin(cluster.bootstrap_servers, TOPIC, args.partitions, 1)
        result: dict[str, Any] = {}

        def load() -> None:
            result.update(run_clients(cluster.bootstrap_servers, cluster_groups(cluster), TOPIC, args.clients,
                                      args.seconds, producer=PHASES[args.phase], consumer=SMALL_FETCH))

        clients = threading.Thread(target=load, name="flip-load", daemon=True)
        clients.start()
        deadline = time.monotonic() + 60
        while log_bytes(base) < 1_000_000:  # the producers are going
            if time.monotonic() > deadline or not clients.is_alive():
                raise SystemExit("the producers did not start writing within a minute")
            time.sleep(0.1)
        end = time.monotonic() + args.seconds - 10  # the clients' start-up and last flush left out
        cycle = first_cycle
        while time.monotonic() + 2 * (args.interval + SETTLE_S) < end:
            got = {}
            for mode in (("on", "off") if cycle % 2 == 0 else ("off", "on")):
                mode_file.write_text(mode)
                os.kill(pid, signal.SIGHUP)
                time.sleep(SETTLE_S)
                c0, l0, b0 = process_cpu_ns(pid), loop_cpu_ns(pid), log_bytes(base)
                time.sleep(args.interval)
                c1, l1, b1 = process_cpu_ns(pid), loop_cpu_ns(pid), log_bytes(base)
                if b1 == b0:
                    raise SystemExit("nothing was appended in an interval: the load stopped")
                got[mode] = ((c1 - c0) / (b1 - b0), (l1 - l0) / (b1 - b0))
                for i, v in enumerate((c1 - c0, l1 - l0, b1 - b0)):
                    spent[mode][i] += v
            ratios["broker"].append(got["on"][0] / got["off"][0])
            ratios["loop"].append(got["on"][1] / got["off"][1])
            cycle += 1
        clients.join()
    bytes_per_request = log_bytes(base) / result["requests"] if result.get("requests") else None
    return {"ratios": ratios, "spent": spent, "bytes_per_request": bytes_per_request, "cycles": cycle - first_cycle}


def summary(values: list[float]) -> dict[str, float]:
    mean = statistics.mean(values)
    half = 1.96 * statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else float("nan")
    return {"mean": mean, "low": mean - half, "high": mean + half, "median": statistics.median(values),
            "sd": statistics.stdev(values) if len(values) > 1 else float("nan"), "n": len(values)}


def line(label: str, s: dict[str, float]) -> str:
    return (f"{label}: with/without mean {s['mean']:.4f} (95%: {s['low']:.4f}-{s['high']:.4f}), median "
            f"{s['median']:.4f}, sd {s['sd']:.3f} per cycle, {s['n']} cycles")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=420, help="length of the load (each generation)")
    ap.add_argument("--interval", type=float, default=2, help="seconds of each interval, with or without")
    ap.add_argument("--generations", type=int, default=1, help="fresh brokers, one after another")
    ap.add_argument("--phase", choices=[p.split()[0] for p in PHASES if PHASES[p] is not None], default="one-record")
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=6)
    args = ap.parse_args()
    if args.seconds < 10 + 4 * (args.interval + SETTLE_S) or args.interval <= 0 or args.generations < 1:
        ap.error("--seconds must leave room for two cycles after 10 s; --interval and --generations must be positive")
    args.phase = next(p for p in PHASES if p.split()[0] == args.phase)
    code = code_version()
    print(f"{args.phase}: {args.clients} client processes, {args.partitions} partitions, {args.seconds:.0f} s per "
          f"generation, {args.interval:g} s intervals; code {code['commit']}", flush=True)
    runs = []
    for g in range(args.generations):
        os.environ["PYTHONHASHSEED"] = str(g + 1)
        with tempfile.TemporaryDirectory(prefix="odradek-metrics-flip-") as tmp:
            run = generation(Path(tmp), args, sum(r["cycles"] for r in runs))
        runs.append(run)
        per_request = ""
        if run["bytes_per_request"]:
            us = {m: s[0] / s[2] * run["bytes_per_request"] / 1e3 for m, s in run["spent"].items()}
            per_request = f"; broker CPU us/request with {us['on']:.2f}, without {us['off']:.2f}"
        print(f" generation {g + 1}: {line('broker CPU', summary(run['ratios']['broker']))}{per_request}", flush=True)
    everything = {kind: summary([r for run in runs for r in run["ratios"][kind]]) for kind in ("broker", "loop")}
    print()
    print(line("broker CPU per request (all threads)", everything["broker"]))
    print(line("event loop CPU per request (main thread)", everything["loop"]))
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"metrics-flip-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"code": code, "phase": args.phase, "clients": args.clients,
                               "partitions": args.partitions, "seconds": args.seconds, "interval": args.interval,
                               "python": sys.version.split()[0], "summary": everything, "runs": runs}, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
