"""The partition nemesis, long: 100+ faults (cycling the kinds of odradek.local.nemesis) on a
fresh lab of 3 brokers in network namespaces, while the nemesis workload (idempotent acks=all
producers, an assigned reader, a committing consumer group, transactional producers that read
before they write, a consume-transform-produce pipeline) runs on the lab's client host.
Needs root (see `odradek lab`).

    .venv/bin/python bench/nemesis.py [--faults 120] [--seed 1] [--acks all|1] [--only zombie,bridge]
                                      [--zookeepers 3] [--txn-producers 2] [--pipelines 1] [--dir DIR]

Prints a Markdown table per fault kind (count, unavailability p50/max: the longest gap between
two acks on a partition during a fault and until its ISRs are full again, worst partition;
heal→full ISR p50/max) and the totals (faults, acknowledged, lost, duplicated, anomalies,
brokers alive); writes bench/results/nemesis[-acks1].json. Exits non-zero on any anomaly,
lost write, duplicate (but a client's re-sends under a new producer epoch, which are counted),
dead broker or ISR not full again, except that with --acks 1 lost writes are expected (Kafka
documents it) and only reported.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import tempfile
import time
from pathlib import Path

from odradek.local.lab import Lab, LabError, LabUnavailable
from odradek.local.nemesis import FAULT_KINDS, NemesisRun, summarize
from odradek.perf.harness import unwind_on_sigterm


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--faults", type=int, default=12 * len(FAULT_KINDS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--acks", choices=["all", "1"], default="all")
    parser.add_argument("--only", default=None, help=f"comma-separated fault kinds ({', '.join(FAULT_KINDS)})")
    parser.add_argument("--zookeepers", type=int, default=3)
    parser.add_argument("--session-timeout-ms", type=int, default=4000)
    parser.add_argument("--hold-s", type=float, default=2.0, help="how long a fault that needs no session expiry lasts")
    parser.add_argument("--past-session-s", type=float, default=2.0, help="how long a fault is held past the session timeout")
    parser.add_argument("--rate", type=int, default=200, help="records a second, per producer (2 producers)")
    parser.add_argument("--txn-producers", type=int, default=2, help="transactional producers beside the idempotent ones")
    parser.add_argument("--pipelines", type=int, default=1, help="consume-transform-produce members (KIP-447)")
    parser.add_argument("--dir", default=None, help="keep the lab's files here (default: a temporary dir)")
    parser.add_argument("--name", default="nem", help="lab name (namespaces and bridge are named after it)")
    parser.add_argument("--subnet", default="10.213.78.0/24")
    args = parser.parse_args()
    # kazoo logs every dropped connection of this runner's own ZooKeeper client: the faults cause them.
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    kinds = FAULT_KINDS if args.only is None else [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(FAULT_KINDS))
    if unknown or args.faults < 1:
        print(f"--only: unknown fault kinds {unknown} (known: {', '.join(FAULT_KINDS)})" if unknown
              else "--faults must be at least 1", file=sys.stderr)
        return 2
    # SIGTERM unwinds like Ctrl-C, so the lab below is taken down, not orphaned.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    timeout = str(args.session_timeout_ms)
    with (contextlib.nullcontext(args.dir) if args.dir else tempfile.TemporaryDirectory(prefix="odradek-nemesis-")) as tmp:
        try:
            lab = Lab.create(Path(tmp) / "lab", brokers=3, zookeepers=args.zookeepers, name=args.name,
                             subnet=args.subnet,
                             overrides={"zookeeper.session.timeout.ms": timeout, "replica.lag.time.max.ms": timeout})
            lab.up()
        except (LabError, LabUnavailable) as e:
            print(f"cannot start the lab: {e}", file=sys.stderr)
            return 2
        try:
            started = time.strftime("%H:%M:%S")
            print(f"{started}: {args.faults} faults ({', '.join(kinds)}), acks={args.acks}, seed {args.seed}")
            report = NemesisRun(lab, Path(tmp) / "nemesis", faults=args.faults, kinds=kinds, seed=args.seed,
                                acks=args.acks, rate=args.rate, hold_s=args.hold_s,
                                past_session_s=args.past_session_s, txn_producers=args.txn_producers,
                                pipelines=args.pipelines,
                                log=lambda line: print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)).run()
        finally:
            lab.down()
    print(report.table())
    for skipped in report.skipped:
        print(f"skipped: {skipped}")
    for kind, examples in report.verdict.examples().items():
        print(f"{kind}: " + "; ".join(examples))
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    name = "nemesis.json" if args.acks == "all" else "nemesis-acks1.json"
    (results / name).write_text(json.dumps(summarize(report), indent=2))
    if args.acks == "1":
        # A new leader truncates what only the old one had: lost writes, reads that vanish and
        # consumers reset by an out-of-range offset are expected. The rest must still hold.
        v = report.verdict
        held = not (v.duplicated or v.commits_backwards or v.divergent) and all(report.brokers_alive.values())
        return 0 if held else 1
    return 0 if report.ok else 1


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
