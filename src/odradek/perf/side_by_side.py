"""odradek beside Apache Kafka in one benchmark invocation (issue 26): each figure measured on
both, its odradek ÷ Kafka ratio, and the target the issue sets for it, as Markdown tables.

Pure: the figures come in as numbers (medians over alternating rounds, see perf/baseline.py),
the tables go out as text; the benchmark script prints them."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from odradek.perf.baseline import median_figures, ratio
from odradek.perf.sysstat import USAGE_HEAD, usage_cells

__all__ = ["BROKERS", "Figure", "Section", "Target", "markdown", "medians", "per_partition_bytes",
           "sustained_rate", "usage_table"]

# The two brokers every section runs, in the order of the first round.
BROKERS = ("odradek", "kafka")


@dataclass(frozen=True, slots=True)
class Target:
    """What a figure should reach: ``bound`` at least (``at_most``: at most), on the odradek ÷
    Kafka ratio, or (``on_odradek``) on odradek's own value, as for the transactional ratio,
    whose bound the issue gives in absolute terms."""

    bound: float
    at_most: bool = False
    on_odradek: bool = False

    def met(self, figure: Figure) -> bool | None:
        """Whether ``figure`` meets it; None when the figure is missing (NaN)."""
        value = figure.odradek if self.on_odradek else figure.ratio
        if math.isnan(value):
            return None
        return value <= self.bound if self.at_most else value >= self.bound

    def __str__(self) -> str:
        sign = "≤" if self.at_most else "≥"
        return f"odradek {sign} {self.bound:.1f}" if self.on_odradek else f"{sign} {self.bound:.1f}"


@dataclass(frozen=True, slots=True)
class Figure:
    """One line of a section's table: a figure's value on each broker (NaN: not measured)."""

    name: str
    odradek: float
    kafka: float
    fmt: str = "{:,.0f}"
    target: Target | None = None

    @property
    def ratio(self) -> float:
        """odradek ÷ Kafka; NaN when Kafka's value is zero or either is missing."""
        return ratio(self.odradek, self.kafka) if not math.isnan(self.kafka) else float("nan")

    def verdict(self) -> str:
        if self.target is None:
            return ""
        met = self.target.met(self)
        return "?" if met is None else "met" if met else "**missed**"

    def cells(self) -> tuple[str, ...]:
        return (self.name, _value(self.fmt, self.odradek), _value(self.fmt, self.kafka), _value("{:.2f}", self.ratio),
                str(self.target or ""), self.verdict())


def _value(fmt: str, value: float) -> str:
    return "-" if math.isnan(value) else fmt.format(value)


def markdown(header: Sequence[str], rows: Iterable[Sequence[str]], text: Collection[int] = (0,)) -> str:
    """A Markdown table; the columns numbered in ``text`` are left-aligned, the rest (numbers)
    right-aligned.  Cells are padded so that the table also reads as plain text."""
    lines = [tuple(header), *(tuple(r) for r in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]

    def row(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) if i in text else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths, strict=True))) + " |"

    rule = "|" + "|".join(":" + "-" * (w + 1) if i in text else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|"
    return "\n".join([row(lines[0]), rule, *(row(line) for line in lines[1:])])


FIGURE_HEAD = ("figure", "odradek", "Kafka", "odradek ÷ Kafka", "target", "")


def usage_table(rows: Iterable[tuple[str, str, Mapping[str, float]]]) -> str:
    """Where the CPU went in each measured phase: rows of (phase, broker, ``Usage.as_dict()``)
    as CPU-seconds per second of each group (perf/sysstat.py), steal and load."""
    return markdown(("phase", "broker (CPU s/s)", *USAGE_HEAD),
                    [(phase, broker, *usage_cells(usage)) for phase, broker, usage in rows], text=(0, 1))


@dataclass
class Section:
    """One section's outcome: its figures, where the CPU went, notes (settings, caveats) and
    the results it was made from."""

    title: str
    figures: list[Figure] = field(default_factory=list)
    usage: list[tuple[str, str, Mapping[str, float]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    raw: Mapping[str, object] = field(default_factory=dict)  # the per-round results, for the results file

    def markdown(self) -> str:
        parts = [f"### {self.title}", "", markdown(FIGURE_HEAD, (f.cells() for f in self.figures), text=(0, 4, 5))]
        if self.usage:
            parts += ["", usage_table(self.usage)]
        parts += [f"\n{note}" for note in self.notes]
        return "\n".join(parts)

    def missed(self) -> list[str]:
        """The figures whose target is missed."""
        return [f.name for f in self.figures if f.target is not None and f.target.met(f) is False]

    def as_dict(self) -> dict[str, object]:
        return {"title": self.title, "notes": self.notes, "usage": self.usage, "raw": self.raw,
                "figures": [{"name": f.name, "odradek": f.odradek, "kafka": f.kafka, "ratio": f.ratio,
                             "target": str(f.target) if f.target else None, "met": f.target.met(f) if f.target else None}
                            for f in self.figures]}


def medians(per_round: Mapping[str, Mapping[str, Sequence[Mapping[str, object]]]]) -> dict[str, dict[str, dict]]:
    """``{broker: {phase: [one result per round]}}`` -> ``{broker: {phase: medians}}``."""
    return {broker: {phase: median_figures(runs) for phase, runs in phases.items()}
            for broker, phases in per_round.items()}


def sustained_rate(by_rate: Mapping[float, Mapping[str, float]], p99_limit_ms: float,
                   min_achieved: float = 0.95) -> float:
    """The highest offered rate whose phase kept up (achieved at least ``min_achieved`` of it,
    nothing missing) with an end-to-end p99 within ``p99_limit_ms``; 0 when none did.  A rate
    above one that failed does not count: what is sustained is a range from the bottom up."""
    best = 0.0
    for rate in sorted(by_rate):
        row = by_rate[rate]
        if (row["achieved_rate"] < min_achieved * rate or row.get("missing", 0) or row["e2e_p99_ms"] > p99_limit_ms):
            break
        best = rate
    return best


def per_partition_bytes(rss_by_partitions: Mapping[int, float]) -> float:
    """Memory per partition: the growth of resident memory from the fewest to the most
    partitions, divided by the partitions added (NaN with fewer than two points)."""
    if len(rss_by_partitions) < 2:
        return float("nan")
    low, high = min(rss_by_partitions), max(rss_by_partitions)
    return (rss_by_partitions[high] - rss_by_partitions[low]) / (high - low)
