"""``odradek topics``: kafka-topics.sh's flags, output and semantics.

The actions are odradek.admin.topic_command's, over ZooKeeper (``--zookeeper``) or the Kafka
protocol (``--bootstrap-server``); this module reads the flags and prints.  Refused input is one
line and exit code 1 (common.fail, before anything connects); a command that fails while it
runs prints kafka-topics.sh's "Error while executing topic command : ..." and exits 1.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import click

from odradek.admin.client import AdminClientError, AdminClientTopicService, AdminConnection
from odradek.admin.topic_command import (
    TopicAction,
    TopicCommandError,
    TopicCommandOptions,
    run_topic_command,
)
from odradek.admin.topics import zookeeper_topic_service
from odradek.assignment import AdminOperationError
from odradek.cli.common import (
    OneLineCommand,
    bootstrap_server_option,
    client_security,
    command_config_option,
    fail,
    over_bootstrap,
    over_zookeeper,
)
from odradek.protocol.errors import KafkaError
from odradek.security.client import ClientSecurity
from odradek.zk.client import ZkConnectionError

__all__ = ["topic_command_options", "topics"]

# kafka-topics.sh's prefix for a command that failed while it ran (refused input is fail()'s)
ERROR_PREFIX = "Error while executing topic command : "


@click.command(cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--zookeeper", "zookeeper", default=None, metavar="HOST:PORT[/CHROOT]",
              help="ZooKeeper connection string.")
@bootstrap_server_option("Brokers to connect to (instead of --zookeeper).")
@click.option("--create", "create", is_flag=True, help="Create a new topic.")
@click.option("--list", "list_", is_flag=True, help="List all available topics.")
@click.option("--describe", is_flag=True, help="List details for the given topics.")
@click.option("--alter", is_flag=True, help="Alter the number of partitions or the configs of a topic.")
@click.option("--delete", is_flag=True, help="Delete a topic.")
@click.option("--topic", default=None, help="The topic to create, alter, describe or delete.")
@click.option("--partitions", type=int, default=None, help="Number of partitions (create or alter).")
@click.option("--replication-factor", type=int, default=None, help="Replication factor (create).")
@click.option("--replica-assignment", default=None, metavar="B:B:B,B:B:B",
              help="Manual assignment: partitions separated by ',', replicas by ':' (leader first).")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config override.")
@click.option("--delete-config", "delete_configs", multiple=True, metavar="KEY", help="Remove a topic config override.")
@click.option("--if-not-exists", is_flag=True, help="With --create: do nothing if the topic exists.")
@click.option("--if-exists", is_flag=True, help="With --alter/--delete/--describe: do nothing if the topic is missing.")
@click.option("--disable-rack-aware", is_flag=True, help="Ignore racks when placing replicas.")
@click.option("--under-replicated-partitions", is_flag=True, help="Describe: only partitions with ISR < replicas.")
@click.option("--unavailable-partitions", is_flag=True, help="Describe: only partitions whose leader is unavailable.")
@click.option("--topics-with-overrides", is_flag=True, help="Describe: only topics with config overrides.")
@click.option("--exclude-internal", is_flag=True, help="List/describe: leave out internal topics.")
@command_config_option
def topics(**params: Any) -> None:
    """Create, list, describe, alter and delete topics (kafka-topics.sh)."""
    try:
        opts = topic_command_options(**params)
    except TopicCommandError as e:
        fail(str(e))
    if params["bootstrap_server"] is not None:
        security = client_security(params["command_config"])
        sys.exit(asyncio.run(_run_over_bootstrap(params["bootstrap_server"], opts, security)))
    sys.exit(asyncio.run(_run_over_zookeeper(params["zookeeper"], opts)))


def topic_command_options(*, zookeeper: str | None, bootstrap_server: str | None, create: bool, list_: bool,
                          describe: bool, alter: bool, delete: bool, topic: str | None, partitions: int | None,
                          replication_factor: int | None, replica_assignment: str | None, configs: tuple[str, ...],
                          delete_configs: tuple[str, ...], if_not_exists: bool, if_exists: bool,
                          disable_rack_aware: bool, under_replicated_partitions: bool, unavailable_partitions: bool,
                          topics_with_overrides: bool, exclude_internal: bool,
                          command_config: str | None) -> TopicCommandOptions:
    """The command's flags (as click parsed them) as checked options; raises TopicCommandError
    naming the first problem, before anything connects."""
    actions = [action for action, on in ((TopicAction.CREATE, create), (TopicAction.LIST, list_),
                                         (TopicAction.DESCRIBE, describe), (TopicAction.ALTER, alter),
                                         (TopicAction.DELETE, delete)) if on]
    if len(actions) != 1:
        raise TopicCommandError(
            "Command must include exactly one action: --list, --describe, --create, --alter or --delete")
    if (zookeeper is None) == (bootstrap_server is None):
        raise TopicCommandError("Exactly one of --zookeeper or --bootstrap-server is required")
    if command_config is not None and bootstrap_server is None:
        raise TopicCommandError("--command-config is only valid with --bootstrap-server")
    opts = TopicCommandOptions(
        actions[0], topic=topic, partitions=partitions, replication_factor=replication_factor,
        replica_assignment=replica_assignment, configs=configs, delete_configs=delete_configs,
        if_not_exists=if_not_exists, if_exists=if_exists, disable_rack_aware=disable_rack_aware,
        under_replicated_partitions=under_replicated_partitions, unavailable_partitions=unavailable_partitions,
        topics_with_overrides=topics_with_overrides, exclude_internal=exclude_internal)
    opts.check()
    return opts


async def _run_over_zookeeper(connect: str, opts: TopicCommandOptions) -> int:
    async def action() -> None:
        async with zookeeper_topic_service(connect) as service:
            await run_topic_command(service, opts, click.echo)

    return await over_zookeeper(action, (ZkConnectionError, TopicCommandError, KafkaError, AdminOperationError),
                                ERROR_PREFIX)


async def _run_over_bootstrap(bootstrap: str, opts: TopicCommandOptions, security: ClientSecurity | None) -> int:
    async def action() -> None:
        async with AdminConnection(bootstrap, security=security) as connection:
            await run_topic_command(AdminClientTopicService(connection), opts, click.echo)

    return await over_bootstrap(bootstrap, action, (AdminClientError, TopicCommandError, KafkaError,
                                                    AdminOperationError), ERROR_PREFIX)
