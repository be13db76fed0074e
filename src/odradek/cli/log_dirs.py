"""``odradek log-dirs``: kafka-log-dirs.sh's flags and output (Kafka's LogDirsCommand).

``--describe`` is the one action; the work is odradek.admin.log_dirs'.  Refused input and
failures are one line on stderr and exit code 1.
"""

from __future__ import annotations

import asyncio
import sys

import click

from odradek.admin.client import AdminClientError
from odradek.admin.log_dirs import (
    LogDirsAdmin,
    LogDirsCommandError,
    describe_output,
    parse_broker_list,
)
from odradek.cli.common import (
    OneLineCommand,
    bootstrap_server_option,
    client_security,
    command_config_option,
    fail,
    over_bootstrap,
)
from odradek.protocol.errors import KafkaError

__all__ = ["log_dirs"]


@click.command("log-dirs", cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_server_option("REQUIRED: the server(s) to use for bootstrapping")
@command_config_option
@click.option("--describe", is_flag=True, help="Describe the specified log directories on the specified brokers.")
@click.option("--topic-list", default="", metavar="TOPIC[,...]",
              help='The list of topics to be queried in the form "topic1,topic2,topic3". All topics will be '
                   "queried if no topic list is specified")
@click.option("--broker-list", default=None, metavar="ID[,...]",
              help='The list of brokers to be queried in the form "0,1,2". All brokers in the cluster will be '
                   "queried if no broker list is specified")
def log_dirs(bootstrap_server: str | None, command_config: str | None, describe: bool, topic_list: str,
             broker_list: str | None) -> None:
    """Query the log directories of brokers: their errors, and each replica's size and lag
    (kafka-log-dirs.sh)."""
    if bootstrap_server is None or not bootstrap_server.strip():
        fail("argument --bootstrap-server is required")
    if not describe:
        fail("argument --describe is required")
    try:
        requested = parse_broker_list(broker_list) if broker_list is not None else None
    except LogDirsCommandError as e:
        fail(str(e))
    topics = [t for t in topic_list.split(",") if t]
    admin = LogDirsAdmin(bootstrap_server, security=client_security(command_config))

    async def describe_dirs() -> None:
        cluster = list(await admin.broker_addresses())
        missing = [b for b in requested or () if b not in cluster]
        if missing:
            raise LogDirsCommandError(
                f"The given brokers do not exist from --broker-list: {','.join(map(str, missing))}. "
                f"Current existent brokers: {','.join(map(str, cluster))}")
        queried = requested if requested is not None else cluster
        click.echo("Querying brokers for log directories information")
        for line in describe_output(queried, await admin.describe_log_dirs(queried), topics):
            click.echo(line)

    sys.exit(asyncio.run(over_bootstrap(bootstrap_server, describe_dirs,
                                        (LogDirsCommandError, AdminClientError, KafkaError))))
