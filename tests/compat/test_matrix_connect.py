"""The compatibility matrix's Kafka Connect round trip (compat/suites/connect.py, its quick
subset): two distributed Connect 3.9 workers on a fresh 3-broker odradek cluster, their
internal topics created compacted with RF 3, and Kafka's FileStreamSource and FileStreamSink
copying a file that is being appended to through a topic; the copy must hold every line, in
order, each once."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat.runner import run_variant
from compat.suite import Status, Variant
from compat.suites import connect

# Two workers start in about a minute on an idle machine; room for a loaded one.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_a_connect_round_trip_copies_every_line_once(tmp_path: Path) -> None:
    row = run_variant(connect, Variant(), tmp_path / "run", quick=True)  # type: ignore[arg-type]
    problems = [f"{c.name} {c.status.value}: {c.cause}" for c in row.cases if c.status is not Status.PASSED]
    assert not problems, "\n".join(problems)
    assert [c.name for c in row.cases] == ["two workers, source and sink running",
                                           "internal topics created compacted, RF 3",
                                           "sink file: no loss, duplicates only after the kill"]
    assert row.versions["duplicates (sink file)"].startswith("0 of "), row.versions
