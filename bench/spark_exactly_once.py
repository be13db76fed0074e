"""The `odradek` sink with ``exactlyOnce`` on and off, in one run: the write throughput of the
same streaming query, and fault runs checked row by row.

    .venv/bin/python bench/spark_exactly_once.py [--rows 200000] [--rounds 3] [--fault-rows 20000]

Starts a 3-broker LocalCluster (RF 3, min.insync.replicas=2) and a Spark standalone cluster
(2 workers of 1 core), writes input rows with unique ids (``row-<id>``) over 4 partitions and
runs the query odradek -> upper(value) -> odradek with ``availableNow`` (4 micro-batches for
the throughput runs, 2 for the fault runs), through odradek.spark.fault_runs, the code the
tests use:

* throughput: --rounds rounds of the query over --rows rows, exactlyOnce on and off in turn
  (the first of a round alternates), each into a new topic, on one ``local[2,4]`` driver after
  an untimed warm-up query; rows per second over the query's wall time and over its
  micro-batches' time in the sink (``addBatch``); medians, and the ratio on / off;
* faults, each with exactlyOnce on and off over --fault-rows rows, striking a task after half
  of its rows in a micro-batch (1,250 by default): task retry (the first attempt of tasks 0
  and 2 of each micro-batch fails; also a batch write), broker kill (SIGKILL of an output
  partition's leader, and of the controller, while a task is paused; restarted after the run)
  on ``local[2,4]``; driver kill (SIGKILL of the driver program while its commit of the first
  micro-batch waits, the tasks' rows written and the checkpoint not told; the query then
  restarts from its checkpoint on a new driver), on ``local[2,4]`` drivers of their own;
  executor kill (SIGKILL of the executor JVM of a paused task) on the standalone cluster.

Prints both tables (fault runs: scenario, option, rows in, rows out, duplicates, missing, read
back with read_committed); results land in bench/results/spark_exactly_once-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odradek.local.cluster import LocalCluster
from odradek.perf.harness import code_version, create_topic_zk, unwind_on_sigterm, wait_full_isr
from odradek.spark.fault_pipeline import BatchWrite, PipelineRun
from odradek.spark.fault_runs import (
    Fault,
    KillBroker,
    KillExecutor,
    OutputCount,
    committed_output,
    drive,
    kill_driver_in_commit,
    produce_input,
)
from odradek.spark.sink_state import STATE_TOPIC_PARTITIONS
from odradek.spark.standalone import StandaloneCluster

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS = 4
RF = 3
WORKERS = 2
STATE_TOPIC = "bench-eos-state"
MODES = {"on": True, "off": False}
DRIVER_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class Scenario:
    """One fault run: a name for the table, what the run's tasks do, the fault to strike."""

    name: str
    faults: dict[str, object]  # PipelineRun fields: fail_tasks, pause
    fault: Callable[[LocalCluster, str, dict[str, int]], Fault] | None = None


def local_scenarios(at: int) -> tuple[Scenario, ...]:
    """The fault runs on ``local[2,4]``; tasks fail or pause after ``at`` rows."""
    return (
        Scenario("task retry", {"fail_tasks": f"0,2@{at}"}),
        Scenario("broker kill (leader)", {"pause": f"1@{at}"},
                 lambda cluster, sink, topics: KillBroker(cluster, sink, topics)),
        Scenario("broker kill (controller)", {"pause": f"1@{at}"},
                 lambda cluster, sink, topics: KillBroker(cluster, sink, topics, controller=True)),
    )


def executor_kill(at: int) -> Scenario:
    """On the standalone cluster: the last task pauses (the other executor is free by then)."""
    return Scenario("executor kill", {"pause": f"{PARTITIONS - 1}@{at}"})


