"""The sink's ``exactlyOnce`` under task retries and a broker kill, on real brokers, read back
with read_committed and checked by row id:

- task retries: the first attempt of chosen write tasks fails after part of its rows reached
  the brokers (its transaction left open, as if its executor died), and Spark runs the task
  again. A batch write and a streaming query hold every input row once with the option, and
  the failed attempts' rows twice without;
- a broker SIGKILLed in the middle of a micro-batch (RF 3, min.insync.replicas=2): while a
  task is paused with part of its rows written, the leader of an output partition dies; the
  task goes on against the two brokers left, and the broker restarts after the run. With the
  option only: without it the tasks' idempotent producers retry through the leader change and
  write each row once too, which bench/spark_exactly_once.py shows (it also kills the
  controller) and this run would only make slower.

Spark retries tasks only on a master that allows it (``local[2,4]``), so the queries run in a
driver process of their own (odradek.spark.fault_driver), one application for all of them.
The brokers are a cluster of this module's own (a broker of the session's cluster must not
die under the other Spark tests)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.spark.fault_pipeline import BatchWrite, PipelineRun
from odradek.spark.fault_runs import KillBroker, OutputCount, committed_output, drive, produce_input
from odradek.spark.sink_state import STATE_TOPIC_PARTITIONS
from support import create_topic, unique_chroot, unique_topic

PARTITIONS = 4
ROWS = 4000  # batch write: 4 Spark partitions of about 1000 rows
RECORDS = 4000  # stream: 1000 per input partition, 2 micro-batches of 500 per partition
MAX_OFFSETS = 2000
BATCH_FAULTS, BATCH_FAILED_ROWS = "0,1@300", 2 * 300  # failed attempts x rows they wrote
STREAM_FAULTS, STREAM_FAILED_ROWS = "0,2@200", 2 * 2 * 200  # micro-batches x failed attempts x rows
BROKER_PAUSE = "1@200"  # task 1 of the one micro-batch, 200 rows written
MODES = {"on": True, "off": False}
# A small transaction log: the restarted broker has fewer partitions to catch up on.
TRANSACTION_LOG_PARTITIONS = 4
# The module's one driver application (batch writes, retried queries, a broker kill) took 225 s
# in a CI run and passed 300 s on a more loaded machine: the fixture's bound is the module's.
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def eos_cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """3 brokers, RF 3 (the sink's state topic too) and min.insync.replicas=2."""
    cluster = LocalCluster(
        tmp_path_factory.mktemp("eos-cluster"), 3, zookeeper_connect=unique_chroot(zookeeper, "spark-eos"),
        overrides={"min.insync.replicas": "2", "default.replication.factor": "3",
                   "transaction.state.log.num.partitions": str(TRANSACTION_LOG_PARTITIONS)},
    )
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def new_topic(cluster: LocalCluster, prefix: str) -> str:
    name = unique_topic(prefix)
    create_topic(cluster, name, PARTITIONS, 3)
    return name


@pytest.fixture(scope="module")
def fault_runs(eos_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Batch writes and streaming queries with failing tasks, with exactlyOnce on and off, then
    a streaming query losing a broker, on one driver application."""
    directory = tmp_path_factory.mktemp("eos-faults")
    bootstrap = eos_cluster.bootstrap_servers
    source = new_topic(eos_cluster, "eos-in")
    produce_input(bootstrap, source, RECORDS, PARTITIONS)
    state_topic = unique_topic("eos-state")
    writes = [BatchWrite(bootstrap, new_topic(eos_cluster, f"eos-batch-{mode}"), ROWS, PARTITIONS, on,
                         state_topic, BATCH_FAULTS) for mode, on in MODES.items()]

    def run(name: str, on: bool, max_offsets: int, **faults: str) -> PipelineRun:
        return PipelineRun(name=name, bootstrap=bootstrap, source=source, sink=new_topic(eos_cluster, f"eos-{name}"),
                           checkpoint=str(directory / f"checkpoint-{name}"), exactly_once=on,
                           max_offsets=max_offsets, marker=str(directory / f"pause-{name}"),
                           state_topic=state_topic, **faults)

    retried = [run(f"retry-{mode}", on, MAX_OFFSETS, fail_tasks=STREAM_FAULTS) for mode, on in MODES.items()]
    broker_kill = run("broker-kill", True, RECORDS, pause=BROKER_PAUSE)
    kill = KillBroker(eos_cluster, broker_kill.sink, {source: PARTITIONS, state_topic: STATE_TOPIC_PARTITIONS,
                                                      broker_kill.sink: PARTITIONS})
    results = drive(directory / "driver", "local[2,4]", [*retried, broker_kill], faults={broker_kill.name: kill},
                    batch_writes=writes)
    return {"writes": writes, "retried": retried, "broker_kill": broker_kill, "results": results,
            "victim": kill.victim}


def output(cluster: LocalCluster, topic: str, rows: int, *, transformed: bool = True) -> OutputCount:
    return OutputCount.of(rows, committed_output(cluster.bootstrap_servers, topic, PARTITIONS), transformed=transformed)


def once(rows: int) -> OutputCount:
    return OutputCount(rows, rows, duplicates=0, missing=0, unexpected=0)


def twice(rows: int, duplicates: int) -> OutputCount:
    return OutputCount(rows, rows + duplicates, duplicates=duplicates, missing=0, unexpected=0)


def test_retried_write_tasks_write_each_row_once_with_exactly_once_and_twice_without(
    eos_cluster: LocalCluster, fault_runs: dict
):
    batch_on, batch_off = (output(eos_cluster, w.topic, ROWS, transformed=False) for w in fault_runs["writes"])
    assert (batch_on, batch_off) == (once(ROWS), twice(ROWS, BATCH_FAILED_ROWS))

    for r in fault_runs["retried"]:
        assert fault_runs["results"][r.name]["batches"] == [MAX_OFFSETS, MAX_OFFSETS]
    stream_on, stream_off = (output(eos_cluster, r.sink, RECORDS) for r in fault_runs["retried"])
    assert (stream_on, stream_off) == (once(RECORDS), twice(RECORDS, STREAM_FAILED_ROWS))


def test_a_broker_killed_mid_batch_costs_exactly_once_nothing(eos_cluster: LocalCluster, fault_runs: dict):
    run = fault_runs["broker_kill"]
    assert fault_runs["victim"] is not None
    assert fault_runs["results"][run.name]["batches"] == [RECORDS]
    assert output(eos_cluster, run.sink, RECORDS) == once(RECORDS)
