"""What transactions cost, in one run on 3 local brokers (topics of 6 partitions, RF 3,
acks=all, 100-byte records, confluent-kafka):

1. producer throughput: an idempotent producer, then transactional producers committing every
   1,000 and every 100 records (each record's transaction: begin, produce, commit_transaction);
   records/s and the ratio to the idempotent producer;
2. consumer throughput on the transactional data just written (markers every 1,000 and every
   100 records): a read_committed and a read_uncommitted consumer (assign, from the start to
   the end of every partition); records/s and their ratio.

Each phase writes its own topic; a warm-up transaction first creates ``__transaction_state``
and finds the coordinator, so the phases time steady state. A transaction's fixed cost shows as
ms per transaction: a transaction's first AddPartitionsToTxn is answered CONCURRENT_TRANSACTIONS
while the previous one's markers are still being written (as Kafka's coordinator does), and
librdkafka retries it after a backoff.

Where a transaction's time goes: the brokers serve /metrics, and each producer phase is framed
by two scrapes of every broker's RequestMetrics (perf/request_breakdown.py).  For each request
the phase caused (the producer's, the coordinator's WriteTxnMarkers, the followers' fetches)
the table gives how many per transaction, their mean time in the broker, split into local (read
to handled) and remote (waiting in a purgatory: for the followers, the markers, the
transaction log), and the errors answered.

With ``--profile N`` one more phase of N-record transactions runs with py-spy on every broker
(perf/harness.py's pyspy_record, GIL held), and each broker's top functions are printed: where
the brokers' CPU goes per transaction.

    .venv/bin/python bench/transactions.py [--records 200000] [--profile 100] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from odradek.local.cluster import LocalCluster
from odradek.perf.harness import (
    code_version,
    create_topic_zk,
    pyspy_record,
    summarize_speedscope,
    unwind_on_sigterm,
)
from odradek.perf.request_breakdown import RequestTimes, breakdown, scrape_request_times
from odradek.perf.transactions import PRODUCER, consume, produce

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS = 6
RF = 3
RECORD_SIZE = 100


def report(results: dict[str, dict[str, float]]) -> str:
    base = results["idempotent"]["records_per_sec"]
    rows = [("producer", "records/s", "vs idempotent")]
    for name in ("idempotent", "txn-1000", "txn-100"):
        r = results[name]
        rows.append((name, f"{r['records_per_sec']:,.0f}", f"{r['records_per_sec'] / base:.2f}"))
    rows.append(("", "", ""))
    rows.append(("consumer", "records/s", "committed / uncommitted"))
    for data in ("txn-1000", "txn-100"):
        rc, ru = results[f"read_committed {data}"], results[f"read_uncommitted {data}"]
        rows.append((f"read_uncommitted on {data}", f"{ru['records_per_sec']:,.0f}", ""))
        rows.append((f"read_committed on {data}", f"{rc['records_per_sec']:,.0f}",
                     f"{rc['records_per_sec'] / ru['records_per_sec']:.2f}"))
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"{a:{w[0]}}   {b:>{w[1]}}   {c}" for a, b, c in rows)


def time_per_transaction(times: dict[str, RequestTimes], transactions: int) -> str:
    """The requests of a phase per transaction, busiest first."""
    rows = [("request", "per txn", "total ms", "local ms", "remote ms", "errors")]
    for name, t in sorted(times.items(), key=lambda kv: -kv[1].total_ms):
        errors = ", ".join(f"{e} {n / transactions:.2f}/txn" for e, n in sorted(t.errors.items()))
        rows.append((name, f"{t.requests / transactions:.2f}", f"{t.mean('total'):.2f}", f"{t.mean('local'):.2f}",
                     f"{t.mean('remote'):.2f}", errors))
    w = [max(len(r[i]) for r in rows) for i in range(6)]
    return "\n".join("    " + "  ".join(f"{c:{'<' if i in (0, 5) else '>'}{w[i]}}" for i, c in enumerate(r))
                     for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000, help="records per producer phase")
    ap.add_argument("--profile", type=int, metavar="N",
                    help="one more phase of N-record transactions under py-spy, on every broker")
    ap.add_argument("--dir", help="working directory (default: a temporary one, removed afterwards)")
    args = ap.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(args.dir or tempfile.mkdtemp(prefix="odradek-txn-bench-"))
    code = code_version()
    print(f"3 brokers, {PARTITIONS} partitions, RF {RF}, {RECORD_SIZE}-byte records, {args.records:,} records "
          f"per producer phase; load average {os.getloadavg()[0]:.2f}; code {code['commit']}", flush=True)
    results: dict[str, dict[str, float]] = {}
    with LocalCluster(base / "cluster", 3, metrics=True) as cluster:
        urls = [cluster.metrics_url(b) for b in cluster.brokers.values()]
        for t in ("warmup", "idempotent", "txn-1000", "txn-100"):
            create_topic_zk(cluster.zookeeper_connect, f"bench-{t}", PARTITIONS, RF)
        produce(cluster, "bench-warmup", 2_000, 1_000)  # creates __transaction_state
        for name, every in (("idempotent", None), ("txn-1000", 1_000), ("txn-100", 100)):
            before = scrape_request_times(urls)
            results[name] = produce(cluster, f"bench-{name}", args.records, every)
            times = breakdown(before, scrape_request_times(urls))
            per_txn = results[name]["ms_per_transaction"]
            print(f"  {name}: {results[name]['records_per_sec']:,.0f} records/s"
                  + (f", {per_txn:.1f} ms per transaction" if per_txn else ""), flush=True)
            if every is not None:
                print("  the brokers' requests per transaction (means over the phase, all brokers):")
                print(time_per_transaction(times, results[name]["transactions"]), flush=True)
                results[name]["requests"] = {k: vars(v) for k, v in times.items()}
        for data in ("txn-1000", "txn-100"):
            for isolation in ("read_uncommitted", "read_committed"):
                r = consume(cluster, f"bench-{data}", isolation)
                if r["records"] != args.records:
                    raise SystemExit(f"{isolation} read {r['records']} of {args.records} records of {data}")
                results[f"{isolation} {data}"] = r
                print(f"  {isolation} on {data}: {r['records_per_sec']:,.0f} records/s", flush=True)
        profiles = []
        if args.profile:
            create_topic_zk(cluster.zookeeper_connect, "bench-profile", PARTITIONS, RF)
            with ExitStack() as stack:
                recorded = {broker_id: stack.enter_context(pyspy_record(b.pid, base / f"profile-{broker_id}.json"))
                            for broker_id, b in cluster.brokers.items() if b.pid is not None}
                profiled = produce(cluster, "bench-profile", args.records // 4, args.profile)
            print(f"  profiled: {profiled['records_per_sec']:,.0f} records/s, "
                  f"{profiled['ms_per_transaction']:.1f} ms per transaction (under py-spy), "
                  f"{profiled['brokers_cpu_s'] * 1000 / profiled['transactions']:.1f} ms of broker CPU per "
                  "transaction", flush=True)
            profiles = [summarize_speedscope(path, 25).format(f"broker {broker_id}, {args.profile}-record "
                                                             "transactions")
                        for broker_id, path in recorded.items()]
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    print()
    print(report(results))
    for profile in profiles:
        print()
        print(profile)
    out = RESULTS / f"transactions-{stamp}.json"
    out.write_text(json.dumps({"started": stamp, "code": code, "records": args.records, "producer": PRODUCER,
                               "partitions": PARTITIONS, "replication_factor": RF, "record_size": RECORD_SIZE,
                               "cpu_count": os.cpu_count(), "python": sys.version.split()[0],
                               "results": results, "profiles": profiles}, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