class Bench:
    def __init__(self, cluster: LocalCluster, base: Path) -> None:
        self.cluster = cluster
        self.base = base
        self.bootstrap = cluster.bootstrap_servers
        self.topics = 0

    def topic(self, prefix: str) -> str:
        self.topics += 1
        name = f"bench-eos-{self.topics}-{prefix}"
        create_topic_zk(self.cluster.zookeeper_connect, name, PARTITIONS, RF)
        wait_full_isr(self.cluster, name, PARTITIONS, RF)
        return name

    def run(self, name: str, source: str, rows: int, exactly_once: bool, batches: int,
            **faults: object) -> PipelineRun:
        slug = name.replace(" ", "-").replace("(", "").replace(")", "")
        return PipelineRun(name=name, bootstrap=self.bootstrap, source=source, sink=self.topic(slug),
                           checkpoint=str(self.base / f"checkpoint-{slug}"), exactly_once=exactly_once,
                           max_offsets=rows // batches, marker=str(self.base / f"pause-{slug}"),
                           state_topic=STATE_TOPIC, **faults)  # type: ignore[arg-type]

    def count(self, topic: str, rows: int, *, transformed: bool = True) -> OutputCount:
        return OutputCount.of(rows, committed_output(self.bootstrap, topic, PARTITIONS), transformed=transformed)


def throughput_runs(bench: Bench, source: str, rows: int, rounds: int) -> list[PipelineRun]:
    runs = []
    for r in range(rounds):
        order = ("on", "off") if r % 2 == 0 else ("off", "on")
        runs.extend(bench.run(f"throughput {mode} {r}", source, rows, MODES[mode], 4) for mode in order)
    return runs


