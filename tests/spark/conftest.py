"""Fixtures of the Spark data source tests: one odradek cluster, one Tansu broker (the data
source read across another Kafka-compatible broker's transaction markers) and one
SparkSession per test run.

Tests give the data source a broker's bootstrap string (``kafka_bootstrap``,
``tansu_bootstrap``) and create topics on the broker itself: ``odradek_broker.new_topic(...)``,
``tansu_broker.new_topic(...)``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

import odradek.spark
from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.spark import offset_reader
from support import OdradekBroker, TansuBroker, unique_chroot

# Three brokers and RF 3 topics: the data source reads from partition leaders spread over
# the cluster and writes with acks=all through real replication, as in production.
NUM_BROKERS = 3
REPLICATION_FACTOR = 3
# Retention runs every second, so a test that shortens a topic's retention sees it act soon.
BROKER_OVERRIDES = {"log.retention.check.interval.ms": "1000", "log.cleaner.backoff.ms": "200"}


@pytest.fixture(scope="session")
def odradek_broker(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OdradekBroker]:
    """A 3-broker odradek cluster for the whole run, in its own ZooKeeper chroot of the
    run's embedded ZooKeeper."""
    cluster = LocalCluster(
        tmp_path_factory.mktemp("spark-cluster"),
        NUM_BROKERS,
        zookeeper_connect=unique_chroot(zookeeper, "spark"),
        overrides=BROKER_OVERRIDES,
    )
    try:
        cluster.start()
        yield OdradekBroker(cluster, REPLICATION_FACTOR)
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(odradek_broker: OdradekBroker) -> str:
    """``host:port,...`` of the odradek cluster every data source test runs against."""
    return odradek_broker.bootstrap


@pytest.fixture(scope="session")
def tansu_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    """A Tansu broker: the data source's reads across transaction markers, checked against
    another Kafka-compatible broker than odradek (whose own transactions the exactly-once sink
    tests use). Started only if such a test runs.
    """
    broker = TansuBroker(tmp_path_factory.mktemp("tansu") / "tansu.log")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def tansu_bootstrap(tansu_broker: TansuBroker) -> str:
    """``host:port`` of the Tansu broker."""
    return tansu_broker.bootstrap


@pytest.fixture(scope="session")
def spark(odradek_broker: OdradekBroker) -> Iterator[SparkSession]:
    """One local SparkSession (2 cores) for the run, with the data source registered.

    It starts after the odradek cluster and so stops before it: the data source's Python
    workers keep their Kafka clients until the session ends, and those would otherwise
    keep reconnecting to the stopped brokers."""
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


@pytest.fixture(autouse=True)
def drop_driver_admin_clients() -> Iterator[None]:
    """The data source keeps one AdminClient per client config for the life of the process
    (``offset_reader.admin_client``); tests that call it here, in the driver's process, leave
    clients that would keep reconnecting to brokers stopped at the end of the run. Dropping
    them after each test destroys them while their brokers still run."""
    yield
    offset_reader.drop_admin_clients()
