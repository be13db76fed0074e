"""The differential oracle on one broker per side: Apache Kafka 3.9 and odradek get the same
requests and must give the same answers, but for the differences docs/COMPATIBILITY.md
documents (oracle/known.py).

- every case of oracle/cases_one.py (every API odradek advertises, valid requests and the
  errors a client can provoke on its own), at the highest version both advertise, or every
  such version with ``--oracle-full``;
- the ApiVersions answers themselves;
- malformed frames: both close the connection, or both answer alike, or both wait.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from oracle import cases_one, known, malformed
from oracle.case import CaseRun
from oracle.check import check
from oracle.clusters import cluster_pair
from oracle.compare import Normaliser, diff, to_tree
from oracle.kafka_versions import KAFKA_3_9
from oracle.side import Session, Side

from odradek.broker.apis import load_handlers
from odradek.broker.apis.api_versions import advertised_versions
from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.protocol.api_keys import ApiKey

CASES = cases_one.CASES

# Broker keys set (alike) on both sides, so that the cases see static broker configs too.
SETTINGS = {"log.retention.hours": "170", "log.roll.hours": "170"}


@pytest.fixture(scope="module")
def sides(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side]]:
    with cluster_pair(zookeeper, tmp_path_factory.mktemp("oracle-one"), 1, overrides=SETTINGS) as pair:
        yield pair


def test_case(oracle_case: CaseRun, sides: tuple[Side, Side]) -> None:
    check(oracle_case, *sides)


def api_versions(side: Side) -> dict[int, tuple[int, int]]:
    session = Session(side, ApiKey.API_VERSIONS, 3, "api-versions")
    try:
        answer = session.call(session.req.ApiVersionsRequest(client_software_name="oracle",
                                                             client_software_version="1"))
    finally:
        session.close()
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}


def test_api_versions(sides: tuple[Side, Side]) -> None:
    """Kafka advertises what oracle/kafka_versions.py records, odradek its handler table; each
    api key whose ranges differ has its reason in oracle/known.py's ADVERTISED, and nothing
    else is there."""
    kafka, odradek = (api_versions(side) for side in sides)
    assert kafka == KAFKA_3_9
    assert odradek == advertised_versions(load_handlers())
    differing = {key for key in kafka.keys() | odradek.keys() if kafka.get(key) != odradek.get(key)}
    assert differing - known.ADVERTISED.keys() == set(), "undocumented: " + ", ".join(
        f"{ApiKey(k).name if k in ApiKey._value2member_map_ else k} kafka {kafka.get(k)} odradek {odradek.get(k)}"
        for k in sorted(differing - known.ADVERTISED.keys()))
    assert known.ADVERTISED.keys() - differing == set(), "documented but no longer differing"


@pytest.mark.parametrize(("data", "response_type"), [pytest.param(data, response_type, id=name)
                                                     for name, data, response_type in malformed.FRAMES])
def test_malformed_frame(request: pytest.FixtureRequest, sides: tuple[Side, Side], data: bytes,
                         response_type: type | None) -> None:
    name = request.node.callspec.id
    outcomes = {}
    for side in sides:
        session = Session(side, ApiKey.API_VERSIONS, 0, name)
        try:
            tree = to_tree(malformed.outcome(session, data, response_type))
        finally:
            session.close()
        outcomes[side.name] = Normaliser(side.topic_name, lambda side=side: side.controller)(tree)
    differences = diff(outcomes["kafka"], outcomes["odradek"])
    if name in known.FRAMES:
        assert differences, f"documented as different ({known.FRAMES[name]}), now alike: {outcomes}"
    else:
        assert not differences, f"{[str(d) for d in differences]}: {outcomes}"


def test_compatibility_page_documents_every_known_difference() -> None:
    page = (Path(__file__).parents[2] / "docs" / "COMPATIBILITY.md").read_text()
    anchors = ({k.id for k in known.KNOWN} | {a for ids in known.ADVERTISED.values() for a in ids}
               | set(known.FRAMES.values()))
    missing = sorted(a for a in anchors if f"<a id=\"{a}\"></a>" not in page)
    assert not missing, f"docs/COMPATIBILITY.md lacks sections for {missing}"
