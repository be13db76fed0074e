"""A Kafka cluster migrated to odradek by rolling restart and back, the workload running:
three Apache Kafka 3.9 brokers (inter.broker.protocol.version 2.8) on one ZooKeeper, a topic
with RF 3 and min.insync.replicas 2, an acks=all idempotent producer and a consumer group
committing its offsets; each broker is replaced by an odradek broker of the same broker.id on
the same log directory, then each back by Kafka (``--rounds`` times).

    .venv/bin/python bench/migration_runner.py [--rounds 2] [--dwell 20] [--partitions 6] [--dir DIR]

Prints each step's time to full ISR and the durability checker's table (acknowledged, lost,
duplicated, replicas identical, the group's offsets kept), and writes bench/results/migration.json.
The short version is tests/integration/test_migration.py; the procedure is docs/DEPLOY.md's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
import time
from pathlib import Path

from odradek.perf.harness import create_topic_admin, unwind_on_sigterm
from odradek.perf.migration import MIGRATION_SETTINGS, MigrationRun, MixedCluster, round_trip_plan


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2, help="round trips (Kafka -> odradek -> Kafka)")
    parser.add_argument("--dwell", type=float, default=20.0, help="seconds of workload before each step")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--segment-bytes", type=int, default=1 << 20, help="log.segment.bytes (several segments)")
    parser.add_argument("--dir", default=None, help="keep the cluster's files here (default: a temporary dir)")
    args = parser.parse_args()
    # SIGTERM (kill) unwinds like Ctrl-C, so the cluster below is stopped, not orphaned.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with (contextlib.nullcontext(args.dir) if args.dir else
          tempfile.TemporaryDirectory(prefix="odradek-migration-")) as tmp:
        cluster = MixedCluster(tmp, 3, overrides={**MIGRATION_SETTINGS, "log.segment.bytes": str(args.segment_bytes)})
        started = time.monotonic()
        cluster.start(timeout_s=300)
        print(f"{cluster.describe()}: started in {time.monotonic() - started:.1f}s", flush=True)
        try:
            create_topic_admin(cluster.bootstrap_servers, "migration", args.partitions, 3)
            run = MigrationRun(cluster, round_trip_plan(list(cluster.brokers), args.rounds),
                               partitions=args.partitions, dwell_s=args.dwell, log=lambda m: print(m, flush=True))
            run.run()
        finally:
            cluster.stop()
    report = run.migration
    print(report.steps_table())
    print()
    print(report.checker_table())
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    (results / "migration.json").write_text(json.dumps(
        {"kafka": cluster.kafka_version, "rounds": args.rounds, "dwell_s": args.dwell,
         "partitions": args.partitions, **report.to_json()}, indent=2))
    return 0 if report.ok else 1


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
