"""The nemesis report's memory figures: each broker's resident memory over the first and the
last faults."""

from __future__ import annotations

from odradek.local.nemesis import FaultRecord, NemesisReport, rss_growth


def faults(rss: list[float], pid: int = 7) -> list[FaultRecord]:
    return [FaultRecord("loss", "", float(n), rss_mb={"broker0": mb, "broker1": 100.0}, pids={"broker0": pid, "broker1": 8})
            for n, mb in enumerate(rss)]


def test_medians_of_the_first_and_last_hundred() -> None:
    records = faults([100.0] * 100 + [150.0] * 300 + [120.0] * 100)
    assert rss_growth(records) == {"broker0": (100.0, 120.0), "broker1": (100.0, 100.0)}


def test_a_short_run_compares_its_halves() -> None:
    assert rss_growth(faults([90.0, 100.0, 110.0, 130.0, 140.0])) == {"broker0": (95.0, 135.0), "broker1": (100.0, 100.0)}
    assert rss_growth([]) == {}


def test_a_restarted_broker_is_judged_by_its_longest_lived_process() -> None:
    records = faults([100.0] * 4, pid=1) + faults([300.0] * 6 + [330.0] * 6, pid=2) + faults([50.0] * 2, pid=3)
    assert rss_growth(records)["broker0"] == (300.0, 330.0)


def test_the_table_states_the_growth() -> None:
    report = NemesisReport(acks="all", faults=faults([100.0] * 4 + [125.0] * 4))
    table = report.table()
    assert "| broker0 | 100 | 125 | +25 MiB (+25%) |" in table and "| broker1 | 100 | 100 | +0 MiB (+0%) |" in table
