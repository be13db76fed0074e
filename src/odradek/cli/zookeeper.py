"""``odradek zookeeper``: ZooKeeper's own server, standalone or one member of an ensemble
(``--id N --servers h1:2888:3888,...``, or a given ``--config zoo.cfg``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from odradek.cli.common import OneLineCommand, StopSignals, fail

if TYPE_CHECKING:
    from odradek.local.zookeeper import EmbeddedZooKeeper

__all__ = ["zookeeper"]


@click.command(cls=OneLineCommand)
@click.option("--port", type=int, default=2181, show_default=True, help="Client port (0 picks a free one).")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None,
              help="Data directory (required unless --config; with --config, where logs go: "
                   "default the config's directory).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Client address.")
@click.option("--id", "server_id", type=int, default=None, help="This member's id (1..N) in --servers.")
@click.option("--servers", default=None, metavar="HOST:PEER:ELECTION[,...]",
              help="Every member of the ensemble in id order 1..N, e.g. zk1:2888:3888,zk2:2888:3888,zk3:2888:3888.")
@click.option("--config", "config", default=None, metavar="ZOO.CFG", help="Run this zoo.cfg as it is.")
def zookeeper(port: int, directory: str | None, host: str, server_id: int | None, servers: str | None,
              config: str | None) -> None:
    """Run ZooKeeper's own server from the jars in the pyspark wheel: standalone, or one
    member of an ensemble (which serves once a majority of its members is up)."""
    from odradek.local.zookeeper import ZooKeeperError

    zk = _member(port, directory, host, server_id, servers, config)
    stop = StopSignals()
    try:
        zk.start(wait_for_quorum=not zk.quorum)
        if zk.quorum:
            member = f"member {zk.server_id}" if zk.server_id else f"({zk.config_path})"
            click.echo(f"ZooKeeper {member} started (pid {zk.pid}); waiting for a majority "
                       f"of the ensemble to form a quorum before serving on {zk.connect_string}")
        announced = False
        while not stop.requested:
            zk.check_alive()
            if not announced and (mode := zk.mode()) is not None:
                click.echo(f"ZooKeeper serving on {zk.connect_string} as {mode} (data and logs in {zk.data_dir})")
                announced = True
            time.sleep(0.2)
    except ZooKeeperError as e:
        zk.stop()
        fail(str(e))
    zk.stop()
    click.echo("ZooKeeper stopped")


def _member(port: int, directory: str | None, host: str, server_id: int | None, servers: str | None,
            config: str | None) -> EmbeddedZooKeeper:
    """The EmbeddedZooKeeper the options describe; fail() with one line (before anything is
    written) on options that do not fit together."""
    from odradek.local.zookeeper import EmbeddedZooKeeper

    if config is not None:
        if servers is not None or server_id is not None:
            fail("--config takes the ensemble from the zoo.cfg: give --config or --id/--servers, not both")
        path = Path(config)
        if not path.is_file():
            fail(f"--config {config}: no such file")
        directory = directory or str(path.resolve().parent)
    else:
        if directory is None:
            fail("--dir is required (the data directory), unless --config is given")
        if (servers is None) != (server_id is None):
            fail("an ensemble member needs both --id and --servers")
    member_list = servers.split(",") if servers is not None else []
    try:
        return EmbeddedZooKeeper(directory, port=port, host=host, server_id=server_id, servers=member_list,
                                 config=config)
    except (ValueError, OSError) as e:
        fail(f"{e}")
