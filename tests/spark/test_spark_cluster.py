"""The data source on a Spark standalone cluster (one master, two workers, one core each):
executors, not the driver, read the Kafka partitions; a batch read and a streaming
``availableNow`` query each see every record exactly once, also after a restart from the
checkpoint; an executor whose Python lacks odradek fails the job with one line saying so; an
executor SIGKILLed in the middle of a write costs the exactlyOnce sink nothing and the
at-least-once sink the rows the killed task had written.

The drivers run as separate processes (tests/spark/cluster_driver.py, and
odradek.spark.fault_driver through odradek.spark.fault_runs): this process's SparkContext is
the run's ``local[2]`` session."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from odradek.spark.fault_pipeline import PipelineRun
from odradek.spark.fault_runs import (
    DriverProcess,
    KillExecutor,
    OutputCount,
    committed_output,
    produce_input,
    strike,
)
from odradek.spark.standalone import StandaloneCluster
from odradek.spark.worker_python import EXECUTOR_FIXES
from support import OdradekBroker

WORKERS = 2
PARTITIONS = 6
RECORDS = 3000
MORE = 1000
DRIVER = Path(__file__).with_name("cluster_driver.py")

# The module's one driver application (reads, then two executor kills) took over 300 s, the
# suite's default bound, in a fresh-clone run of the whole suite (198 s for the module alone).
pytestmark = pytest.mark.timeout(900)
KILL_PARTITIONS = 4
KILL_ROWS = 2000  # one micro-batch of 500 rows per partition
KILL_AFTER = 300  # rows of the task on the brokers when its executor dies
# The last task: by the time it pauses the other executor is done with most of the others, so
# it takes the retry at once rather than the killed executor's cold replacement.
KILL_TASK = KILL_PARTITIONS - 1


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), WORKERS, cores=1, memory="1g")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def produce(bootstrap: str, topic: str, records: list[tuple[str, str]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i, (key, value) in enumerate(records):
        producer.produce(topic, value.encode(), key.encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def kill_runs(broker: OdradekBroker, directory: Path) -> list[PipelineRun]:
    """Two queries odradek -> upper-case -> odradek, exactlyOnce on then off, whose task
    KILL_TASK pauses once KILL_AFTER of its rows are on the brokers."""
    source = broker.new_topic("eos-kill-executor-in", KILL_PARTITIONS)
    produce_input(broker.bootstrap, source, KILL_ROWS, KILL_PARTITIONS)
    return [
        PipelineRun(
            name=mode, bootstrap=broker.bootstrap, source=source,
            sink=broker.new_topic(f"eos-kill-executor-{mode}", KILL_PARTITIONS),
            checkpoint=str(directory / f"checkpoint-{mode}"), exactly_once=mode == "on",
            max_offsets=KILL_ROWS, marker=str(directory / f"pause-{mode}"), pause=f"{KILL_TASK}@{KILL_AFTER}",
        )
        for mode in ("on", "off")
    ]


@pytest.fixture(scope="module")
def cluster_read(spark_cluster: StandaloneCluster, odradek_broker: OdradekBroker,
                 tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One driver application: a batch read, then two availableNow runs of one streaming query,
    then the two queries of ``kill_runs``, each losing the executor of its paused task (the
    application's warm executors save the fault runs a second start-up)."""
    directory = tmp_path_factory.mktemp("cluster-read")
    topic = odradek_broker.new_topic("cluster-read", PARTITIONS)
    first = [(f"k{i % 17}", f"v{i}") for i in range(RECORDS)]
    more = [(f"k{i % 17}", f"v{i}") for i in range(RECORDS, RECORDS + MORE)]
    produce(odradek_broker.bootstrap, topic, first)
    runs = kill_runs(odradek_broker, directory)
    kills = {run.name: KillExecutor() for run in runs}
    driver = DriverProcess(directory, {
        "job": "read", "master": spark_cluster.master_url, "workers": WORKERS,
        "bootstrap": odradek_broker.bootstrap, "topic": topic, "more": more,
        "output": str(directory / "out"), "checkpoint": str(directory / "checkpoint"),
        "fault_runs": [run.to_json() for run in runs],
    }, program=[str(DRIVER)])
    try:
        strike(driver, runs, kills)
        result = driver.result()
    finally:
        driver.stop()
    return {**result, "first": first, "more": more, "output": directory / "out", "kill_runs": runs,
            "killed_executors": {name: kill.executor_pid for name, kill in kills.items()}}


