"""The flights pipeline on a terminal: a progress bar for ``load_flights`` and a table of
the delay statistics (used by ``odradek demo`` and ``python -m odradek.cli.flights``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from odradek.spark.flights import ALL, LoadProgress

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LoadBar", "delay_stats_table"]


class LoadBar:
    """A rich progress bar of a flights load: acknowledged records of the total and
    records/s. Pass ``update`` as ``load_flights``'s ``on_progress``; the bar appears with
    the first report (when the total is known) and goes with ``close``."""

    def __init__(self, topic: str, console: Console | None = None) -> None:
        self.topic = topic
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]:>9,.0f} records/s"),
            TextColumn("{task.fields[note]}"),
            TimeElapsedColumn(),
            console=console,
        )
        self.task: TaskID | None = None

    def update(self, status: LoadProgress) -> None:
        """Show ``status``."""
        if self.task is None:
            self.task = self.progress.add_task(f"loading {self.topic}", total=status.total, rate=0.0, note="")
            self.progress.start()
        note = f"[red]{status.failed:,} failed" if status.failed else ""
        rate = status.acknowledged / status.seconds if status.seconds > 0 else 0.0
        self.progress.update(self.task, completed=status.acknowledged, rate=rate, note=note)

    def close(self) -> None:
        """Stop redrawing the bar (its last state stays on the terminal)."""
        if self.task is not None:
            self.progress.stop()


def delay_stats_table(stats: pd.DataFrame, title: str = "Departure delays") -> Table:
    """A rich table of ``read_delay_stats``'s result, for printing."""
    table = Table(title=title, caption="delays in minutes, over the flights that departed")
    for name, justify in (
        ("carrier", "left"),
        ("origin", "left"),
        ("flights", "right"),
        ("mean delay", "right"),
        ("p90 delay", "right"),
        ("> 15 min late", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    previous_kind = None
    for row in stats.itertuples(index=False):
        kind = (row.carrier == ALL, row.origin == ALL)
        if previous_kind is not None and kind != previous_kind:
            table.add_section()
        previous_kind = kind
        table.add_row(
            "all" if row.carrier == ALL else row.carrier,
            "all" if row.origin == ALL else row.origin,
            f"{row.flights:,}",
            _number(row.mean_dep_delay, "{:.1f}"),
            _number(row.p90_dep_delay, "{:.0f}"),
            _number(row.share_delayed_15, "{:.1%}"),
        )
    return table


def _number(value: object, spec: str) -> str:
    return "-" if value is None or value != value else spec.format(value)  # NaN != NaN
