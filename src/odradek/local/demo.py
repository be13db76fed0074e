"""``odradek demo``: a guided tour of a local cluster, printing each command and its output."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import click
from rich.console import Console
from rich.rule import Rule

from odradek.admin.assignment import assign_replicas_to_brokers
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


def run_control_plane_tour(tour: Tour) -> None:
    console = tour.console
    cluster = tour.cluster
    tour.step("Replica placement, as Kafka computes it")
    seed = assign_replicas_to_brokers([0, 1, 2], 3, 3, rng=_FixedDraws(1, 2))
    tour.say("Kafka places replicas round-robin from a random start index, followers at an increasing shift.")
    tour.say(f"With the seed article's draws (start index 1, shift 2) on brokers 0,1,2: [bold]{seed}[/bold]")

    tour.step("Create the seed's topic_a: 3 partitions, replication factor 3")
    tour.topics("--create", "--topic", "topic_a", "--partitions", "3", "--replication-factor", "3")
    tour.wait("every partition to have a leader", lambda: tour.online("topic_a", 3))
    tour.topics("--describe", "--topic", "topic_a")

    tour.step("Kill the broker that leads the most partitions")
    counts = Counter(tour.leaders("topic_a", 3).values())
    victim = counts.most_common(1)[0][0]
    tour.say(f"Broker {victim} leads {counts[victim]} partition(s): SIGKILL, no goodbye. Its ZooKeeper session "
             f"expires after zookeeper.session.timeout.ms, then the controller elects new leaders from the ISR.")
    cluster.kill_broker(victim)
    zk = cluster.zk_client()
    tour.wait(f"broker {victim}'s session to expire", lambda: not zk.exists(f"/brokers/ids/{victim}"))
    tour.wait("new leaders for its partitions", lambda: all(
        (s := tour.state("topic_a", p)) is not None and s["leader"] not in (victim, -1) for p in range(3)))
    tour.topics("--describe", "--topic", "topic_a")
    tour.say(f"Broker {victim} left every ISR; its partitions are led by in-sync replicas.")

    tour.step(f"Restart broker {victim}")
    console.print(f"[cyan]$ odradek broker --config {cluster.brokers[victim].config_path}[/cyan]")
    cluster.start_broker(victim)
    tour.say(f"Broker {victim} registered again; the controller moves its replicas back Online and tells it "
             "which partitions to follow:")
    log = (cluster.brokers[victim].config_path.parent / "state-change.log")
    tour.wait("its become-follower transitions", lambda: "become-follower" in log.read_text())
    for line in [ln for ln in log.read_text().splitlines() if "Completed become-follower" in ln][-3:]:
        console.print("  " + line.split("] ", 1)[-1], markup=False, highlight=False)
    tour.topics("--describe", "--topic", "topic_a")

    tour.step("Add a partition (Kafka only increases partition counts)")
    tour.topics("--alter", "--topic", "topic_a", "--partitions", "4")
    tour.wait("partition 3 to have a leader", lambda: tour.online("topic_a", 4))
    tour.topics("--describe", "--topic", "topic_a")
    tour.topics("--alter", "--topic", "topic_a", "--partitions", "2")

    tour.step("Mark a scratch topic for deletion")
    tour.topics("--create", "--topic", "scratch", "--partitions", "2", "--replication-factor", "2")
    tour.wait("scratch to be online", lambda: tour.online("scratch", 2))
    tour.topics("--delete", "--topic", "scratch")
    tour.topics("--list")
    tour.wait("the controller to delete it", lambda: not zk.exists("/brokers/topics/scratch"))
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
    """A guided tour: local cluster, placement, failover, restart, alter, delete."""
    # soft_wrap: never re-wrap the tab-separated lines of describe
    console = Console(highlight=False, soft_wrap=True)
    tmp = None
    if directory is None:
        tmp = tempfile.TemporaryDirectory(prefix="odradek-demo-")
        directory = tmp.name
    cluster = LocalCluster(Path(directory), 3)
    started = time.monotonic()
    try:
        console.print(Rule("[bold]odradek demo[/bold]"))
        with console.status("starting ZooKeeper and 3 brokers..."):
            cluster.start()
        console.print(f"ZooKeeper at {cluster.zookeeper_connect} (ZK below); brokers "
                      + ", ".join(f"{b.broker_id}@127.0.0.1:{b.port}" for b in cluster.brokers.values()))
        tour = Tour(cluster, console)
        run_control_plane_tour(tour)
    finally:
        with console.status("stopping brokers and ZooKeeper..."):
            cluster.stop()
        if tmp is not None:
            tmp.cleanup()
    console.print(Rule(f"[bold]done in {time.monotonic() - started:.0f}s[/bold]"))
