"""A case: one scenario of one API, run at each version both sides advertise, on both sides,
and compared.

``Case(ApiKey.METADATA, "unknown-topic", one(lambda s: rq.metadata(s.req, ["no-such-topic"])))``
is a whole case: :func:`expand` turns a table of them into pytest parameters (every common
version with ``--oracle-full``, the highest one otherwise), and :func:`compare` runs one on
both sides and returns the differences left after normalisation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pytest
from oracle.compare import Difference, Normaliser, Tree, diff, to_tree
from oracle.kafka_versions import KAFKA_3_9
from oracle.side import Session, Side

from odradek.broker.apis import load_handlers
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.framing import request_schema

__all__ = ["Case", "CaseRun", "compare", "expand", "one", "slug"]


def slug(api: int) -> str:
    """An API's name in case ids: ``create-topics``."""
    return ApiKey(api).name.lower().replace("_", "-")


@dataclass(frozen=True)
class Case:
    """One scenario of one API: ``run`` sends its requests through a :class:`Session` and
    returns what is compared (a response, or a dict of named responses); ``versions``
    narrows the versions it applies to (inclusive); ``normalise`` rewrites both sides'
    trees further, for what this scenario makes differ legitimately."""

    api: ApiKey
    scenario: str
    run: Callable[[Session], Any]
    versions: tuple[int, int] | None = None
    normalise: Callable[[Tree], Tree] | None = None


@dataclass(frozen=True)
class CaseRun:
    """A case at one version."""

    case: Case
    version: int

    @property
    def id(self) -> str:
        return f"{slug(self.case.api)}-v{self.version}-{self.case.scenario}"


def one(build: Callable[[Session], Any], broker: Callable[[Session], int] | int = 0) -> Callable[[Session], Any]:
    """A scenario of one request: ``build(session)`` sent to ``broker`` (an id, or a
    function of the session: a partition's leader, the controller)."""
    def run(s: Session) -> Any:
        return s.call(build(s), broker if isinstance(broker, int) else broker(s))
    return run


def common_versions(api: int) -> range:
    """The versions of ``api`` both Kafka 3.9 and odradek advertise and kio can build."""
    spec = load_handlers().get(api)
    theirs = KAFKA_3_9.get(api)
    if spec is None or theirs is None:
        return range(0)
    low, high = max(spec.min_version, theirs[0]), min(spec.max_version, theirs[1])
    return range(next((v for v in range(low, high + 1) if request_schema(api, v) is not None), high + 1), high + 1)


def expand(cases: Iterable[Case], full: bool) -> list[Any]:
    """pytest parameters: each case at every common version (``full``) or at the highest."""
    params = []
    for case in cases:
        versions = [v for v in common_versions(case.api)
                    if case.versions is None or case.versions[0] <= v <= case.versions[1]]
        assert versions, f"{slug(case.api)} {case.scenario}: no version both sides advertise"
        for version in versions if full else versions[-1:]:
            run = CaseRun(case, version)
            params.append(pytest.param(run, id=run.id))
    return params


def compare(run: CaseRun, kafka: Side, odradek: Side) -> tuple[list[Difference], dict[str, Tree]]:
    """Run the case on both sides; the differences of the normalised answers, and the answers."""
    trees = {}
    for side in (kafka, odradek):
        session = Session(side, run.case.api, run.version, run.id)
        try:
            tree = to_tree(run.case.run(session))
        finally:
            session.close()
        tree = Normaliser(side.topic_name, lambda side=side: side.controller)(tree)
        if run.case.normalise is not None:
            tree = run.case.normalise(tree)
        trees[side.name] = tree
    return diff(trees["kafka"], trees["odradek"]), trees
