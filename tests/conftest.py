"""Shared fixtures: one embedded ZooKeeper per test run, a fresh chroot per cluster, brokers
as real processes in temporary directories.  Every fixture stops what it starts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from support import ClusterFactory, unique_chroot


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    zk = EmbeddedZooKeeper(tmp_path_factory.mktemp("zookeeper"))
    zk.start()
    try:
        yield zk
    finally:
        zk.stop()


@pytest.fixture
def zk_connect(zookeeper: EmbeddedZooKeeper) -> str:
    """A connect string with a chroot no other test uses."""
    return unique_chroot(zookeeper, "t")


@pytest.fixture
def cluster_factory(zookeeper: EmbeddedZooKeeper, tmp_path: Path) -> Iterator[ClusterFactory]:
    factory = ClusterFactory(zookeeper, tmp_path)
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture(scope="module")
def module_cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A 3-broker cluster shared by the tests of one module (tests must not break it)."""
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("module-cluster"))
    try:
        yield factory(3)
    finally:
        factory.stop_all()
