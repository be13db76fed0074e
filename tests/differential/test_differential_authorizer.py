"""The differential oracle with the ACL authorizer on (oracle/cases_secure.py): one broker per
side, SASL on its listeners, a ``client`` user with no ACLs, then with ACLs granted by the
``admin`` super-user (local/security.py's setup, Kafka's broker settings)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from oracle import cases_secure
from oracle.case import CaseRun
from oracle.check import check
from oracle.clusters import cluster_pair
from oracle.side import Side

from odradek.local.zookeeper import EmbeddedZooKeeper

CASES = cases_secure.CASES


@pytest.fixture(scope="module")
def sides(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side]]:
    with cluster_pair(zookeeper, tmp_path_factory.mktemp("oracle-acl"), 1, security="sasl_plaintext") as pair:
        yield pair


def test_case(oracle_case: CaseRun, sides: tuple[Side, Side]) -> None:
    check(oracle_case, *sides)
