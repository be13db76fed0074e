"""``odradek get-offsets``: kafka-get-offsets.sh's flags and output (Kafka 3.9's
GetOffsetShell); the rules and the output are odradek.admin.get_offset_shell's, the
ListOffsets requests odradek.admin.leaders'.  Refused input: one line, exit code 1; a
partition whose leader answers with an error is skipped with a line on stderr, as Kafka's."""

from __future__ import annotations

import asyncio
import sys

import click

from odradek.admin.client import AdminClientError
from odradek.admin.get_offset_shell import (
    EARLIEST_LOCAL,
    LATEST_TIERED,
    GetOffsetShellError,
    matching,
    offset_lines,
    parse_partitions,
    parse_time,
    parse_topic_partitions,
    topic_rule,
)
from odradek.admin.kafka_errors import exception_text
from odradek.admin.leaders import LeaderRequests, partitions_of
from odradek.cli.common import (
    OneLineCommand,
    bootstrap_server_option,
    client_security,
    command_config_option,
    fail,
    over_bootstrap,
)
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = ["get_offsets"]


@click.command("get-offsets", cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_server_option("REQUIRED. The server(s) to connect to in the form HOST1:PORT1,HOST2:PORT2.")
@click.option("--topic-partitions", "topic_partitions", default=None,
              metavar="topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3",
              help="Comma separated list of topic-partition patterns to get the offsets for: an optional topic "
                   "regex, then ':' and a partition, a range N-M (upper exclusive), N-, -M, or nothing for all.")
@click.option("--topic", default=None, metavar="TOPIC",
              help="The topic to get the offsets for. It also accepts a regular expression. If not present, all "
                   "authorized topics are queried. Cannot be used if --topic-partitions is present.")
@click.option("--partitions", default=None, metavar="IDS",
              help="Comma separated list of partition ids to get the offsets for. If not present, all partitions "
                   "of the authorized topics are queried. Cannot be used if --topic-partitions is present.")
@click.option("--time", "time_", default="latest", show_default=True,
              metavar="<timestamp> / -1 or latest / -2 or earliest / -3 or max-timestamp / -4 or earliest-local / "
                      "-5 or latest-tiered",
              help="timestamp of the offsets before that. [Note: No offset is returned, if the timestamp greater "
                   "than recently committed record timestamp is given.]")
@command_config_option
@click.option("--exclude-internal-topics", is_flag=True,
              help="By default, internal topics are included. If specified, internal topics are excluded.")
def get_offsets(bootstrap_server: str | None, topic_partitions: str | None, topic: str | None,
                partitions: str | None, time_: str, command_config: str | None,
                exclude_internal_topics: bool) -> None:
    """Print the offsets of topic partitions at a time: latest, earliest, max-timestamp or a
    timestamp (kafka-get-offsets.sh)."""
    if bootstrap_server is None or not bootstrap_server.strip():
        fail("Missing required argument \"[bootstrap-server]\"")
    if topic_partitions is not None and (topic is not None or partitions is not None):
        fail("--topic-partitions cannot be used with --topic or --partitions")
    try:
        timestamp = parse_time(time_)
        rules = (parse_topic_partitions(topic_partitions) if topic_partitions is not None
                 else [topic_rule(topic, parse_partitions(partitions))])
    except GetOffsetShellError as e:
        fail(str(e))
    if timestamp in (EARLIEST_LOCAL, LATEST_TIERED):
        # Kafka's client asks with ListOffsets v8/v9, which odradek's brokers (no tiered storage) do not
        # speak; its tool then skips every partition with UnsupportedVersionException.
        fail(f"--time {time_}: earliest-local and latest-tiered need tiered storage (ListOffsets v8+), "
             "which odradek's brokers do not have")
    requests = LeaderRequests(bootstrap_server, security=client_security(command_config))

    async def run() -> None:
        found = matching(rules, partitions_of(await requests.metadata(None)), exclude_internal_topics)
        if not found:
            raise GetOffsetShellError("Could not match any topic-partitions with the specified filters")
        answers = await requests.list_offsets(found, timestamp)
        offsets = {}
        for tp in found:
            error, offset, _ = answers[tp]
            if error != ErrorCode.none:
                click.echo(f"Skip getting offsets for topic-partition {tp} due to error: {exception_text(error)}",
                           err=True)
            else:
                offsets[tp] = offset
        for line in offset_lines(offsets):
            click.echo(line)

    sys.exit(asyncio.run(over_bootstrap(bootstrap_server, run, (GetOffsetShellError, AdminClientError, KafkaError))))
