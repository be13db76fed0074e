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
and odradek / Tansu ratios.

    .venv/bin/python bench/broker_bound.py [--clients 3] [--seconds 10] [--partitions 6]
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
from contextlib import ExitStack
from pathlib import Path

from odradek.local.cluster import LocalCluster
from odradek.perf.harness import TansuBroker, code_version, create_topic_admin, process_cpu_seconds

RESULTS = Path(__file__).resolve().parent / "results"
RECORD_SIZE = 100
UNBATCHED = {"linger.ms": 0, "acks": "1"}
ONE_RECORD = {"linger.ms": 0, "acks": "1", "batch.num.messages": 1}
BATCHED = {"linger.ms": 5, "acks": "1", "batch.size": 1_000_000, "batch.num.messages": 10_000}
SMALL_FETCH = {"fetch.max.bytes": 16384, "max.partition.fetch.bytes": 16384, "message.max.bytes": 16384,
               "fetch.wait.max.ms": 100}


def _requests(stats: dict, kind: str) -> int:
    """Requests of ``kind`` (Produce, Fetch) this client sent to every broker (librdkafka stats)."""
    return sum(b.get("req", {}).get(kind, 0) for b in stats.get("brokers", {}).values() if b.get("nodeid", -1) >= 0)


def _producer(bootstrap: str, topic: str, settings: dict, seconds: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    import confluent_kafka as ck

    last: dict = {}
    p = ck.Producer({"bootstrap.servers": bootstrap, "compression.type": "none", "log_level": 0,
                     "statistics.interval.ms": 500, "stats_cb": lambda s: last.update(json.loads(s)), **settings})
    value = b"x" * RECORD_SIZE
    delivered = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1

    end = time.monotonic() + seconds
    produce, poll = p.produce, p.poll
    while time.monotonic() < end:
        try:
            produce(topic, value, on_delivery=on_delivery)
        except BufferError:
            poll(0.001)
        poll(0)
    p.flush(60)
    time.sleep(0.6)  # one more statistics report, after the last request
    p.poll(0)
    out.put({"records": delivered, "requests": _requests(last, "Produce")})


def _consumer(bootstrap: str, topic: str, seconds: float, out: mp.Queue, index: int) -> None:  # type: ignore[type-arg]
    import confluent_kafka as ck

    last: dict = {}
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"bound-{os.getpid()}", "enable.auto.commit": False,
                     "log_level": 0, "statistics.interval.ms": 500, "stats_cb": lambda s: last.update(json.loads(s)),
                     "auto.offset.reset": "earliest", **SMALL_FETCH})
    md = c.list_topics(topic, timeout=30).topics[topic].partitions
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in md])
    count = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for m in c.consume(1000, 0.1):
            if m.error() is None:
                count += 1
    time.sleep(0.6)
    c.poll(0)
    out.put({"records": count, "requests": _requests(last, "Fetch")})
    c.close()


def run_clients(target: str, pid: int, topic: str, clients: int, seconds: float, settings: dict | None) -> dict:
    """``clients`` processes (producers with ``settings``, consumers when None) against one
    broker; the broker's CPU over the phase."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_producer, args=(target, topic, settings, seconds, out)) if settings is not None
             else ctx.Process(target=_consumer, args=(target, topic, seconds, out, i)) for i in range(clients)]
    cpu0, t0 = process_cpu_seconds(pid), time.perf_counter()
    for proc in procs:
        proc.start()
    results = [out.get(timeout=seconds + 120) for _ in procs]
    elapsed = time.perf_counter() - t0
    cpu = process_cpu_seconds(pid) - cpu0
    for proc in procs:
        proc.join(30)
    records = sum(r["records"] for r in results)
    requests = sum(r["requests"] for r in results)
    return {"records": records, "requests": requests, "seconds": elapsed, "broker_cpu_s": cpu,
            "records_per_s": records / elapsed, "requests_per_s": requests / elapsed,
            "requests_per_cpu_s": requests / cpu if cpu else 0.0, "cpu_us_per_request": cpu * 1e6 / requests
            if requests else 0.0, "records_per_cpu_s": records / cpu if cpu else 0.0}


def report(results: dict[str, dict[str, dict]]) -> str:
    rows = [("phase", "broker", "records/s", "requests/s", "CPU s/s", "req per CPU-s", "CPU us/req",
             "records per CPU-s")]
    for phase in ("unbatched produce", "one-record produce", "batched produce", "fetch"):
        for broker in ("odradek", "tansu"):
            r = results[broker][phase]
            rows.append((phase, broker, f"{r['records_per_s']:,.0f}", f"{r['requests_per_s']:,.0f}",
                         f"{r['broker_cpu_s'] / r['seconds']:.2f}", f"{r['requests_per_cpu_s']:,.0f}",
                         f"{r['cpu_us_per_request']:,.0f}", f"{r['records_per_cpu_s']:,.0f}"))
        o, t = results["odradek"][phase], results["tansu"][phase]
        rows.append((phase, "odradek/tansu", f"{o['records_per_s'] / t['records_per_s']:.2f}",
                     f"{o['requests_per_s'] / t['requests_per_s']:.2f}", "",
                     f"{o['requests_per_cpu_s'] / t['requests_per_cpu_s']:.2f}", "",
                     f"{o['records_per_cpu_s'] / t['records_per_cpu_s']:.2f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                     for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=3, help="client processes per phase")
    ap.add_argument("--seconds", type=float, default=10, help="seconds per phase")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--dir", help="working directory (default: a temporary one, removed afterwards)")
    args = ap.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(args.dir or tempfile.mkdtemp(prefix="odradek-bound-bench-"))
    code = code_version()
    print(f"{args.clients} client processes, {args.seconds:.0f} s per phase, {args.partitions} partitions, "
          f"{RECORD_SIZE}-byte records; load average {os.getloadavg()[0]:.2f}; code {code['commit']}", flush=True)
    results: dict[str, dict[str, dict]] = {}
    with ExitStack() as stack:
        cluster = stack.enter_context(LocalCluster(base / "odradek", 1))
        tansu = TansuBroker(base / "tansu.log")
        tansu.start()
        stack.callback(tansu.stop)
        targets = {"odradek": (cluster.bootstrap_servers, cluster.brokers[0].pid),
                   "tansu": (tansu.bootstrap_servers, tansu.pid)}
        for name, (bootstrap, pid) in targets.items():
            assert pid is not None
            results[name] = {}
            for phase, settings in (("unbatched produce", UNBATCHED), ("one-record produce", ONE_RECORD),
                                    ("batched produce", BATCHED)):
                topic = f"bound-{phase.split()[0]}"
                create_topic_admin(bootstrap, topic, args.partitions, 1)
                results[name][phase] = run_clients(bootstrap, pid, topic, args.clients, args.seconds, settings)
                print(f"  {name} {phase}: {results[name][phase]['requests_per_cpu_s']:,.0f} requests per CPU-s",
                      flush=True)
            results[name]["fetch"] = run_clients(bootstrap, pid, "bound-unbatched", args.clients, args.seconds, None)
            print(f"  {name} fetch: {results[name]['fetch']['requests_per_cpu_s']:,.0f} requests per CPU-s", flush=True)
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    print()
    print(report(results))
    out = RESULTS / f"broker-bound-{stamp}.json"
    out.write_text(json.dumps({"started": stamp, "code": code, "clients": args.clients, "seconds": args.seconds,
                               "partitions": args.partitions, "cpu_count": os.cpu_count(),
                               "python": sys.version.split()[0], "results": results}, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
