"""``odradek acls``: kafka-acls.sh's flags and output.

The work is odradek.admin.acls'; this module reads the flags, picks the backend (ZooKeeper
with ``--zookeeper`` or ``--authorizer-properties zookeeper.connect=...``, the Kafka protocol
with ``--bootstrap-server``), asks for confirmation before a removal (``--force`` skips it) and
turns failures into one line and exit code 1.  Flags are checked before anything connects, so a
bad combination never writes.
"""

from __future__ import annotations

import asyncio
import sys

import click

from odradek.admin.acls import (
    AclAction,
    AclAdminConnection,
    AclCommandError,
    AclCommandOptions,
    AdminClientAclService,
    run_acl_command,
    zookeeper_acl_service,
)
from odradek.admin.client import AdminClientError
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
from odradek.zk.acl_store import AclUpdateConflict
from odradek.zk.client import ZkConnectionError

__all__ = ["acls"]

_AUTHORIZERS = ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer")


def _zookeeper_connect(zookeeper: str | None, authorizer_properties: tuple[str, ...]) -> str | None:
    """``--zookeeper`` or ``zookeeper.connect`` among ``--authorizer-properties`` (key=value)."""
    connect = zookeeper
    for item in authorizer_properties:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"--authorizer-properties expects key=value, got {item!r}")
        if key.strip() == "zookeeper.connect":
            if connect is not None and connect != value.strip():
                fail("zookeeper.connect is given twice (--zookeeper and --authorizer-properties)")
            connect = value.strip()
    if authorizer_properties and connect is None:
        fail("--authorizer-properties must include zookeeper.connect=<host:port[/chroot]>")
    return connect


def _confirm(question: str) -> bool:
    click.echo(question)
    answer = sys.stdin.readline()
    if not answer:
        raise AclCommandError("--remove needs a y/n answer on stdin and got none; pass --force to remove "
                              "without asking")
    return answer.strip().lower() == "y"


@click.command(cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_server_option("Brokers to connect to.")
@click.option("--zookeeper", default=None, metavar="HOST:PORT[/CHROOT]",
              help="ZooKeeper connection string (instead of --bootstrap-server).")
@click.option("--authorizer-properties", multiple=True, metavar="KEY=VALUE",
              help="Authorizer properties; zookeeper.connect=HOST:PORT[/CHROOT] selects ZooKeeper.")
@click.option("--authorizer", default=None, metavar="CLASS", help="The authorizer class (AclAuthorizer only).")
@command_config_option
@click.option("--add", is_flag=True, help="Add ACLs.")
@click.option("--remove", is_flag=True, help="Remove ACLs.")
@click.option("--list", "list_", is_flag=True, help="List ACLs (of the resources given, else all).")
@click.option("--topic", "topics", multiple=True, help="A topic ('*': all topics).")
@click.option("--group", "groups", multiple=True, help="A consumer group ('*': all groups).")
@click.option("--transactional-id", "transactional_ids", multiple=True, help="A transactional id.")
@click.option("--cluster", is_flag=True, help="The cluster resource.")
@click.option("--resource-pattern-type", default="literal", metavar="literal|prefixed|any|match",
              help="How resource names match (any and match: --list and --remove only).")
@click.option("--allow-principal", "allow_principals", multiple=True, metavar="TYPE:NAME", help="e.g. User:alice")
@click.option("--deny-principal", "deny_principals", multiple=True, metavar="TYPE:NAME")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="IP", help="Default: * with --allow-principal.")
@click.option("--deny-host", "deny_hosts", multiple=True, metavar="IP", help="Default: * with --deny-principal.")
@click.option("--operation", "operations", multiple=True, metavar="OPERATION",
              help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, "
                   "IdempotentWrite, All (default All).")
@click.option("--principal", "list_principals", multiple=True, metavar="TYPE:NAME",
              help="With --list: only this principal's ACLs.")
@click.option("--producer", is_flag=True, help="Producer ACLs: Write, Describe, Create on the topics.")
@click.option("--consumer", is_flag=True, help="Consumer ACLs: Read, Describe on the topics, Read on the groups.")
@click.option("--idempotent", is_flag=True, help="With --producer: IdempotentWrite on the cluster.")
@click.option("--force", is_flag=True, help="Remove without asking.")
def acls(bootstrap_server: str | None, zookeeper: str | None, authorizer_properties: tuple[str, ...],
         authorizer: str | None, command_config: str | None, add: bool, remove: bool, list_: bool,
         topics: tuple[str, ...], groups: tuple[str, ...], transactional_ids: tuple[str, ...], cluster: bool,
         resource_pattern_type: str, allow_principals: tuple[str, ...], deny_principals: tuple[str, ...],
         allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...], operations: tuple[str, ...],
         list_principals: tuple[str, ...], producer: bool, consumer: bool, idempotent: bool, force: bool) -> None:
    """Add, remove and list ACLs (kafka-acls.sh)."""
    connect = _zookeeper_connect(zookeeper, authorizer_properties)
    if (connect is None) == (bootstrap_server is None):
        fail("Exactly one of --bootstrap-server or --zookeeper (--authorizer-properties) must be specified")
    if command_config is not None and bootstrap_server is None:
        fail("The --command-config option can only be used with --bootstrap-server option")
    if authorizer is not None and authorizer not in _AUTHORIZERS:
        fail(f"Unsupported --authorizer {authorizer}: only kafka.security.authorizer.AclAuthorizer is available")
    actions = [a for a, on in ((AclAction.ADD, add), (AclAction.REMOVE, remove), (AclAction.LIST, list_)) if on]
    if len(actions) != 1:
        fail("Command must include exactly one action: --list, --add, --remove.")
    opts = AclCommandOptions(
        actions[0], topics=topics, groups=groups, transactional_ids=transactional_ids, cluster=cluster,
        resource_pattern_type=resource_pattern_type, allow_principals=allow_principals,
        deny_principals=deny_principals, allow_hosts=allow_hosts, deny_hosts=deny_hosts, operations=operations,
        list_principals=list_principals, producer=producer, consumer=consumer, idempotent=idempotent, force=force)
    try:
        opts.check()
    except AclCommandError as e:
        fail(str(e))
    if bootstrap_server is not None:
        sys.exit(asyncio.run(_over_bootstrap(bootstrap_server, opts, client_security(command_config))))
    assert connect is not None
    sys.exit(asyncio.run(_over_zookeeper(connect, opts)))


async def _over_zookeeper(connect: str, opts: AclCommandOptions) -> int:
    async def action() -> None:
        async with zookeeper_acl_service(connect) as service:
            await run_acl_command(service, opts, click.echo, _confirm)

    return await over_zookeeper(action, (ZkConnectionError, AclCommandError, AclUpdateConflict, ValueError))


async def _over_bootstrap(bootstrap: str, opts: AclCommandOptions, security: ClientSecurity | None) -> int:
    async def action() -> None:
        async with AclAdminConnection(bootstrap, security=security) as connection:
            await run_acl_command(AdminClientAclService(connection), opts, click.echo, _confirm)

    return await over_bootstrap(bootstrap, action, (AdminClientError, AclCommandError, KafkaError))
