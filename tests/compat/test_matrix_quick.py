"""The compatibility matrix's quick subset (compat/; README, "Compatibility"): Kafka's Java
client program and three of Kafka's tools (kafka-topics, kafka-consumer-groups, kafka-dump-log)
each against a fresh 3-broker odradek cluster, through the same suite code as ``python -m
compat run --quick``.  Every case must pass; a failure names the case and its cause."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from compat.runner import run_variant
from compat.suite import Status, Variant
from compat.suites import java_clients, kafka_tools

# About a minute each on an idle machine (each tool is a JVM start); room for a loaded one.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.mark.parametrize("suite", [java_clients, kafka_tools], ids=lambda s: s.NAME)
def test_the_quick_subset_passes(suite: ModuleType, tmp_path: Path) -> None:
    row = run_variant(suite, Variant(), tmp_path / "run", quick=True)  # type: ignore[arg-type]
    problems = [f"{c.name} {c.status.value}: {c.cause}" for c in row.cases if c.status is not Status.PASSED]
    assert not problems, "\n".join(problems)
    assert row.passed >= 3, [c.name for c in row.cases]

