"""The broker and the handlers' fake both satisfy every API family's Protocol (broker/context.py),
down to the calls each family makes on its ZooKeeper-facing collaborators."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_broker import FakeBroker

from odradek.broker import context
from odradek.broker.context import FAMILIES, ProduceFetchContext
from odradek.broker.server import KafkaServer
from odradek.config import KafkaConfig


def _collaborators(family: type) -> Iterator[tuple[str, type]]:
    """(member, Protocol) for each member a family types as one of context.py's Protocols."""
    for klass in family.__mro__:
        for name, member in vars(klass).items():
            if isinstance(member, property):
                protocol = getattr(context, member.fget.__annotations__["return"], None)  # type: ignore[union-attr]
                if protocol is not None:
                    yield name, protocol


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_the_server_and_the_fake_have_what_each_family_uses(family: type, tmp_path: Path) -> None:
    async def build() -> tuple[KafkaServer, FakeBroker]:
        config = KafkaConfig.from_props({"broker.id": "0", "zookeeper.connect": "unused:2181",
                                         "log.dirs": str(tmp_path / "server")})
        fake = FakeBroker(tmp_path / "fake")
        await fake.shutdown()
        return KafkaServer(config), fake

    for broker in asyncio.run(build()):
        assert isinstance(broker, family)
        for name, protocol in _collaborators(family):
            assert isinstance(getattr(broker, name), protocol), (type(broker).__name__, name, protocol.__name__)


def test_every_family_with_a_collaborator_protocol_is_checked_down_to_it() -> None:
    checked = {name for family in FAMILIES for name, _ in _collaborators(family)}
    assert checked == {"topic_admin", "zk", "acl_store", "producer_ids", "controller"}


def test_a_missing_member_is_noticed() -> None:
    class NoReplicaManager:
        authorizer = None
        fetch_sessions = None

    assert not isinstance(NoReplicaManager(), ProduceFetchContext)
