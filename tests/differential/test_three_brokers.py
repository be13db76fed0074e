"""The differential oracle on three brokers per side (oracle/cases_three.py): requests to a
broker that is not the leader, the controller or the coordinator, replicated topics,
control requests from a stale controller, and auto-creation with
``auto.create.topics.enable`` on both sides."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from oracle import cases_three
from oracle.case import CaseRun
from oracle.check import check
from oracle.clusters import cluster_pair
from oracle.side import Side

from odradek.local.zookeeper import EmbeddedZooKeeper

CASES = cases_three.CASES

# odradek's default is off (see docs/COMPATIBILITY.md); here both sides create topics on demand.
SETTINGS = {"auto.create.topics.enable": "true"}


@pytest.fixture(scope="module")
def sides(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side]]:
    with cluster_pair(zookeeper, tmp_path_factory.mktemp("oracle-three"), 3, overrides=SETTINGS) as pair:
        yield pair


def test_case(oracle_case: CaseRun, sides: tuple[Side, Side]) -> None:
    check(oracle_case, *sides)
