"""The compatibility matrix's quick subset (compat/; README, "Compatibility"), through the same
suite code as ``python -m compat run --quick``, each suite against a fresh 3-broker odradek
cluster: Kafka's Java client program and three of Kafka's tools (kafka-topics,
kafka-consumer-groups, kafka-dump-log); the Kafka Streams exactly-once word count (judged by
its output's content); franz-go's fastest dozen kgo tests and twenty of
librdkafka's regression tests, one pytest test per kgo or librdkafka test.  Every case must
pass; a failure names the case and its cause.

librdkafka's sources come from crates.io's rdkafka-sys crate here as in CI (no librdkafka
mirror there): downloaded with cargo into ~/.cache/odradek/cargo and built once into
~/.cache/rdk by ``sh scripts/bootstrap --test`` (``python -m compat prepare``; without it, the
first librdkafka test pays for the build, minutes)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from compat.report import Row
from compat.runner import run_variant
from compat.suite import Status, Variant
from compat.suites import franz_go, java_clients, kafka_tools, librdkafka, streams

# About a minute each on an idle machine (each tool is a JVM start); room for a loaded one.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
# Streams: the exactly-once run, then the reset and the rerun it checks.
MIN_PASSED = {java_clients.NAME: 3, kafka_tools.NAME: 3, streams.NAME: 2}


@pytest.mark.parametrize("suite", [java_clients, kafka_tools, streams], ids=lambda s: s.NAME)
def test_the_quick_subset_passes(suite: ModuleType, tmp_path: Path) -> None:
    row = run_variant(suite, Variant(), tmp_path / "run", quick=True)  # type: ignore[arg-type]
    problems = [f"{c.name} {c.status.value}: {c.cause}" for c in row.cases if c.status is not Status.PASSED]
    assert not problems, "\n".join(problems)
    assert row.passed >= MIN_PASSED[suite.NAME], [c.name for c in row.cases]


def _quick_row(suite: ModuleType, directory: Path) -> Row:
    return run_variant(suite, suite.VARIANTS[0], directory / "run", quick=True)  # type: ignore[arg-type]


def _check(row: Row, name: str) -> None:
    """The named test passed in the suite's quick run (and the run itself did not break)."""
    broken = [f"{c.name}: {c.cause}" for c in row.cases if c.name.startswith("(")]
    assert not broken, "\n".join(broken)
    by_name = {c.name: c for c in row.cases}
    assert name in by_name, f"{name} did not run; ran: {sorted(by_name)}"
    case = by_name[name]
    assert case.status is Status.PASSED, f"{name} {case.status.value}: {case.cause}"


@pytest.fixture(scope="module")
def franz_go_run(tmp_path_factory: pytest.TempPathFactory) -> Row:
    return _quick_row(franz_go, tmp_path_factory.mktemp("franz-go"))


@pytest.mark.parametrize("name", franz_go.QUICK_TESTS)
def test_franz_go(franz_go_run: Row, name: str) -> None:
    _check(franz_go_run, name)


@pytest.fixture(scope="module")
def librdkafka_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Row]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RDK_SRC", os.environ.get("RDK_SRC", "crates.io"))
        yield _quick_row(librdkafka, tmp_path_factory.mktemp("librdkafka"))


# The first test also downloads and builds librdkafka when its cache is empty.
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", librdkafka.QUICK_TESTS)
def test_librdkafka(librdkafka_run: Row, name: str) -> None:
    _check(librdkafka_run, name)
