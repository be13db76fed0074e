"""What a suite is and what it reports.

A suite is one module ``compat/suites/<name>.py`` with:

* ``NAME`` (the row's name, e.g. ``"java-clients"``), ``ORDER`` (its place in the table) and
  ``TITLE`` (one line: what runs);
* ``VARIANTS``: the clusters it runs against, e.g. ``(Variant(), Variant("sasl_ssl",
  security="sasl_ssl", quick=False))``;
* ``BROKER_OVERRIDES``: server.properties keys its cluster needs (``DURABLE`` for a suite that
  writes durably: RF 3, ``min.insync.replicas=2``);
* ``run(cluster, ctx, quick) -> SuiteResult``: the cluster is started before and stopped after;
  ``ctx`` (compat.context.SuiteContext) has the scratch directory, the JVM launcher and the
  client settings; ``quick`` asks for the subset the test suite runs;
* optionally ``prepare()``: set-up before its first cluster starts (a build, say); what it
  raises fails the suite's rows.

Each case ends ``passed``, ``failed`` or ``skipped`` with a one-line cause; a case that needs
an API odradek does not offer fails with a cause naming it (``missing_api``).
"""

from __future__ import annotations

import enum
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from compat.context import SuiteContext
    from odradek.local.cluster import LocalCluster

__all__ = ["DURABLE", "CaseResult", "MissingApi", "Skip", "Status", "Suite", "SuiteResult", "Variant", "missing_api"]

# BROKER_OVERRIDES of a suite that writes durably: replication factor 3 and two in-sync replicas
# for every new topic; and, as Kafka's own tests, no 3 s wait before a new group's first rebalance.
DURABLE = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "group.initial.rebalance.delay.ms": "0",
}


class Status(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class CaseResult:
    name: str
    status: Status
    cause: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "status": self.status.value, "cause": self.cause, "seconds": round(self.seconds, 2)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CaseResult:
        return cls(str(data["name"]), Status(data["status"]), str(data.get("cause", "")),
                   float(data.get("seconds", 0.0)))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Variant:
    """One cluster a suite runs against: ``security`` is None (PLAINTEXT) or a protocol of
    ``odradek up --security``; ``quick`` variants also run in the quick subset."""

    name: str = "plaintext"
    security: str | None = None
    quick: bool = True

    @property
    def listener(self) -> str:
        return (self.security or "plaintext").upper()


class Skip(Exception):
    """A case that cannot run here; its message says why."""


class MissingApi(AssertionError):
    """A case failed because odradek does not offer ``api``."""

    def __init__(self, api: str, evidence: str) -> None:
        super().__init__(missing_api(api, evidence))


def missing_api(api: str, evidence: str) -> str:
    """The cause of a failure that a missing API explains (one wording for every suite).  The
    API is the one the evidence names when it does (Kafka's clients say "The node does not
    support DESCRIBE_CLIENT_QUOTAS"), else ``api``, the one the caller expected."""
    if named := re.search(r"does not support ([A-Z][A-Z_]+)", evidence):
        api = "".join(word.capitalize() for word in named.group(1).split("_"))
    return f"odradek lacks the {api} API: {evidence}"


@dataclass
class SuiteResult:
    """The cases of one run of a suite, in order, and the versions of what ran."""

    cases: list[CaseResult] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)

    def count(self, status: Status) -> int:
        return sum(1 for c in self.cases if c.status is status)

    def case(self, name: str, body: Callable[[], None]) -> CaseResult:
        """Run one Python-side case: an AssertionError fails it with its message, Skip skips it,
        any other exception fails it with its type; the outcome is recorded and returned."""
        start = time.monotonic()
        status, cause = Status.PASSED, ""
        try:
            body()
        except Skip as e:
            status, cause = Status.SKIPPED, one_line(str(e))
        except AssertionError as e:
            status, cause = Status.FAILED, one_line(str(e)) or "assertion failed"
        except Exception as e:
            status, cause = Status.FAILED, one_line(f"{type(e).__name__}: {e}")
        outcome = CaseResult(name, status, cause, time.monotonic() - start)
        self.cases.append(outcome)
        return outcome


def one_line(text: str, limit: int = 600) -> str:
    """``text`` on one line, at most ``limit`` characters (causes go into a table)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class Suite(Protocol):
    """The module interface of ``compat/suites/<name>.py`` (see the module docstring)."""

    NAME: str
    ORDER: int
    TITLE: str
    VARIANTS: tuple[Variant, ...]
    BROKER_OVERRIDES: Mapping[str, str]

    def run(self, cluster: LocalCluster, ctx: SuiteContext, quick: bool) -> SuiteResult: ...
