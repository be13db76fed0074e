"""The differential oracle's fixtures: each test module's table of cases becomes its
``oracle_case`` parameters (every version both sides advertise with ``--oracle-full``, the
highest one otherwise), and the run ends with a count of what was compared."""

from __future__ import annotations

import pytest
from oracle.case import expand
from oracle.check import OUTCOMES


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "oracle_case" in metafunc.fixturenames:
        full = metafunc.config.getoption("--oracle-full")
        metafunc.parametrize("oracle_case", expand(metafunc.module.CASES, full))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if OUTCOMES:
        total = sum(OUTCOMES.values())
        terminalreporter.write_line(
            f"differential oracle: {total} case runs compared with Kafka 3.9, {OUTCOMES['equal']} equal, "
            f"{OUTCOMES['documented']} with documented differences (docs/COMPATIBILITY.md)")
