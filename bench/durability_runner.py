"""Long durability run: at least 100 injected faults on 3 brokers, RF 3,
min.insync.replicas=2, acks=all idempotent producers with unique record ids.

    .venv/bin/python bench/durability_runner.py [--faults 100] [--seed 1] [--transactional] [--security sasl_ssl]

Reports faults injected, records acknowledged, records lost (must be 0), duplicates, reads
later gone, divergent replicas and the longest unavailability per partition (the longest
gap between two acknowledgements on a partition while the producer kept writing). With
``--transactional``: transactions of 20 records, a fifth aborted on purpose, and the
transaction coordinator among the victims; also aborted records visible (must be 0), partly
visible transactions (0) and partitions whose LSO stays behind (0).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from odradek.local.cluster import ADMIN_PROPERTIES, LocalCluster
from odradek.local.durability import DurabilityRun
from odradek.perf.harness import unwind_on_sigterm


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--faults", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--transactional", action="store_true", help="transactions of 20 records, some aborted")
    parser.add_argument("--dir", default=None, help="keep the cluster's files here (default: a temporary dir)")
    parser.add_argument("--security", choices=["ssl", "sasl_plaintext", "sasl_ssl"], default=None,
                        help="run on a secure cluster (odradek up --security); clients log in as its admin")
    args = parser.parse_args()
    # SIGTERM (kill, pkill) unwinds like Ctrl-C, so the cluster below is stopped, not orphaned.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with (contextlib.nullcontext(args.dir) if args.dir else
          tempfile.TemporaryDirectory(prefix="odradek-durability-")) as tmp:
        cluster = LocalCluster(tmp, 3, overrides={"min.insync.replicas": "2", "replica.lag.time.max.ms": "5000"},
                               security=args.security)
        cluster.start()
        try:
            subprocess.run([sys.executable, "-m", "odradek", "topics", "--bootstrap-server",
                            cluster.bootstrap_servers.split(",")[0], "--create", "--topic", "durability", "--partitions", str(args.partitions),
                            "--replication-factor", "3",
                            *(["--command-config", str(cluster.dir / ADMIN_PROPERTIES)] if args.security else [])],
                           check=True)
            time.sleep(2)
            report = DurabilityRun(cluster, partitions=args.partitions, faults=args.faults, seed=args.seed,
                                   log=print, transactional=args.transactional).run()
        finally:
            cluster.stop()
    print(report.summary())
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    name = "durability-transactional.json" if args.transactional else "durability.json"
    (results / name).write_text(json.dumps({
        "faults": len(report.faults), "fault_kinds": report.faults, "produced": report.produced,
        "acknowledged": report.acknowledged, "acknowledged_without_offset": report.acknowledged_without_offset,
        "lost": len(report.lost), "lost_examples": report.lost[:200], "duplicated": len(report.duplicated),
        "duplicated_resent": len(report.duplicated_resent),
        "consumer_reads": report.consumer_reads, "vanished_reads": len(report.vanished_reads),
        "divergent_replicas": report.divergent_replicas,
        "longest_unavailability_s": report.longest_unavailability_s, "duration_s": report.duration_s,
        **({"transactions_committed": report.transactions_committed,
            "transactions_aborted": report.transactions_aborted,
            "transactions_unknown": report.transactions_unknown,
            "aborted_visible": len(report.aborted_visible), "aborted_visible_examples": report.aborted_visible[:200],
            "partial_transactions": report.partial_transactions,
            "hanging_partitions": report.hanging_partitions} if args.transactional else {}),
    }, indent=2))
    return 0 if report.ok else 1


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
