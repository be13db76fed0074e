"""Spark's own Kafka connector against odradek (compat/suites/spark_kafka.py, quick: the first
5,000 flights): the flights pipeline with format("kafka") and with format("odradek") must each
give the statistics pandas computes, hence equal results, and each results topic must read
back the same with the other data source."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat.runner import run_variant
from compat.suite import Status, Variant
from compat.suites import spark_kafka

# Two Spark streaming queries and four batch reads in one Spark session (a child process).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def test_spark_kafka_connector_and_odradek_agree(tmp_path: Path) -> None:
    row = run_variant(spark_kafka, Variant(), tmp_path / "run", quick=True)  # type: ignore[arg-type]
    problems = [f"{c.name} {c.status.value}: {c.cause}" for c in row.cases if c.status is not Status.PASSED]
    assert not problems, "\n".join(problems)
    assert row.passed == 5, [c.name for c in row.cases]
