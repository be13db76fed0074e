"""The `odradek` data source on a Spark standalone cluster (1 master, 2 workers of 1 core)
against ``local[2]``, on the same data, in one run.

Start (or find) the brokers, create a topic of 6 partitions, produce N records (default
1,000,000) of 100-byte values spread evenly, start a standalone cluster from pyspark's
``spark-class`` (``odradek.spark.standalone``), then read the whole topic with each of

  * ``spark://`` (2 executors, one per worker), and
  * ``local[2]`` (the driver's own executor threads),

each job twice per round: ``df.count()`` and ``df.groupBy("partition").agg(count, sum of
value lengths)`` (the light aggregation touches every record's value). Each session first
runs a tiny job so JVM and Python-worker start-up are not timed. The cluster's first timed
job also reports which executor ran each scan task. Prints records/s of each (median of
--rounds) and the ratio cluster / local[2]; results land in
bench/results/spark_cluster_read-<time>.json.

    .venv/bin/python bench/spark_cluster_read.py [--records 1000000] [--rounds 3] [--lab DIR]

``--lab DIR`` reads from a lab's brokers (``odradek lab up``; bootstrap servers and ZooKeeper
from DIR/cluster.json, reached from here through the lab's management leg); the default is a
3-broker LocalCluster on loopback. The standalone cluster runs in this namespace either way.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace

from spark_read import PARTITIONS, create_topic, produce, read_with_spark

from odradek.local.cluster import LocalCluster
from odradek.perf.harness import unwind_on_sigterm
from odradek.spark.session import local_session
from odradek.spark.standalone import StandaloneCluster, cluster_session, stage_tasks

RESULTS = Path(__file__).resolve().parent / "results"
WORKERS = 2


def warm_up(spark, bootstrap: str, topic: str) -> None:  # type: ignore[no-untyped-def]
    ends = json.dumps({topic: {str(p): 1 for p in range(PARTITIONS)}})
    df = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("endingOffsets", ends).load())
    if df.count() != PARTITIONS:
        raise RuntimeError("warm-up read the wrong number of records")


def measure(make_session: Callable[[], object], name: str, bootstrap: str, topic: str, records: int,
            rounds: int, *, report_tasks: bool) -> dict[str, object]:
    spark = make_session()
    try:
        warm_up(spark, bootstrap, topic)
        spark.sparkContext.setJobGroup("timed", "timed reads")  # type: ignore[attr-defined]
        runs = {job: [read_with_spark(spark, bootstrap, topic, records, job) for _ in range(rounds)]
                for job in ("count", "bytes")}
        # local_session has no status UI; its tasks all run in the driver's executor anyway.
        tasks = stage_tasks(spark, "timed") if report_tasks else []  # type: ignore[arg-type]
    finally:
        spark.stop()  # type: ignore[attr-defined]
    first_scan = [t for t in tasks if t.stage_id == min(t.stage_id for t in tasks)]
    executors = {t.partition: t.executor_id for t in first_scan}
    if report_tasks:
        print(f"{name}: executor of each scan task (partition -> executor): {executors}")
    return {"runs": runs, "scan_executors": executors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lab", type=Path, help="read from this lab's brokers (DIR/cluster.json)")
    args = parser.parse_args()
    if args.records < PARTITIONS:
        parser.error(f"--records must be at least {PARTITIONS}")

    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="odradek-spark-cluster-") as tmp:
        if args.lab is not None:
            described = json.loads((args.lab / "cluster.json").read_text())
            brokers = SimpleNamespace(zookeeper_connect=described["zookeeper"],
                                      bootstrap_servers=described["bootstrap_servers"])
            replication = min(3, len(described.get("brokers", [])) or 1)
        else:
            brokers = stack.enter_context(LocalCluster(Path(tmp) / "kafka", 3))
            replication = 1
        bootstrap = brokers.bootstrap_servers
        topic = f"spark-cluster-read-{int(time.time())}"
        create_topic(brokers, topic, replication)  # type: ignore[arg-type]
        produced = produce(bootstrap, topic, args.records)
        standalone = stack.enter_context(StandaloneCluster(Path(tmp) / "spark", WORKERS))

        results = {
            "spark standalone (2 workers x 1 core)": measure(
                lambda: cluster_session(standalone.master_url, "odradek-bench", executors=WORKERS),
                "standalone", bootstrap, topic, args.records, args.rounds, report_tasks=True),
            "spark local[2]": measure(
                lambda: local_session("odradek-bench", cores=2), "local[2]", bootstrap, topic,
                args.records, args.rounds, report_tasks=False),
        }

    medians = {name: {job: statistics.median(r["records_per_s"] for r in runs)
                      for job, runs in result["runs"].items()}  # type: ignore[union-attr]
               for name, result in results.items()}
    cluster_name, local_name = list(results)
    print(f"\n{args.records:,} records in {PARTITIONS} partitions (produced at {produced:,.0f} records/s), "
          f"median of {args.rounds} rounds\n")
    print(f"{'reader':40} {'count rec/s':>14} {'aggregate rec/s':>16}")
    for name, jobs in medians.items():
        print(f"{name:40} {jobs['count']:>14,.0f} {jobs['bytes']:>16,.0f}")
    ratio = {job: medians[cluster_name][job] / medians[local_name][job] for job in ("count", "bytes")}
    print(f"{'ratio standalone / local[2]':40} {ratio['count']:>14.2f} {ratio['bytes']:>16.2f}")

    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"spark_cluster_read-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"records": args.records, "partitions": PARTITIONS, "lab": str(args.lab or ""),
                               "produced_records_per_s": produced, "results": results,
                               "medians": medians, "ratio": ratio}, indent=2))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
