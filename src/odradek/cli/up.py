"""``odradek up``: an embedded ZooKeeper (or a local ensemble, ``--zookeepers 3``) and N
brokers in one command; Ctrl-C stops them.
``--security`` makes a secure cluster (see odradek.local.security)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from odradek.cli.common import OneLineCommand, StopSignals, fail, parse_overrides
from odradek.config import ConfigError, KafkaConfig

if TYPE_CHECKING:
    from odradek.local.cluster import LocalCluster

__all__ = ["up"]


@click.command(cls=OneLineCommand)
@click.option("-n", "--brokers", "num_brokers", type=click.IntRange(1, 100), default=3, show_default=True)
@click.option("--racks", default=None, help="Comma-separated rack per broker, e.g. r1,r2,r3.")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None,
              help="Cluster directory (default: a new temporary directory).")
@click.option("--zookeeper-port", type=int, default=0, help="Embedded ZooKeeper port (0 picks a free one).")
@click.option("--zookeepers", "num_zookeepers", type=click.IntRange(1, 9), default=1, show_default=True,
              help="ZooKeeper members: 1 runs a standalone server, 3 or 5 a local ensemble (free ports).")
@click.option("--ports", default=None, help="Comma-separated broker ports (default: free ports).")
@click.option("--override", multiple=True, metavar="KEY=VALUE", help="Broker config for every broker.")
@click.option("--security", type=click.Choice(["ssl", "sasl_plaintext", "sasl_ssl"], case_sensitive=False),
              default=None, help="Secure listeners (client and inter-broker), ACL authorizer, an admin "
                                 "super-user and an unprivileged client user.")
@click.option("--console-port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port of the web console (odradek console); 0 picks a free one.")
@click.option("--no-console", is_flag=True, help="Do not start the web console.")
def up(num_brokers: int, racks: str | None, directory: str | None, zookeeper_port: int, num_zookeepers: int,
       ports: str | None, override: tuple[str, ...], security: str | None, console_port: int,
       no_console: bool) -> None:
    """Start an embedded ZooKeeper (or ensemble) and N brokers; Ctrl-C stops everything.

    DIR/cluster.json appears once every broker is registered and knows the whole cluster; a web
    console (odradek console) serves the cluster unless --no-console."""
    from odradek.local.cluster import CLUSTER_JSON, LocalCluster
    from odradek.local.console_process import ConsoleProcess

    rack_list = [r.strip() for r in racks.split(",")] if racks else None
    if rack_list is not None and len(rack_list) != num_brokers:
        fail(f"--racks names {len(rack_list)} racks for {num_brokers} brokers")
    try:
        port_list = [int(p) for p in ports.split(",")] if ports else None
    except ValueError:
        fail(f"--ports must be comma-separated integers, got {ports!r}")
    if port_list is not None and len(port_list) != num_brokers:
        fail(f"--ports names {len(port_list)} ports for {num_brokers} brokers")
    if num_zookeepers > 1 and zookeeper_port:
        fail("--zookeeper-port is for a single ZooKeeper; an ensemble picks free ports")
    overrides = parse_overrides(override)
    try:
        KafkaConfig.from_props({"zookeeper.connect": "x:1", "broker.id": "0", **overrides})
    except ConfigError as e:
        fail(str(e))
    cluster_dir = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="odradek-"))
    cluster = LocalCluster(cluster_dir, num_brokers, racks=rack_list, zookeeper_port=zookeeper_port,
                           ports=port_list, overrides=overrides, security=security,
                           zookeepers=num_zookeepers, metrics=True)
    stop = StopSignals()
    try:
        cluster.start()
    except Exception as e:
        cluster.stop()
        fail(f"cluster did not start: {e}")
    click.echo(f"ZooKeeper: {cluster.zookeeper_connect}")
    if len(cluster.zookeepers) > 1:
        for zk in cluster.zookeepers:
            click.echo(f"ZooKeeper {zk.server_id}: {zk.connect_string} (pid {zk.pid}, {zk.mode()}, dir {zk.data_dir})")
    for b in cluster.brokers.values():
        rack = f" rack {b.rack}" if b.rack else ""
        click.echo(f"Broker {b.broker_id}: 127.0.0.1:{b.port}{rack} (pid {b.pid}, config {b.config_path}, "
                   f"metrics {cluster.metrics_url(b)})")
    click.echo(f"Bootstrap servers: {cluster.bootstrap_servers}")
    click.echo(f"Cluster description: {cluster.dir / CLUSTER_JSON}")
    if cluster.security is not None:
        _echo_security(cluster)
    console = None if no_console else ConsoleProcess.for_cluster(cluster, port=console_port or None)
    if console is not None:
        try:
            console.start()
            click.echo(f"Web console: {console.url} (log {console.log_path})")
        except (RuntimeError, TimeoutError, OSError) as e:
            click.echo(f"Web console did not start: {e}", err=True)
            console = None
    click.echo("Press Ctrl-C to stop.")
    try:
        stop.wait()
    finally:
        click.echo("Stopping brokers and ZooKeeper...")
        if console is not None:
            console.stop()
        cluster.stop()
        click.echo("Stopped.")


def _echo_security(cluster: LocalCluster) -> None:
    from odradek.local.cluster import ADMIN_PROPERTIES, USER_PROPERTIES
    from odradek.local.security import ADMIN, CLIENT_USER

    admin_config, user_config = cluster.dir / ADMIN_PROPERTIES, cluster.dir / USER_PROPERTIES
    librdkafka = " ".join(f"-X {k}={v}" for k, v in cluster.client_properties(ADMIN).items()
                          if k != "bootstrap.servers")
    click.echo(f"Security: {cluster.security_protocol} on every listener, ACL authorizer on")
    click.echo(f"  User:{ADMIN} (super-user): --command-config {admin_config}")
    click.echo(f"  User:{CLIENT_USER} (no rights until ACLs grant them): --command-config {user_config}")
    click.echo(f"  librdkafka/kcat as {ADMIN}: {librdkafka}")
    click.echo(f"  Grant {CLIENT_USER} a topic: odradek acls --bootstrap-server {cluster.bootstrap_servers.split(',')[0]} "
               f"--command-config {admin_config} --add --allow-principal User:{CLIENT_USER} --producer --consumer "
               f"--topic TOPIC --group '*'")