def test_executors_read_every_partition(cluster_read: dict) -> None:
    scan = [t for t in cluster_read["tasks"] if t[0] == min(s for s, _, _ in cluster_read["tasks"])]
    assert sorted(partition for _, partition, _ in scan) == list(range(PARTITIONS))
    executors = {executor for _, _, executor in scan}
    assert "driver" not in executors
    assert len(executors) == WORKERS, f"tasks ran on executors {executors}, not on both workers'"


def test_batch_read_sees_every_record_once(cluster_read: dict) -> None:
    read = Counter((key, value) for key, value, _ in cluster_read["rows"])
    assert read == Counter(cluster_read["first"])
    assert {p for _, _, p in cluster_read["rows"]} == set(range(PARTITIONS))


def test_streaming_available_now_exactly_once_across_a_restart(cluster_read: dict) -> None:
    assert cluster_read["stream_input_rows"] == [RECORDS, MORE]
    table = pq.ParquetDataset(cluster_read["output"]).read()
    written = Counter(zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True))
    assert written == Counter(cluster_read["first"] + cluster_read["more"])


def test_an_executor_killed_mid_write_duplicates_its_rows_only_without_exactly_once(
    cluster_read: dict, odradek_broker: OdradekBroker
) -> None:
    """Spark runs the killed task again on an executor that lives: with exactlyOnce its new
    attempt fences and aborts the dead one's transaction; without, the KILL_AFTER rows the dead
    attempt wrote stay, and the new attempt writes them again."""
    on, off = cluster_read["kill_runs"]
    for run in (on, off):
        assert cluster_read["fault_runs"][run.name]["batches"] == [KILL_ROWS]
        assert cluster_read["killed_executors"][run.name] is not None
    counts = [OutputCount.of(KILL_ROWS, committed_output(odradek_broker.bootstrap, run.sink, KILL_PARTITIONS))
              for run in (on, off)]
    assert counts == [
        OutputCount(KILL_ROWS, KILL_ROWS, duplicates=0, missing=0, unexpected=0),
        OutputCount(KILL_ROWS, KILL_ROWS + KILL_AFTER, duplicates=KILL_AFTER, missing=0, unexpected=0),
    ]


def _shell_python(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def test_an_executor_without_odradek_fails_with_one_line(
    spark_cluster: StandaloneCluster, odradek_broker: OdradekBroker, tmp_path: Path
) -> None:
    """The executors run this interpreter with ``-S`` (no site-packages, so neither odradek
    nor confluent-kafka), shipped as ``spark.archives`` (the packed-virtualenv route), with
    Spark's own needs (pyarrow, numpy) on its path; the driver's Python workers run this
    interpreter as it is, from ``./environment`` in its directory."""
    bare_python = Path(sys.executable)
    topic = odradek_broker.new_topic("bare-executors", 2)
    produce(odradek_broker.bootstrap, topic, [("k", "v")] * 4)
    site_packages = Path(sys.modules["pyarrow"].__file__).parent.parent
    deps = tmp_path / "deps"
    deps.mkdir()
    for module in ("pyarrow", "numpy"):
        (deps / module).symlink_to(site_packages / module)
    # Keep only Spark's own PYTHONPATH entries (pyspark.zip, py4j): the job's src/ would bring odradek.
    spark_paths = "$(echo \"$PYTHONPATH\" | tr ':' '\\n' | grep -E '[.](zip|jar)$' | paste -sd:)"
    _shell_python(tmp_path / "bare" / "bin" / "python",
                  f'PYTHONPATH="{deps}:{spark_paths}" exec {bare_python} -S "$@"')
    archive = tmp_path / "bare.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", str(tmp_path / "bare"), "bin"], check=True)
    driver_dir = tmp_path / "driver"
    _shell_python(driver_dir / "environment" / "bin" / "python", f'exec {sys.executable} "$@"')

    driver = DriverProcess(driver_dir, {
        "job": "bare-executors", "master": spark_cluster.master_url,
        "bootstrap": odradek_broker.bootstrap, "topic": topic, "executor_archive": str(archive),
    }, program=[str(DRIVER)], timeout_s=240)
    try:
        result = driver.result()
    finally:
        driver.stop()

    assert result["error"] is not None, "the read succeeded on executors without odradek"
    lines = [line for line in result["error"].splitlines() if line.startswith("RuntimeError: odradek")]
    assert len(lines) == 1, result["error"][-3000:]
    assert f"the executor's Python {bare_python} " in lines[0]
    assert "cannot import odradek, confluent_kafka;" in lines[0]
    assert lines[0].endswith(EXECUTOR_FIXES)

