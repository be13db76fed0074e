"""perf/side_by_side.py: ratios and targets (on the ratio or on odradek's own value, missing
figures), the Markdown tables, medians per broker and phase, the highest sustained rate and
memory per partition."""

from __future__ import annotations

import math

import pytest

from odradek.perf.side_by_side import (
    Figure,
    Section,
    Target,
    markdown,
    medians,
    per_partition_bytes,
    sustained_rate,
    usage_table,
)

NAN = float("nan")


def test_the_ratio_is_odradek_over_kafka_and_missing_when_kafka_has_nothing() -> None:
    assert Figure("x", 3.0, 4.0).ratio == 0.75
    assert math.isnan(Figure("x", 3.0, 0.0).ratio)
    assert math.isnan(Figure("x", 3.0, NAN).ratio)


@pytest.mark.parametrize(("target", "odradek", "kafka", "met"), [
    (Target(1.0), 10.0, 10.0, True),  # a bound reached exactly is met
    (Target(1.0), 9.0, 10.0, False),
    (Target(1.0, at_most=True), 9.0, 10.0, True),
    (Target(1.0, at_most=True), 11.0, 10.0, False),
    (Target(0.8, on_odradek=True), 0.9, 0.3, True),  # odradek's own value, whatever Kafka's
    (Target(0.8, on_odradek=True), 0.5, 0.4, False),
    (Target(1.0), NAN, 10.0, None),
    (Target(1.0), 5.0, 0.0, None),
])
def test_a_target_is_met_or_missed_on_the_value_it_names(target: Target, odradek: float, kafka: float,
                                                          met: bool | None) -> None:
    figure = Figure("x", odradek, kafka, target=target)
    assert target.met(figure) is met
    assert figure.verdict() == {True: "met", False: "**missed**", None: "?"}[met]


def test_targets_read_as_bounds() -> None:
    assert str(Target(1.0)) == "≥ 1.0"
    assert str(Target(1.0, at_most=True)) == "≤ 1.0"
    assert str(Target(0.8, on_odradek=True)) == "odradek ≥ 0.8"


def test_a_figure_row_formats_both_values_the_ratio_and_a_missing_one_as_a_dash() -> None:
    assert Figure("records/s", 1234.4, 2468.8, target=Target(1.0)).cells() == (
        "records/s", "1,234", "2,469", "0.50", "≥ 1.0", "**missed**")
    assert Figure("p99 (ms)", NAN, 2.0, "{:.1f}").cells() == ("p99 (ms)", "-", "2.0", "-", "", "")


def test_a_markdown_table_pads_its_cells_and_aligns_numbers_right() -> None:
    table = markdown(("figure", "value"), [("a", "1"), ("longer", "1,000")]).splitlines()
    assert table == ["| figure | value |",
                     "|:-------|------:|",
                     "| a      |     1 |",
                     "| longer | 1,000 |"]
    assert markdown(("a", "b"), [("x", "y")], text=(0, 1)).splitlines()[1] == "|:--|:--|"


def test_a_section_lists_its_missed_targets_and_renders_figures_usage_and_notes() -> None:
    usage = {"seconds": 10.0, "brokers_cpu_s": 5.0, "zookeeper_cpu_s": 0.1, "other_servers_cpu_s": 0.2,
             "clients_cpu_s": 3.0, "others_cpu_s": 1.0, "machine_busy_cpus": 0.93, "steal_pct": 0.5,
             "load_before": 1.0, "load_after": 2.0}
    section = Section("1. Things", [Figure("fast", 2.0, 1.0, target=Target(1.0)),
                                    Figure("slow", 1.0, 2.0, target=Target(1.0)), Figure("info", 1.0, 1.0)],
                      [("phase", "odradek", usage)], ["a note"])
    assert section.missed() == ["slow"]
    text = section.markdown()
    assert text.startswith("### 1. Things\n")
    assert "| slow" in text and "**missed**" in text and text.endswith("\na note")
    assert "0.50" in text  # brokers: 5 CPU-s over 10 s
    assert section.as_dict()["figures"][1] == {"name": "slow", "odradek": 1.0, "kafka": 2.0, "ratio": 0.5,
                                               "target": "≥ 1.0", "met": False}


def test_usage_rows_are_per_second_of_the_phase() -> None:
    usage = {"seconds": 2.0, "brokers_cpu_s": 1.0, "machine_busy_cpus": 1.5, "steal_pct": 0.0,
             "load_before": 0.0, "load_after": 3.25}
    row = usage_table([("produce", "kafka", usage)]).splitlines()[2]
    assert row.split("|")[1:4] == [" produce ", " kafka            ", "    0.50 "]
    assert row.rstrip(" |").endswith("3.25")


def test_medians_are_taken_per_broker_and_phase_over_the_rounds() -> None:
    per_round = {"odradek": {"p": [{"x": 1.0, "tag": "a"}, {"x": 5.0, "tag": "b"}, {"x": 2.0, "tag": "c"}]},
                 "kafka": {"p": [{"x": 4.0, "tag": "a"}]}}
    assert medians(per_round) == {"odradek": {"p": {"x": 2.0, "tag": "a"}}, "kafka": {"p": {"x": 4.0, "tag": "a"}}}


def _rate(achieved: float, p99: float, missing: int = 0) -> dict[str, float]:
    return {"achieved_rate": achieved, "e2e_p99_ms": p99, "missing": missing}


def test_the_sustained_rate_is_the_highest_one_from_the_bottom_that_kept_up_within_the_bound() -> None:
    assert sustained_rate({1000: _rate(1000, 5), 5000: _rate(4990, 20), 10000: _rate(9000, 30)}, 50) == 5000
    assert sustained_rate({1000: _rate(1000, 5), 5000: _rate(5000, 60), 10000: _rate(10000, 20)}, 50) == 1000
    assert sustained_rate({1000: _rate(1000, 5, missing=1)}, 50) == 0
    assert sustained_rate({}, 50) == 0


def test_memory_per_partition_is_the_growth_over_the_partitions_added() -> None:
    assert per_partition_bytes({0: 100_000_000, 1000: 110_000_000, 10000: 200_000_000}) == 10_000
    assert math.isnan(per_partition_bytes({0: 1.0}))
