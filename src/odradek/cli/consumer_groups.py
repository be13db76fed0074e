"""``odradek consumer-groups``: kafka-consumer-groups.sh's flags and output.

The work is odradek.admin.consumer_group_command's, over the Kafka protocol
(odradek.admin.group_admin); this module reads the flags, checks them before connecting
(refusals: one line, exit status 1) and prints.
"""

from __future__ import annotations

import asyncio
import sys

import click

from odradek.admin.client import AdminClientError
from odradek.admin.consumer_group_command import (
    GroupAction,
    GroupCommandError,
    GroupCommandOptions,
    ResetSpec,
    run_group_command,
)
from odradek.admin.group_admin import GroupAdminConnection
from odradek.cli.common import (
    OneLineCommand,
    bootstrap_server_option,
    client_security,
    command_config_option,
    fail,
    over_bootstrap,
)
from odradek.protocol.errors import KafkaError
from odradek.security.client import ClientSecurity

__all__ = ["consumer_groups"]


def _reset_specs(ctx: click.Context) -> tuple[tuple[ResetSpec, str | None], ...]:
    given = []
    for spec in ResetSpec:
        value = ctx.params.get(spec.value.replace("-", "_"))
        if value not in (None, False):
            given.append((spec, None if value is True else str(value)))
    return tuple(given)


@click.command(cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_server_option("REQUIRED: the brokers to connect to.")
@command_config_option
@click.option("--list", "list_", is_flag=True, help="List all consumer groups.")
@click.option("--describe", is_flag=True, help="Describe consumer groups and their offset lag.")
@click.option("--delete", is_flag=True, help="Delete consumer groups (only empty ones).")
@click.option("--reset-offsets", is_flag=True, help="Reset the offsets of inactive consumer groups.")
@click.option("--delete-offsets", is_flag=True, help="Delete a consumer group's offsets of the given topics.")
@click.option("--group", "groups", multiple=True, help="The consumer group to act on (repeatable).")
@click.option("--all-groups", is_flag=True, help="Act on all consumer groups.")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,P]",
              help="A topic (reset or delete offsets), with partitions as topic:0,1,2 (repeatable).")
@click.option("--all-topics", is_flag=True, help="Reset the offsets of every topic the group has offsets for.")
@click.option("--members", is_flag=True, help="Describe the members of the group.")
@click.option("--offsets", is_flag=True, help="Describe the group's offsets and lag (the default).")
@click.option("--state", is_flag=False, flag_value="", default=None, metavar="[STATES]",
              help="Describe: the group's state; list: groups' states, or only those in STATES (Stable,Empty).")
@click.option("--verbose", is_flag=True, help="Describe members: also their assignment.")
@click.option("--to-earliest", is_flag=True, help="Reset offsets to the earliest offsets.")
@click.option("--to-latest", is_flag=True, help="Reset offsets to the latest offsets.")
@click.option("--to-offset", default=None, metavar="OFFSET", help="Reset offsets to this offset.")
@click.option("--shift-by", default=None, metavar="N", help="Shift the current offsets by N (may be negative).")
@click.option("--to-datetime", default=None, metavar="YYYY-MM-DDTHH:mm:SS.sss",
              help="Reset offsets to the first record at or after this time.")
@click.option("--by-duration", default=None, metavar="PnDTnHnMnS", help="Reset offsets to this long ago.")
@click.option("--to-current", is_flag=True, help="Reset offsets to the current offsets.")
@click.option("--from-file", default=None, metavar="CSV", help="Reset offsets to those in a CSV file (--export's).")
@click.option("--dry-run", is_flag=True, help="Only show the new offsets (the default).")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
@click.option("--export", is_flag=True, help="Print the new offsets as CSV.")
@click.option("--timeout", default=5000, type=int, metavar="MS", help="Accepted for kafka-consumer-groups.sh's sake.")
@click.pass_context
def consumer_groups(ctx: click.Context, bootstrap_server: str | None, command_config: str | None, list_: bool,
                    describe: bool, delete: bool, reset_offsets: bool, delete_offsets: bool, groups: tuple[str, ...],
                    all_groups: bool, topics: tuple[str, ...], all_topics: bool, members: bool, offsets: bool,
                    state: str | None, verbose: bool, dry_run: bool, execute: bool, export: bool,
                    **_specs: object) -> None:
    """List, describe, reset offsets of and delete consumer groups (kafka-consumer-groups.sh)."""
    actions = [a for a, on in ((GroupAction.LIST, list_), (GroupAction.DESCRIBE, describe),
                               (GroupAction.DELETE, delete), (GroupAction.RESET_OFFSETS, reset_offsets),
                               (GroupAction.DELETE_OFFSETS, delete_offsets)) if on]
    if len(actions) != 1:
        fail("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
             "--delete-offsets")
    if bootstrap_server is None:
        fail("Missing required argument \"[bootstrap-server]\"")
    opts = GroupCommandOptions(actions[0], groups=groups, all_groups=all_groups, topics=topics, all_topics=all_topics,
                               members=members, offsets=offsets, state=state, verbose=verbose,
                               reset=_reset_specs(ctx), dry_run=dry_run, execute=execute, export=export)
    try:
        opts.check()
    except GroupCommandError as e:
        fail(str(e))
    sys.exit(asyncio.run(_run(bootstrap_server, opts, client_security(command_config))))


async def _run(bootstrap: str, opts: GroupCommandOptions, security: ClientSecurity | None) -> int:
    async def action() -> None:
        async with GroupAdminConnection(bootstrap, security=security) as connection:
            await run_group_command(connection, opts, click.echo, lambda line: click.echo(line, err=True))

    return await over_bootstrap(bootstrap, action, (AdminClientError, GroupCommandError, KafkaError))
