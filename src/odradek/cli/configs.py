"""``odradek configs``: kafka-configs.sh's flags and output for topics, brokers and users.

The work is odradek.admin.configs'; this module reads the flags (checked before anything
connects, so bad input never writes), picks ZooKeeper (``--zookeeper``) or the Kafka protocol
(``--bootstrap-server``), and turns failures into one line and exit code 1.
"""

from __future__ import annotations

import asyncio
import sys

import click

from odradek.admin.client import AdminClientError
from odradek.admin.configs import (
    ENTITY_TYPES,
    ConfigCommandError,
    ConfigEntity,
    ConfigsAdminConnection,
    alter_over_bootstrap,
    alter_over_zookeeper,
    describe_over_bootstrap,
    describe_over_zookeeper,
    parse_add_config,
    parse_delete_config,
)
from odradek.cli.common import (
    OneLineCommand,
    bootstrap_server_option,
    client_security,
    command_config_option,
    fail,
    over_bootstrap,
    over_zookeeper,
)
from odradek.common import validate_topic_name
from odradek.protocol.errors import KafkaError
from odradek.security.client import ClientSecurity
from odradek.zk.client import KafkaZkClient, ZkConnectionError
from odradek.zk.zk_data import ConfigEntityZNode

__all__ = ["configs"]

SESSION_TIMEOUT_MS = 30_000
CONNECTION_TIMEOUT_MS = 10_000


def _entity(entity_type: str | None, entity_name: str | None, entity_default: bool, topic: str | None,
            user: str | None, broker: str | None) -> ConfigEntity:
    """The one entity the flags name (``--entity-type``/``--entity-name`` or a shortcut)."""
    shortcuts = [(t, n) for t, n in (("topics", topic), ("users", user), ("brokers", broker)) if n is not None]
    if shortcuts and (entity_type is not None or entity_name is not None or len(shortcuts) > 1):
        fail("Only one entity may be given: --topic, --user, --broker or --entity-type with --entity-name")
    if shortcuts:
        entity_type, entity_name = shortcuts[0]
    if entity_type is None:
        fail("--entity-type must be specified")
    if entity_type not in ENTITY_TYPES:
        fail(f"Invalid entity type {entity_type}, the entity type must be one of {', '.join(ENTITY_TYPES)}")
    if entity_default:
        if entity_name is not None:
            fail("Only one of --entity-name or --entity-default may be specified")
        if entity_type != "brokers":
            fail(f"--entity-default is only supported for brokers, not {entity_type}")
        return ConfigEntity(entity_type, ConfigEntityZNode.DEFAULT)
    if entity_name is not None:
        if not entity_name.strip():
            fail("--entity-name must not be empty")
        if entity_type == "topics":
            try:
                validate_topic_name(entity_name)
            except KafkaError as e:
                fail(str(e))
        if entity_type == "brokers" and not entity_name.isdigit():
            fail(f"The entity name for brokers must be a valid integer broker id, but it is: {entity_name}")
    return ConfigEntity(entity_type, entity_name)


@click.command(cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_server_option("Brokers to connect to.")
@click.option("--zookeeper", default=None, metavar="HOST:PORT[/CHROOT]",
              help="ZooKeeper connection string (instead of --bootstrap-server).")
@command_config_option
@click.option("--describe", is_flag=True, help="Show the configs of the entity (all entities if none is named).")
@click.option("--alter", is_flag=True, help="Change the configs of the entity.")
@click.option("--entity-type", default=None, metavar="topics|brokers|users")
@click.option("--entity-name", default=None, metavar="NAME", help="Topic, broker id or user name.")
@click.option("--entity-default", is_flag=True, help="The cluster-wide broker default.")
@click.option("--topic", default=None, help="Same as --entity-type topics --entity-name TOPIC.")
@click.option("--user", default=None, help="Same as --entity-type users --entity-name USER.")
@click.option("--broker", default=None, help="Same as --entity-type brokers --entity-name ID.")
@click.option("--add-config", default=None, metavar="KEY=VALUE,KEY=[V1,V2]",
              help="Configs to set; users: SCRAM-SHA-512=[iterations=8192,password=...] or SCRAM-SHA-256=[password=...].")
@click.option("--delete-config", default=None, metavar="KEY,KEY", help="Configs to remove (users: SCRAM-SHA-512).")
def configs(bootstrap_server: str | None, zookeeper: str | None, command_config: str | None, describe: bool,
            alter: bool, entity_type: str | None, entity_name: str | None, entity_default: bool, topic: str | None,
            user: str | None, broker: str | None, add_config: str | None, delete_config: str | None) -> None:
    """Describe and alter topic, broker and user (SCRAM) configs (kafka-configs.sh)."""
    if (zookeeper is None) == (bootstrap_server is None):
        fail("Exactly one of --bootstrap-server or --zookeeper must be specified")
    if command_config is not None and bootstrap_server is None:
        fail("The --command-config option can only be used with --bootstrap-server option")
    if describe == alter:
        fail("Command must include exactly one action: --describe, --alter")
    entity = _entity(entity_type, entity_name, entity_default, topic, user, broker)
    to_add: dict[str, str] = {}
    to_delete: list[str] = []
    if describe:
        if add_config is not None or delete_config is not None:
            fail("--add-config and --delete-config can only be used with --alter")
    else:
        if entity.name is None:
            fail(f"An entity name must be specified with --alter of {entity.entity_type}")
        if add_config is None and delete_config is None:
            fail("At least one of --add-config or --delete-config must be specified with --alter")
        try:
            to_add = parse_add_config(add_config) if add_config is not None else {}
        except ConfigCommandError as e:
            fail(str(e))
        to_delete = parse_delete_config(delete_config) if delete_config is not None else []
        both = sorted(set(to_add) & set(to_delete))
        if both:
            fail(f"Config(s) {','.join(both)} cannot be both added and deleted")
    if bootstrap_server is not None:
        sys.exit(asyncio.run(_over_bootstrap(bootstrap_server, entity, describe, to_add, to_delete,
                                             client_security(command_config))))
    assert zookeeper is not None
    sys.exit(asyncio.run(_over_zookeeper(zookeeper, entity, describe, to_add, to_delete)))


async def _over_zookeeper(connect: str, entity: ConfigEntity, describe: bool, to_add: dict[str, str],
                          to_delete: list[str]) -> int:
    async def action() -> None:
        zk = KafkaZkClient(connect, session_timeout_ms=SESSION_TIMEOUT_MS,
                           connection_timeout_ms=CONNECTION_TIMEOUT_MS)
        try:
            await zk.start()
            if describe:
                await describe_over_zookeeper(zk, entity, click.echo)
            else:
                await alter_over_zookeeper(zk, entity, to_add, to_delete, click.echo)
        finally:
            await zk.close()

    return await over_zookeeper(action, (ZkConnectionError, ConfigCommandError, KafkaError))


async def _over_bootstrap(bootstrap: str, entity: ConfigEntity, describe: bool, to_add: dict[str, str],
                          to_delete: list[str], security: ClientSecurity | None) -> int:
    async def action() -> None:
        async with ConfigsAdminConnection(bootstrap, security=security) as connection:
            if describe:
                await describe_over_bootstrap(connection, entity, click.echo)
            else:
                await alter_over_bootstrap(connection, entity, to_add, to_delete, click.echo)

    return await over_bootstrap(bootstrap, action, (AdminClientError, ConfigCommandError, KafkaError))
