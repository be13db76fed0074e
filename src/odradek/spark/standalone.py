"""A Spark standalone cluster (one master, N workers) started from the pyspark install's own
``bin/spark-class``, and what its applications' tasks ran where.

``StandaloneCluster`` runs ``org.apache.spark.deploy.master.Master`` and N
``org.apache.spark.deploy.worker.Worker`` JVMs in a temporary directory, on ephemeral ports,
with modest heaps (the daemons 256 MiB, each worker offering ``cores`` and ``memory`` to
applications). ``cluster_session`` connects a SparkSession to it (``spark://host:port``) with
the ``odradek`` data source registered. ``stage_tasks`` asks the driver's status REST API which
executor ran each task of a job, which is how the tests show that executors, not the driver,
read the Kafka partitions. ``executor_of`` finds the executor JVM a task's Python worker
belongs to, which is how a fault run kills the executor that runs a given task.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odradek.local.zookeeper import find_java, free_port
from odradek.spark.session import odradek_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "StandaloneCluster",
    "StandaloneError",
    "TaskRun",
    "cluster_session",
    "executor_of",
    "spark_home",
    "stage_tasks",
]

DAEMON_MEMORY = "256m"
EXECUTOR_MAIN_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
EXECUTOR_MEMORY = "512m"


class StandaloneError(RuntimeError):
    """The standalone cluster could not be started, or did not become ready."""


def spark_home() -> Path:
    """The pyspark install, which is a Spark distribution: ``bin/spark-class`` and ``jars``."""
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").exists():
        raise StandaloneError(f"no bin/spark-class in the pyspark install at {home}")
    return home


@dataclass(frozen=True)
class _Daemon:
    name: str
    process: subprocess.Popen[bytes]
    log: Path


class StandaloneCluster:
    """One master and ``workers`` workers on ``host``; ``start()`` returns once every worker
    has registered with the master, ``stop()`` ends them all (idempotent).

    Executors started by the workers inherit this process's environment, so they find the
    same ``PYTHONPATH``; the interpreter they run Python with is the application's choice
    (``cluster_session(executor_python=...)``)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        workers: int = 2,
        *,
        host: str = "127.0.0.1",
        cores: int = 1,
        memory: str = "1g",
    ) -> None:
        self.directory = Path(directory)
        self.workers = workers
        self.host = host
        self.cores = cores
        self.memory = memory
        self.port = free_port(host)
        self.webui_port = free_port(host)
        self._daemons: list[_Daemon] = []

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    @property
    def webui_url(self) -> str:
        return f"http://{self.host}:{self.webui_port}"

    def _environment(self) -> dict[str, str]:
        conf_dir = self.directory / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(conf_dir),  # none of the machine's spark-defaults.conf
            "SPARK_LOCAL_IP": self.host,
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_NO_DAEMONIZE": "1",
            "JAVA_HOME": str(Path(find_java()).resolve().parent.parent),
        }

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = self.directory / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *argv],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self._environment(), cwd=self.directory, start_new_session=True,
            )
        self._daemons.append(_Daemon(name, process, log))

    def start(self, timeout_s: float = 90.0) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self._spawn("master", [
                "org.apache.spark.deploy.master.Master",
                "--host", self.host, "--port", str(self.port), "--webui-port", str(self.webui_port),
            ])
            for i in range(self.workers):
                work_dir = self.directory / f"worker{i}"
                work_dir.mkdir(exist_ok=True)
                self._spawn(f"worker{i}", [
                    "org.apache.spark.deploy.worker.Worker", self.master_url,
                    "--host", self.host, "--webui-port", str(free_port(self.host)),
                    "--cores", str(self.cores), "--memory", self.memory,
                    "--work-dir", str(work_dir),
                ])
            self._wait_for_workers(timeout_s)
        except BaseException:
            self.stop()
            raise

    def status(self) -> dict | None:
        """The master's JSON status (workers, applications), or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.webui_url}/json", timeout=2) as response:
                return json.load(response)
        except OSError:
            return None

    def alive_workers(self) -> list[dict]:
        status = self.status() or {}
        return [w for w in status.get("workers", []) if w.get("state") == "ALIVE"]

    def _wait_for_workers(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.alive_workers()) < self.workers:
            for daemon in self._daemons:
                if daemon.process.poll() is not None:
                    raise StandaloneError(
                        f"spark {daemon.name} exited with {daemon.process.returncode}; "
                        f"see {daemon.log}"
                    )
            if time.monotonic() > deadline:
                raise StandaloneError(
                    f"{len(self.alive_workers())} of {self.workers} spark workers registered with "
                    f"{self.master_url} within {timeout_s:.0f}s; see the logs in {self.directory}"
                )
            time.sleep(0.2)

    def stop(self, timeout_s: float = 15.0) -> None:
        # Workers first (they kill their executors), then the master.
        for daemon in reversed(self._daemons):
            if daemon.process.poll() is None:
                daemon.process.terminate()
        for daemon in reversed(self._daemons):
            try:
                daemon.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.process.pid, 9)
                daemon.process.wait()
        self._daemons.clear()

    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def cluster_session(
    master_url: str,
    app_name: str = "odradek",
    *,
    executor_python: str | None = None,
    executor_env: dict[str, str] | None = None,
    driver_host: str = "127.0.0.1",
    conf: dict[str, str] | None = None,
    executors: int = 0,
    timeout_s: float = 60.0,
) -> SparkSession:
    """A SparkSession on the standalone master ``master_url`` with the ``odradek`` data source
    registered, the driver's status UI on a free port (for ``stage_tasks``), one 512 MiB
    executor per worker.

    ``executor_python`` is the interpreter the Python workers run (default: this one). Spark
    starts every Python worker, on the driver and on the executors alike, with the path the
    driver's ``PYSPARK_PYTHON`` names, so it must exist on every machine: the same install
    path on each worker, or a relative one such as ``./environment/bin/python`` inside an
    archive shipped with ``spark.archives`` (README, "Spark on a cluster").
    ``executor_env`` sets executors' environment variables (``spark.executorEnv.*``).
    With ``executors``, returns once that many executors have registered, so the first job's
    tasks can spread over all of them."""
    os.environ["PYSPARK_PYTHON"] = executor_python or sys.executable
    spark = odradek_session(master_url, app_name, {
        "spark.driver.host": driver_host,
        "spark.driver.bindAddress": driver_host,
        "spark.executor.memory": EXECUTOR_MEMORY,
        "spark.executor.cores": "1",
        "spark.ui.port": str(free_port(driver_host)),
        "spark.sql.shuffle.partitions": "4",
        **{f"spark.executorEnv.{name}": value for name, value in (executor_env or {}).items()},
        **(conf or {}),
    })
    try:
        _wait_for_executors(spark, executors, timeout_s)
    except BaseException:
        spark.stop()
        raise
    return spark


def _executor_ids(spark: SparkSession) -> list[str]:
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/executors"
    with urllib.request.urlopen(url, timeout=10) as response:
        return [e["id"] for e in json.load(response) if e["id"] != "driver" and e["isActive"]]


def _wait_for_executors(spark: SparkSession, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    registered = 0
    while registered < count:
        if time.monotonic() > deadline:
            raise StandaloneError(
                f"{registered} of {count} executors registered within "
                f"{timeout_s:.0f}s (the master's workers may lack free cores or memory)"
            )
        try:
            registered = len(_executor_ids(spark))
        except OSError:
            pass  # the driver's UI answers late on a loaded machine: ask again until the deadline
        if registered < count:
            time.sleep(0.2)


@dataclass(frozen=True)
class TaskRun:
    """One task of a stage: the input partition it computed and the executor that ran it."""

    stage_id: int
    partition: int
    executor_id: str
    host: str
    status: str
    stage_name: str = ""


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def stage_tasks(spark: SparkSession, job_group: str | None = None) -> list[TaskRun]:
    """The successful tasks of the completed stages of the jobs run under ``job_group``
    (``setJobGroup``), or of every completed stage of the application when it is None (a
    streaming query's jobs are in no group of the caller's), first stage first, from the
    driver's status REST API (``/api/v1/applications/<app>/stages``): executor ids are the
    cluster's (``"driver"`` only in local mode)."""
    sc = spark.sparkContext
    if sc.uiWebUrl is None:
        raise StandaloneError("stage_tasks needs the driver's status UI (spark.ui.enabled)")
    base = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages"
    if job_group is None:
        attempts = _get_json(f"{base}?status=complete")
    else:
        tracker = sc.statusTracker()
        stage_ids: list[int] = []
        for job_id in tracker.getJobIdsForGroup(job_group):
            info = tracker.getJobInfo(job_id)
            if info is not None:
                stage_ids.extend(info.stageIds)
        attempts = [a for stage_id in stage_ids for a in _get_json(f"{base}/{stage_id}")]
    runs: list[TaskRun] = []
    for attempt in sorted(attempts, key=lambda a: (a["stageId"], a["attemptId"])):
        if attempt.get("status") != "COMPLETE":
            continue
        tasks = _get_json(f"{base}/{attempt['stageId']}/{attempt['attemptId']}/taskList?length=100000")
        runs.extend(
            TaskRun(attempt["stageId"], t["index"], t["executorId"], t["host"], t["status"], attempt["name"])
            for t in tasks if t["status"] == "SUCCESS"
        )
    return runs


def executor_of(pid: int) -> int:
    """The process id of the executor JVM whose Python worker (or any descendant) is ``pid``:
    the nearest ancestor running the executor's main class. Linux (/proc) only."""
    current = pid
    while current > 1:
        proc = Path("/proc") / str(current)
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            # /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces, not ")".
            parent = int((proc / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, IndexError, ValueError) as e:
            raise StandaloneError(f"process {pid}: cannot follow its parents at {current}: {e}") from e
        if EXECUTOR_MAIN_CLASS.encode() in argv:
            return current
        current = parent
    raise StandaloneError(f"process {pid} does not run under a Spark executor")