def summarize_throughput(runs: list[PipelineRun], results: dict, rows: int) -> dict[str, dict[str, float]]:
    medians: dict[str, dict[str, float]] = {}
    for mode, on in MODES.items():
        mine = [results[run.name] for run in runs if run.exactly_once == on]
        medians[mode] = {
            "rows_per_s": statistics.median(rows / r["seconds"] for r in mine),
            "sink_rows_per_s": statistics.median(rows / r["add_batch_s"] for r in mine),
        }
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows of each throughput run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fault-rows", type=int, default=20_000, help="rows of each fault run")
    args = parser.parse_args()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    started = time.monotonic()
    code = code_version()
    print(f"3 brokers (RF {RF}, min.insync.replicas=2), {PARTITIONS} partitions; load average "
          f"{os.getloadavg()[0]:.2f}; code {code['commit']}", flush=True)
    overrides = {"min.insync.replicas": "2", "default.replication.factor": str(RF)}
    with tempfile.TemporaryDirectory(prefix="odradek-spark-eos-") as tmp, \
            LocalCluster(Path(tmp) / "kafka", 3, overrides=overrides) as cluster, \
            StandaloneCluster(Path(tmp) / "spark", WORKERS) as standalone:
        bench = Bench(cluster, Path(tmp))
        big, small = bench.topic("throughput-in"), bench.topic("faults-in")
        produce_input(bench.bootstrap, big, args.rows, PARTITIONS)
        produce_input(bench.bootstrap, small, args.fault_rows, PARTITIONS)

        # The application's first query pays for JVM and Python-worker start-up, the state topic
        # and the transaction log: an untimed one with exactlyOnce goes first.
        warm_up = bench.run("warm-up", small, args.fault_rows, True, 1)
        timed = throughput_runs(bench, big, args.rows, args.rounds)
        at = args.fault_rows // (PARTITIONS * 2) // 2  # half of a task's rows in a micro-batch
        fault_runs: list[tuple[Scenario, str, PipelineRun]] = [
            (s, mode, bench.run(f"{s.name} {mode}", small, args.fault_rows, on, 2, **s.faults))
            for s in local_scenarios(at) for mode, on in MODES.items()]
        writes = {mode: BatchWrite(bench.bootstrap, bench.topic(f"batch-{mode}"), args.fault_rows, PARTITIONS,
                                   on, STATE_TOPIC, f"0,2@{at}") for mode, on in MODES.items()}
        heal = {big: PARTITIONS, small: PARTITIONS, STATE_TOPIC: STATE_TOPIC_PARTITIONS}
        faults = {run.name: s.fault(cluster, run.sink, {**heal, run.sink: PARTITIONS})
                  for s, _, run in fault_runs if s.fault is not None}
        print(f"local[2,4]: {len(timed)} throughput runs of {args.rows:,} rows, "
              f"{len(fault_runs)} fault runs and 2 batch writes of {args.fault_rows:,} rows", flush=True)
        results = drive(Path(tmp) / "local-driver", "local[2,4]", [warm_up, *timed, *(r for _, _, r in fault_runs)],
                        faults=faults, batch_writes=list(writes.values()), timeout_s=DRIVER_TIMEOUT_S)

        killed = {mode: bench.run(f"driver kill {mode}", small, args.fault_rows, on, 2) for mode, on in MODES.items()}
        print(f"local[2,4]: {len(killed)} driver-kill runs, each on two drivers (killed, restarted)", flush=True)
        for mode, run in killed.items():
            results[run.name] = kill_driver_in_commit(Path(tmp) / f"driver-kill-{mode}", "local[2,4]", run,
                                                      timeout_s=DRIVER_TIMEOUT_S)

        kill = executor_kill(at)
        cluster_runs = [(kill, mode, bench.run(f"{kill.name} {mode}", small, args.fault_rows, on, 2, **kill.faults))
                        for mode, on in MODES.items()]
        kills = {run.name: KillExecutor() for _, _, run in cluster_runs}
        print(f"standalone cluster: {len(cluster_runs)} executor-kill runs", flush=True)
        results.update(drive(Path(tmp) / "cluster-driver", standalone.master_url, [r for _, _, r in cluster_runs],
                             faults=kills, executors=WORKERS, timeout_s=DRIVER_TIMEOUT_S))

        table = [(s.name, mode, bench.count(run.sink, args.fault_rows)) for s, mode, run in fault_runs]
        table += [("driver kill", mode, bench.count(run.sink, args.fault_rows)) for mode, run in killed.items()]
        table += [("task retry (batch write)", mode, bench.count(w.topic, args.fault_rows, transformed=False))
                  for mode, w in writes.items()]
        table += [(s.name, mode, bench.count(run.sink, args.fault_rows)) for s, mode, run in cluster_runs]
        victims = {name: getattr(f, "victim", None) for name, f in faults.items()}

    medians = summarize_throughput(timed, results, args.rows)
    print(f"\nthroughput: {args.rows:,} rows, {PARTITIONS} partitions, 4 micro-batches, local[2,4], "
          f"median of {args.rounds} rounds")
    print(f"{'exactlyOnce':12} {'rows/s (query)':>15} {'rows/s (sink)':>15}  rounds (query rows/s)")
    for mode in MODES:
        rounds = ", ".join(f"{args.rows / results[r.name]['seconds']:,.0f}"
                           for r in timed if r.exactly_once == MODES[mode])
        print(f"{mode:12} {medians[mode]['rows_per_s']:>15,.0f} {medians[mode]['sink_rows_per_s']:>15,.0f}  {rounds}")
    ratio = {k: medians["on"][k] / medians["off"][k] for k in medians["on"]}
    print(f"{'on / off':12} {ratio['rows_per_s']:>15.2f} {ratio['sink_rows_per_s']:>15.2f}")

    print(f"\nfault runs: {args.fault_rows:,} rows, 2 micro-batches, read back read_committed")
    print(f"{'scenario':26} {'exactlyOnce':>11} {'rows in':>8} {'rows out':>9} {'duplicates':>10} {'missing':>8}")
    for name, mode, c in table:
        other = f"  ({c.unexpected} rows of no input id)" if c.unexpected else ""
        print(f"{name:26} {mode:>11} {c.rows_in:>8,} {c.rows_out:>9,} {c.duplicates:>10,} {c.missing:>8,}{other}")
    print(f"broker victims: {victims}; {time.monotonic() - started:.0f} s in all")

    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"spark_exactly_once-{stamp}.json"
    out.write_text(json.dumps({
        "started": stamp, "code": code, "rows": args.rows, "rounds": args.rounds, "fault_rows": args.fault_rows,
        "throughput": {"medians": medians, "ratio": ratio,
                       "runs": {r.name: results[r.name] for r in timed}},
        "faults": [{"scenario": name, "exactlyOnce": mode, **c.as_dict()} for name, mode, c in table],
        "fault_run_results": {r.name: results[r.name] for _, _, r in fault_runs + cluster_runs},
        "broker_victims": victims,
    }, indent=2) + "\n")
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
