"""``odradek delete-records``: kafka-delete-records.sh's flags and output (Kafka's
DeleteRecordsCommand); the work is odradek.admin.delete_records' and the DeleteRecords
requests odradek.admin.leaders'.  Refused input and failures: one line, exit code 1."""

from __future__ import annotations

import asyncio
import sys

import click

from odradek.admin.client import AdminClientError
from odradek.admin.delete_records import (
    DeleteRecordsCommandError,
    completed_lines,
    parse_offset_json,
)
from odradek.admin.leaders import LeaderRequests
from odradek.cli.common import (
    OneLineCommand,
    bootstrap_server_option,
    client_security,
    command_config_option,
    fail,
    over_bootstrap,
)
from odradek.protocol.errors import KafkaError

__all__ = ["delete_records"]


@click.command("delete-records", cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_server_option("REQUIRED: The server to connect to.")
@click.option("--offset-json-file", "offset_json_file", default=None, metavar="FILE",
              help='REQUIRED: The JSON file with offset per partition. The format to use is: {"partitions": '
                   '[{"topic": "foo", "partition": 1, "offset": 1}], "version":1}')
@command_config_option
def delete_records(bootstrap_server: str | None, offset_json_file: str | None, command_config: str | None) -> None:
    """Delete the records of partitions before the given offsets (kafka-delete-records.sh)."""
    if bootstrap_server is None or not bootstrap_server.strip():
        fail("Missing required argument \"[bootstrap-server]\"")
    if offset_json_file is None:
        fail("Missing required argument \"[offset-json-file]\"")
    try:
        with open(offset_json_file, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        fail(f"--offset-json-file {offset_json_file}: {e.strerror or e}")
    try:
        offsets = parse_offset_json(text)
    except DeleteRecordsCommandError as e:
        fail(str(e))
    requests = LeaderRequests(bootstrap_server, security=client_security(command_config))

    async def delete() -> None:
        click.echo("Executing records delete operation")
        answers = await requests.delete_records(offsets)
        click.echo("Records delete operation completed:")
        for line in completed_lines({tp: answers[tp] for tp in offsets}):
            click.echo(line)

    sys.exit(asyncio.run(over_bootstrap(bootstrap_server, delete, (AdminClientError, KafkaError))))
