"""``odradek up``: an embedded ZooKeeper and N brokers in one command; Ctrl-C stops them."""

from __future__ import annotations

import signal
import tempfile
from pathlib import Path

import click

from odradek.cli.common import fail, parse_overrides
from odradek.config import ConfigError, KafkaConfig

__all__ = ["up"]


@click.command()
@click.option("-n", "--brokers", "num_brokers", type=click.IntRange(1, 100), default=3, show_default=True)
@click.option("--racks", default=None, help="Comma-separated rack per broker, e.g. r1,r2,r3.")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None,
              help="Cluster directory (default: a new temporary directory).")
@click.option("--zookeeper-port", type=int, default=0, help="Embedded ZooKeeper port (0 picks a free one).")
@click.option("--ports", default=None, help="Comma-separated broker ports (default: free ports).")
@click.option("--override", multiple=True, metavar="KEY=VALUE", help="Broker config for every broker.")
def up(num_brokers: int, racks: str | None, directory: str | None, zookeeper_port: int, ports: str | None,
       override: tuple[str, ...]) -> None:
    """Start an embedded ZooKeeper and N brokers; Ctrl-C stops everything.

    DIR/cluster.json appears once every broker is registered and knows the whole cluster."""
    from odradek.local.cluster import CLUSTER_JSON, LocalCluster

    rack_list = [r.strip() for r in racks.split(",")] if racks else None
    if rack_list is not None and len(rack_list) != num_brokers:
        fail(f"--racks names {len(rack_list)} racks for {num_brokers} brokers")
    try:
        port_list = [int(p) for p in ports.split(",")] if ports else None
    except ValueError:
        fail(f"--ports must be comma-separated integers, got {ports!r}")
    if port_list is not None and len(port_list) != num_brokers:
        fail(f"--ports names {len(port_list)} ports for {num_brokers} brokers")
    overrides = parse_overrides(override)
    try:
        KafkaConfig.from_props({"zookeeper.connect": "x:1", "broker.id": "0", **overrides})
    except ConfigError as e:
        fail(str(e))
    cluster_dir = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="odradek-"))
    cluster = LocalCluster(cluster_dir, num_brokers, racks=rack_list, zookeeper_port=zookeeper_port,
                           ports=port_list, overrides=overrides)
    stop = {"flag": False}

    def handler(signum: int, _frame: object) -> None:
        stop["flag"] = True

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    try:
        cluster.start()
    except Exception as e:
        cluster.stop()
        fail(f"cluster did not start: {e}")
    click.echo(f"ZooKeeper: {cluster.zookeeper_connect}")
    for b in cluster.brokers.values():
        rack = f" rack {b.rack}" if b.rack else ""
        click.echo(f"Broker {b.broker_id}: 127.0.0.1:{b.port}{rack} (pid {b.pid}, config {b.config_path})")
    click.echo(f"Bootstrap servers: {cluster.bootstrap_servers}")
    click.echo(f"Cluster description: {cluster.dir / CLUSTER_JSON}")
    click.echo("Press Ctrl-C to stop.")
    try:
        while not stop["flag"]:
            signal.pause()
    finally:
        click.echo("Stopping brokers and ZooKeeper...")
        cluster.stop()
        click.echo("Stopped.")
