"""``odradek configs``: kafka-configs.sh's flags and output for topics, brokers, users and clients.

The work is odradek.admin.configs'; this module reads the flags (checked before anything
connects, so bad input never writes), picks ZooKeeper (``--zookeeper``) or the Kafka protocol
(``--bootstrap-server``), and turns failures into one line and exit code 1.
"""

from __future__ import annotations

import asyncio
import sys

import click

from odradek.admin.client import AdminClientError
from odradek.admin.client_quotas import (
    CLIENTS,
    USERS,
    EntityPart,
    QuotaCommandError,
    alter_quotas_over_zookeeper,
    check_quota_alteration,
    describe_quotas_over_zookeeper,
    is_quota_alteration,
)
from odradek.admin.configs import (
    ENTITY_TYPES,
    ConfigCommandError,
    ConfigEntity,
    ConfigsAdminConnection,
    alter_over_bootstrap,
    alter_over_zookeeper,
    alter_users_and_clients_over_bootstrap,
    describe_over_bootstrap,
    describe_over_zookeeper,
    describe_users_and_clients_over_bootstrap,
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


def _entity_order(args: list[str]) -> list[str]:
    """The order in which ``--entity-name`` and ``--entity-default`` were given: Kafka pairs
    names with entity types in command-line order, a default counting as the name ``""``."""
    return [arg.split("=", 1)[0] for arg in args if arg.split("=", 1)[0] in ("--entity-name", "--entity-default")]


class _ConfigCommand(OneLineCommand):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["entity_order"] = _entity_order(args)
        return super().parse_args(ctx, args)


def _entities(entity_types: tuple[str, ...], entity_names: tuple[str, ...], order: list[str],
              shortcuts: dict[str, str | None], defaults: dict[str, bool], describe: bool) -> list[EntityPart]:
    """ConfigCommandOptions' entity types and names: ``--entity-type`` values, then the
    shortcuts' types (``--topic``, ``--client``/``--client-defaults``, ``--user``/``--user-defaults``,
    ``--broker``); names in command-line order, then the shortcuts', then the defaults' ``""``."""
    types = list(entity_types)
    types += [t for t in ("topics", "clients", "users", "brokers") if shortcuts.get(t) is not None or defaults.get(t)]
    given = iter(entity_names)
    names = [next(given) if flag == "--entity-name" else "" for flag in order]
    names += [shortcuts[t] for t in ("topics", "clients", "users", "brokers") if shortcuts.get(t) is not None]
    names += ["" for t in ("clients", "users") if defaults.get(t)]
    if not types:
        fail("--entity-type must be specified")
    for entity_type in types:
        if entity_type not in ENTITY_TYPES:
            fail(f"Invalid entity type {entity_type}, the entity type must be one of {', '.join(ENTITY_TYPES)}")
    if len(set(types)) != len(types):
        fail(f"Duplicate entity type(s) specified: {', '.join(sorted({t for t in types if types.count(t) > 1}))}")
    if len(types) > 1 and set(types) != {USERS, CLIENTS}:
        fail("Only 'users' and 'clients' entity types may be specified together")
    if describe:
        if len(names) > len(types):
            fail("More entity names specified than entity types")
    elif not names:
        fail(f"An entity name must be specified with --alter of {', '.join(types)}")
    elif len(names) != len(types):
        fail("An entity name must be specified for every entity type")
    parts: list[EntityPart] = [(t, names[i] if i < len(names) else None) for i, t in enumerate(types)]
    for entity_type, name in parts:
        if name == "":
            if entity_type == "topics":
                fail("--entity-default is only supported for brokers, users and clients, not topics")
        elif name is not None:
            if not name.strip():
                fail("--entity-name must not be empty")
            if entity_type == "topics":
                try:
                    validate_topic_name(name)
                except KafkaError as e:
                    fail(str(e))
            if entity_type == "brokers" and not name.isdigit():
                fail(f"The entity name for brokers must be a valid integer broker id, but it is: {name}")
    return parts


def _config_entity(part: EntityPart) -> ConfigEntity:
    """A topic, broker or user entity as admin.configs names it (the default: ``<default>``)."""
    entity_type, name = part
    return ConfigEntity(entity_type, ConfigEntityZNode.DEFAULT if name == "" else name)


@click.command(cls=_ConfigCommand, context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_server_option("Brokers to connect to.")
@click.option("--zookeeper", default=None, metavar="HOST:PORT[/CHROOT]",
              help="ZooKeeper connection string (instead of --bootstrap-server).")
@command_config_option
@click.option("--describe", is_flag=True, help="Show the configs of the entity (all entities if none is named).")
@click.option("--alter", is_flag=True, help="Change the configs of the entity.")
@click.option("--entity-type", multiple=True, metavar="topics|brokers|users|clients",
              help="Entity type (users and clients may be given together: a user's client id).")
@click.option("--entity-name", multiple=True, metavar="NAME", help="Topic, broker id, user or client id.")
@click.option("--entity-default", is_flag=True, help="The default broker, user or client id (in place of a name).")
@click.option("--topic", default=None, help="Same as --entity-type topics --entity-name TOPIC.")
@click.option("--user", default=None, help="Same as --entity-type users --entity-name USER.")
@click.option("--client", default=None, help="Same as --entity-type clients --entity-name CLIENT-ID.")
@click.option("--user-defaults", is_flag=True, help="Same as --entity-type users --entity-default.")
@click.option("--client-defaults", is_flag=True, help="Same as --entity-type clients --entity-default.")
@click.option("--broker", default=None, help="Same as --entity-type brokers --entity-name ID.")
@click.option("--add-config", default=None, metavar="KEY=VALUE,KEY=[V1,V2]",
              help="Configs to set; users: SCRAM-SHA-512=[iterations=8192,password=...] or SCRAM-SHA-256=[password=...]; "
                   "users and clients: producer_byte_rate, consumer_byte_rate, request_percentage.")
@click.option("--delete-config", default=None, metavar="KEY,KEY", help="Configs to remove (users: SCRAM-SHA-512).")
@click.pass_context
def configs(ctx: click.Context, bootstrap_server: str | None, zookeeper: str | None, command_config: str | None,
            describe: bool, alter: bool, entity_type: tuple[str, ...], entity_name: tuple[str, ...],
            entity_default: bool, topic: str | None, user: str | None, client: str | None, user_defaults: bool,
            client_defaults: bool, broker: str | None, add_config: str | None, delete_config: str | None) -> None:
    """Describe and alter topic, broker, user (SCRAM credentials, quotas) and client (quotas) configs
    (kafka-configs.sh)."""
    if (zookeeper is None) == (bootstrap_server is None):
        fail("Exactly one of --bootstrap-server or --zookeeper must be specified")
    if command_config is not None and bootstrap_server is None:
        fail("The --command-config option can only be used with --bootstrap-server option")
    if describe == alter:
        fail("Command must include exactly one action: --describe, --alter")
    parts = _entities(entity_type, entity_name, ctx.meta["entity_order"],
                      {"topics": topic, "clients": client, "users": user, "brokers": broker},
                      {"clients": client_defaults, "users": user_defaults}, describe)
    to_add: dict[str, str] = {}
    to_delete: list[str] = []
    if describe:
        if add_config is not None or delete_config is not None:
            fail("--add-config and --delete-config can only be used with --alter")
    else:
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
        if bootstrap_server is not None and parts[0][0] in (USERS, CLIENTS):
            try:
                check_quota_alteration(parts, to_add, to_delete)
            except QuotaCommandError as e:
                fail(str(e))
    if bootstrap_server is not None:
        sys.exit(asyncio.run(_over_bootstrap(bootstrap_server, parts, describe, to_add, to_delete,
                                             client_security(command_config))))
    assert zookeeper is not None
    sys.exit(asyncio.run(_over_zookeeper(zookeeper, parts, describe, to_add, to_delete)))


async def _over_zookeeper(connect: str, parts: list[EntityPart], describe: bool, to_add: dict[str, str],
                          to_delete: list[str]) -> int:
    quotas = parts[0][0] in (USERS, CLIENTS) and (
        CLIENTS in {t for t, _ in parts} or (not describe and is_quota_alteration(parts, to_add, to_delete)))

    async def action() -> None:
        zk = KafkaZkClient(connect, session_timeout_ms=SESSION_TIMEOUT_MS,
                           connection_timeout_ms=CONNECTION_TIMEOUT_MS)
        try:
            await zk.start()
            if quotas and describe:
                await describe_quotas_over_zookeeper(zk, parts, click.echo)
            elif quotas:
                await alter_quotas_over_zookeeper(zk, parts, to_add, to_delete, click.echo)
            elif describe:
                await describe_over_zookeeper(zk, _config_entity(parts[0]), click.echo)
            else:
                await alter_over_zookeeper(zk, _config_entity(parts[0]), to_add, to_delete, click.echo)
        finally:
            await zk.close()

    return await over_zookeeper(action, (ZkConnectionError, ConfigCommandError, QuotaCommandError, KafkaError))


async def _over_bootstrap(bootstrap: str, parts: list[EntityPart], describe: bool, to_add: dict[str, str],
                          to_delete: list[str], security: ClientSecurity | None) -> int:
    users_or_clients = parts[0][0] in (USERS, CLIENTS)

    async def action() -> None:
        async with ConfigsAdminConnection(bootstrap, security=security) as connection:
            if users_or_clients and describe:
                await describe_users_and_clients_over_bootstrap(connection, parts, click.echo)
            elif users_or_clients:
                await alter_users_and_clients_over_bootstrap(connection, parts, to_add, to_delete, click.echo)
            elif describe:
                await describe_over_bootstrap(connection, _config_entity(parts[0]), click.echo)
            else:
                await alter_over_bootstrap(connection, _config_entity(parts[0]), to_add, to_delete, click.echo)

    return await over_bootstrap(bootstrap, action, (AdminClientError, ConfigCommandError, QuotaCommandError,
                                                    KafkaError))
