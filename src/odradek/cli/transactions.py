"""``odradek transactions``: kafka-transactions.sh's commands, options and output
(org.apache.kafka.tools.TransactionsCommand): ``list``, ``describe``, ``describe-producers`` and
``abort``, over the Kafka protocol (odradek.admin.transactions).

Refused input (a missing or malformed option, an unknown command) is one line on stderr and
exit code 1, before anything is sent; so is a failed operation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import click

from odradek.admin.client import AdminClientError
from odradek.admin.transactions import (
    DESCRIBE_PRODUCERS_HEADERS,
    DESCRIBE_TRANSACTIONS_HEADERS,
    LIST_TRANSACTIONS_HEADERS,
    AbortTransactionSpec,
    TransactionsAdmin,
    TransactionsCommandError,
    describe_producers_rows,
    describe_transaction_row,
    list_transactions_rows,
    pretty_print_table,
)
from odradek.cli.common import (
    OneLineGroup,
    bootstrap_server_option,
    client_security,
    command_config_option,
    fail,
)
from odradek.common import now_ms
from odradek.protocol.errors import KafkaError
from odradek.security.client import ClientSecurity

__all__ = ["transactions"]

MAX_PRODUCER_EPOCH = 32767  # a Java short
MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1


def _int_option(value: str | None, name: str, low: int, high: int) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        fail(f"{name} expects an integer, got {value!r}")
    if not low <= number <= high:
        fail(f"{name} must be between {low} and {high}, got {number}")
    return number


@dataclass(frozen=True)
class _Target:
    """Where the subcommands connect, and how (--bootstrap-server, --command-config)."""

    bootstrap: str
    security: ClientSecurity | None


def _run(target: _Target, action: Callable[[TransactionsAdmin], Awaitable[list[str]]]) -> None:
    bootstrap = target.bootstrap

    async def main() -> list[str]:
        async with TransactionsAdmin(bootstrap, security=target.security) as admin:
            return await action(admin)

    try:
        lines = asyncio.run(main())
    except (TransactionsCommandError, AdminClientError) as e:
        fail(str(e))
    except KafkaError as e:
        fail(f"{type(e).__name__}: {e}")
    except (ConnectionError, OSError, TimeoutError) as e:
        fail(f"lost the connection to the cluster ({bootstrap}): {e or type(e).__name__}")
    for line in lines:
        click.echo(line)


@click.group(cls=OneLineGroup, no_args_is_help=False, context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_server_option("Hostname and port of a broker to connect to (multiple comma-separated entries can be given).")
@command_config_option
@click.pass_context
def transactions(ctx: click.Context, bootstrap_server: str | None, command_config: str | None) -> None:
    """Analyse the transactional state of producers in the cluster, and recover from hanging
    transactions (kafka-transactions.sh)."""
    if bootstrap_server is None or not bootstrap_server.strip():
        fail("argument --bootstrap-server is required")
    ctx.obj = _Target(bootstrap_server, client_security(command_config))


@transactions.command("list")
@click.pass_obj
def list_command(target: _Target) -> None:
    """List transactions."""
    async def action(admin: TransactionsAdmin) -> list[str]:
        listings = await admin.list_transactions()
        return pretty_print_table(LIST_TRANSACTIONS_HEADERS, list_transactions_rows(listings))

    _run(target, action)


@transactions.command("describe")
@click.option("--transactional-id", default=None, help="Transactional id.")
@click.pass_obj
def describe_command(target: _Target, transactional_id: str | None) -> None:
    """Describe the state of an active transactional-id."""
    if transactional_id is None or transactional_id == "":
        fail("argument --transactional-id is required")

    async def action(admin: TransactionsAdmin) -> list[str]:
        description = await admin.describe_transaction(transactional_id)
        row = describe_transaction_row(description, now_ms())
        return pretty_print_table(DESCRIBE_TRANSACTIONS_HEADERS, [row])

    _run(target, action)


def _topic_partition(topic: str | None, partition: str | None) -> tuple[str, int]:
    if topic is None or topic == "":
        fail("argument --topic is required")
    number = _int_option(partition, "--partition", 0, MAX_INT32)
    if number is None:
        fail("argument --partition is required")
    return topic, number


@transactions.command("describe-producers")
@click.option("--broker-id", default=None, help="Describe the producer state on this replica (default: the leader).")
@click.option("--topic", default=None, help="Topic name.")
@click.option("--partition", default=None, help="Partition number.")
@click.pass_obj
def describe_producers_command(target: _Target, broker_id: str | None, topic: str | None,
                               partition: str | None) -> None:
    """Describe the states of active producers for a topic partition."""
    name, number = _topic_partition(topic, partition)
    broker = _int_option(broker_id, "--broker-id", 0, MAX_INT32)

    async def action(admin: TransactionsAdmin) -> list[str]:
        producers = await admin.describe_producers(name, number, broker)
        return pretty_print_table(DESCRIBE_PRODUCERS_HEADERS, describe_producers_rows(producers))

    _run(target, action)


@transactions.command("abort")
@click.option("--topic", default=None, help="Topic name.")
@click.option("--partition", default=None, help="Partition number.")
@click.option("--start-offset", default=None, help="Start offset of the transaction to abort.")
@click.option("--producer-id", default=None, help="Producer id (instead of --start-offset).")
@click.option("--producer-epoch", default=None, help="Producer epoch (with --producer-id).")
@click.option("--coordinator-epoch", default=None, help="Coordinator epoch (with --producer-id).")
@click.pass_obj
def abort_command(target: _Target, topic: str | None, partition: str | None, start_offset: str | None,
                  producer_id: str | None, producer_epoch: str | None, coordinator_epoch: str | None) -> None:
    """Abort a hanging transaction: an ABORT marker written to the partition by its leader."""
    name, number = _topic_partition(topic, partition)
    start = _int_option(start_offset, "--start-offset", 0, MAX_INT64)
    pid = _int_option(producer_id, "--producer-id", 0, MAX_INT64)
    epoch = _int_option(producer_epoch, "--producer-epoch", 0, MAX_PRODUCER_EPOCH)
    coordinator = _int_option(coordinator_epoch, "--coordinator-epoch", -1, MAX_INT32)
    if start is None and pid is None:
        fail("The transaction to abort must be identified either with --start-offset or with "
              "--producer-id, --producer-epoch, and --coordinator-epoch")
    if start is not None and (pid is not None or epoch is not None or coordinator is not None):
        fail("--start-offset cannot be combined with --producer-id, --producer-epoch or --coordinator-epoch")
    if start is None:
        if epoch is None:
            fail("Missing required argument --producer-epoch")
        if coordinator is None:
            fail("Missing required argument --coordinator-epoch")

    async def action(admin: TransactionsAdmin) -> list[str]:
        if start is not None:
            spec = await admin.abort_spec(name, number, start)
        else:
            assert pid is not None and epoch is not None and coordinator is not None
            # -1 (a transaction begun before any marker from its coordinator): 0 is <= every epoch.
            spec = AbortTransactionSpec(name, number, pid, epoch, max(coordinator, 0))
        await admin.abort_transaction(spec)
        return []

    _run(target, action)
