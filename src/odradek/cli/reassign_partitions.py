"""``odradek reassign-partitions``: kafka-reassign-partitions.sh.  With ``--bootstrap-server``
(KIP-455's admin-client mode, odradek.admin.reassignment_command): ``--generate``,
``--execute`` (``--throttle``, ``--replica-alter-log-dirs-throttle``, ``--additional``, and
moves between log directories: ``log_dirs`` in the JSON file),
``--verify``, ``--cancel``, ``--list``.  With ``--zookeeper`` (the older mode,
odradek.admin.reassign_partitions, over ``/admin/reassign_partitions``): ``--execute`` and
``--verify``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from odradek.admin.client import AdminClientError
from odradek.admin.partition_admin import PartitionAdmin, PartitionAdminError
from odradek.admin.reassign_partitions import (
    ReassignmentError,
    execute_reassignment,
    parse_reassignment_json,
    verify_reassignment,
)
from odradek.cli.common import (
    OneLineCommand,
    client_security,
    command_config_option,
    fail,
    over_bootstrap,
)
from odradek.protocol.errors import KafkaError
from odradek.zk.client import KafkaZkClient, ZkConnectionError

__all__ = ["reassign_partitions"]

SESSION_TIMEOUT_MS = 30_000
CONNECTION_TIMEOUT_MS = 10_000
EXIT_NOT_COMPLETE = 2  # --verify: some reassignment is still running or failed
ACTIONS = ("--generate", "--execute", "--verify", "--cancel", "--list")


def _read(path: str | None, option: str) -> str:
    if path is None:
        fail(f"Missing option '{option}'.")
    try:
        return Path(path).read_text()
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")


@click.command("reassign-partitions", cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", "bootstrap_server", default=None, metavar="HOST:PORT",
              help="the server(s) to use for bootstrapping (the admin-client mode).")
@command_config_option
@click.option("--zookeeper", default=None, metavar="HOST:PORT[/CHROOT]",
              help="ZooKeeper, for the older mode (--execute and --verify only).")
@click.option("--reassignment-json-file", "json_file", default=None, type=click.Path(dir_okay=False),
              help="The JSON file with the partition reassignment configuration.")
@click.option("--topics-to-move-json-file", "topics_file", default=None, type=click.Path(dir_okay=False),
              help="--generate: the JSON file listing the topics to reassign.")
@click.option("--broker-list", default=None, metavar="ID[,...]",
              help="--generate: the brokers to which the partitions need to be reassigned, as \"0,1,2\".")
@click.option("--disable-rack-aware", is_flag=True, help="--generate: ignore racks (odradek's proposal always does).")
@click.option("--generate", is_flag=True, help="Generate a candidate partition reassignment configuration.")
@click.option("--execute", is_flag=True, help="Start the reassignment.")
@click.option("--verify", is_flag=True, help="Report whether the reassignment completed; remove throttles then.")
@click.option("--cancel", is_flag=True, help="Cancel the reassignments of the JSON file that are in progress.")
@click.option("--list", "list_", is_flag=True, help="List the partition reassignments in progress.")
@click.option("--additional", is_flag=True, help="--execute: start even while other reassignments are running.")
@click.option("--preserve-throttles", is_flag=True, help="--verify/--cancel: do not remove the throttles.")
@click.option("--throttle", type=int, default=-1, metavar="B/S",
              help="--execute: the replication throttle rate between brokers, bytes/s.")
@click.option("--replica-alter-log-dirs-throttle", "log_dir_throttle", type=int, default=-1, metavar="B/S",
              help="--execute: the throttle of moves between log directories on a broker, bytes/s.")
@click.option("--timeout", type=int, default=10_000, metavar="MS",
              help="--execute/--cancel: how long to keep asking brokers to start the log directory moves.")
def reassign_partitions(bootstrap_server: str | None, command_config: str | None, zookeeper: str | None,
                        json_file: str | None, topics_file: str | None, broker_list: str | None,
                        disable_rack_aware: bool, generate: bool, execute: bool, verify: bool, cancel: bool,
                        list_: bool, additional: bool, preserve_throttles: bool, throttle: int,
                        log_dir_throttle: int, timeout: int) -> None:
    """Move partition replicas between brokers (kafka-reassign-partitions.sh)."""
    chosen = [flag for flag, on in zip(ACTIONS, (generate, execute, verify, cancel, list_), strict=True) if on]
    if len(chosen) != 1:
        fail(f"Command must include exactly one action: {', '.join(ACTIONS)}")
    if bootstrap_server:
        _admin_client_mode(bootstrap_server, command_config, chosen[0], json_file, topics_file, broker_list,
                           additional, preserve_throttles, throttle, log_dir_throttle, timeout)
    if zookeeper is None:
        fail("Please specify --bootstrap-server")
    if chosen[0] not in ("--execute", "--verify"):
        fail(f"{chosen[0]} needs --bootstrap-server")
    _zookeeper_mode(zookeeper, json_file, execute)


def _admin_client_mode(bootstrap_server: str, command_config: str | None, action: str, json_file: str | None,
                       topics_file: str | None, broker_list: str | None, additional: bool,
                       preserve_throttles: bool, throttle: int, log_dir_throttle: int, timeout: int) -> None:
    from odradek.admin import reassignment_command as command

    admin = PartitionAdmin(bootstrap_server, security=client_security(command_config))
    try:
        if action == "--generate":
            topics = command.parse_topics_to_move(_read(topics_file, "--topics-to-move-json-file"))
            if broker_list is None:
                fail("Missing option '--broker-list'.")
            try:
                brokers = [int(b) for b in broker_list.split(",") if b.strip()]
            except ValueError:
                fail(f"--broker-list expects comma-separated broker ids, got {broker_list!r}")
        elif action != "--list":
            plan, moves = command.parse_plan(_read(json_file, "--reassignment-json-file"))
    except PartitionAdminError as e:
        fail(str(e))

    async def run() -> None:
        async with admin:
            if action == "--generate":
                await command.generate(admin, topics, brokers, click.echo)
            elif action == "--execute":
                await command.execute(admin, plan, click.echo, moves=moves, additional=additional,
                                      throttle=throttle, log_dir_throttle=log_dir_throttle, timeout_ms=timeout)
            elif action == "--verify":
                # Exit code 0 whatever the state, as Kafka's tool in this mode.
                await command.verify(admin, plan, click.echo, moves=moves, preserve_throttles=preserve_throttles)
            elif action == "--cancel":
                await command.cancel(admin, plan, click.echo, moves=moves, preserve_throttles=preserve_throttles,
                                     timeout_ms=timeout)
            else:
                await command.list_reassignments(admin, click.echo)

    sys.exit(asyncio.run(over_bootstrap(bootstrap_server, run, (PartitionAdminError, AdminClientError, KafkaError))))


def _zookeeper_mode(zookeeper: str, json_file: str | None, execute: bool) -> None:
    try:
        wanted = parse_reassignment_json(_read(json_file, "--reassignment-json-file"))
    except ReassignmentError as e:
        fail(str(e))

    async def run() -> int:
        zk = KafkaZkClient(zookeeper, SESSION_TIMEOUT_MS, CONNECTION_TIMEOUT_MS)
        try:
            await zk.start()
        except ZkConnectionError as e:
            click.echo(f"Error: {e}", err=True)
            return 1
        try:
            if execute:
                await execute_reassignment(zk, wanted, click.echo)
                return 0
            return 0 if await verify_reassignment(zk, wanted, click.echo) else EXIT_NOT_COMPLETE
        except ReassignmentError as e:
            click.echo(f"Error: {e}", err=True)
            return 1
        finally:
            await zk.close()

    sys.exit(asyncio.run(run()))
