"""``odradek console``: the web console (odradek.console) over ``--bootstrap-server``, logged in
with ``--command-config`` on a secured cluster; ``--metrics`` names the brokers' Prometheus
endpoints for messages-in rates.  Serves until Ctrl-C."""

from __future__ import annotations

import click

from odradek.cli.common import (
    OneLineCommand,
    bootstrap_server_option,
    command_config_option,
    fail,
    read_properties,
)

__all__ = ["console"]


@click.command("console", cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_server_option("REQUIRED: the brokers to connect to.", required=True)
@command_config_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the web server listens on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True,
              help="Port the web server listens on.")
@click.option("--metrics", default=None, metavar="URL[,URL...]",
              help="The brokers' Prometheus /metrics URLs (cluster.json's brokers[].metrics), for messages in "
                   "per second.")
def console(bootstrap_server: str, command_config: str | None, host: str, port: int, metrics: str | None) -> None:
    """A web console: the placement map (live), the cluster, topics and their messages, consumer
    groups and their lag, ACLs and SCRAM users."""
    from aiohttp import web

    from odradek.admin.client import AdminClientError
    from odradek.console.cluster_reader import ClusterReader
    from odradek.console.server import make_app

    properties = read_properties(command_config) if command_config else {}
    urls = [u.strip() for u in metrics.split(",") if u.strip()] if metrics else []
    try:
        reader = ClusterReader(bootstrap_server, properties, urls)
    except (AdminClientError, ValueError) as e:
        fail(f"{e}")
    click.echo(f"odradek console on http://{host}:{port}/ for {bootstrap_server} (Ctrl-C stops it)")
    web.run_app(make_app(reader), host=host, port=port, print=None, access_log=None)
