"""``odradek zookeeper``: ZooKeeper's own server, standalone, for a cluster started by hand."""

from __future__ import annotations

import click

from odradek.cli.common import fail, wait_for_signal

__all__ = ["zookeeper"]


@click.command()
@click.option("--port", type=int, default=2181, show_default=True, help="Client port (0 picks a free one).")
@click.option("--dir", "directory", type=click.Path(file_okay=False), required=True, help="Data directory.")
@click.option("--host", default="127.0.0.1", show_default=True)
def zookeeper(port: int, directory: str, host: str) -> None:
    """Run ZooKeeper's own server (standalone) from the jars in the pyspark wheel."""
    from odradek.local.zookeeper import EmbeddedZooKeeper, ZooKeeperError

    zk = EmbeddedZooKeeper(directory, port=port, host=host)
    try:
        zk.start()
    except ZooKeeperError as e:
        fail(str(e))
    click.echo(f"ZooKeeper serving on {zk.connect_string} (data and logs in {zk.data_dir})", err=False)
    wait_for_signal()
    zk.stop()
    click.echo("ZooKeeper stopped")
