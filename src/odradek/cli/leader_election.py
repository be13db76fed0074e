"""``odradek leader-election``: kafka-leader-election.sh's flags and output (Kafka 2.8's
LeaderElectionCommand); the work is odradek.admin.partition_admin's.

Partitions that could not be elected are printed one per line, then the command fails with
exit code 1 (Kafka's tool throws AdminCommandFailedException)."""

from __future__ import annotations

import asyncio
import json
import sys

import click

from odradek.admin.client import AdminClientError
from odradek.admin.partition_admin import PartitionAdmin, PartitionAdminError, election_output
from odradek.cli.common import OneLineCommand, client_security, fail, over_bootstrap
from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = ["leader_election"]

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
TIMEOUT_MS = 30_000  # Kafka's tool: 30 s for the whole election
REFUSALS = {ErrorCode.cluster_authorization_failed: "Not authorized to perform leader election",
            ErrorCode.request_timed_out: "Timeout waiting for election results"}


def _json_partitions(path: str) -> list[TopicPartition]:
    """``--path-to-json-file``'s ``{"partitions": [{"topic", "partition"}, ...]}``."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    except ValueError:
        fail("Replica election data is empty")
    if not isinstance(data, dict) or "partitions" not in data:
        fail('Replica election data is missing "partition" field')
    try:
        partitions = [TopicPartition(str(p["topic"]), int(p["partition"])) for p in data["partitions"]]
    except (KeyError, TypeError, ValueError):
        fail("Replica election data has a partition without a topic or partition number")
    duplicates = sorted({tp for tp in partitions if partitions.count(tp) > 1})
    if duplicates:
        fail("Replica election data contains duplicate partitions: "
             + ",".join(f"{tp.topic}-{tp.partition}" for tp in duplicates))
    return partitions


@click.command("leader-election", cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", "bootstrap_server", metavar="HOST:PORT",
              help="A hostname and port for the broker to connect to, in the form host:port. Multiple comma "
                   "separated URLs can be given. REQUIRED.")
@click.option("--admin.config", "admin_config", default=None, metavar="FILE",
              help="Configuration properties files to pass to the admin client")
@click.option("--path-to-json-file", "json_file", default=None, metavar="FILE",
              help='The JSON file with the list of partitions for which leader elections should be performed: '
                   '{"partitions": [{"topic": "foo", "partition": 1}]}. Not allowed with --all-topic-partitions '
                   "or --topic.")
@click.option("--topic", default=None, help="Name of topic for which to perform an election.")
@click.option("--partition", type=int, default=None, help="Partition id for which to perform an election. "
                                                          "REQUIRED if --topic is specified.")
@click.option("--all-topic-partitions", is_flag=True, help="Perform election on all of the topic partitions.")
@click.option("--election-type", "election_type", default=None, metavar="TYPE",
              help='Type of election to attempt: "preferred" or "unclean". REQUIRED.')
def leader_election(bootstrap_server: str | None, admin_config: str | None, json_file: str | None,
                    topic: str | None, partition: int | None, all_topic_partitions: bool,
                    election_type: str | None) -> None:
    """Elect new leaders for partitions: their preferred replicas, or any replica (unclean)
    (kafka-leader-election.sh)."""
    if not bootstrap_server:
        fail("Missing required option(s) [bootstrap-server]")
    if election_type is None:
        fail("Missing required option(s) [election-type]")
    kind = election_type.upper()
    if kind not in ELECTION_TYPES:
        fail(f"Cannot convert argument '{election_type}' of option ['election-type'] "
             f"(valid: {', '.join(ELECTION_TYPES)})")
    if sum((json_file is not None, topic is not None, all_topic_partitions)) != 1:
        fail("Exactly one of --all-topic-partitions, --topic with --partition, or --path-to-json-file is required")
    if topic is not None and partition is None:
        fail("Option partition is required if option topic is given")
    partitions = (_json_partitions(json_file) if json_file is not None
                  else [TopicPartition(topic, partition)] if topic is not None and partition is not None else None)
    admin = PartitionAdmin(bootstrap_server, security=client_security(admin_config))

    async def elect() -> None:
        async with admin:
            try:
                results = await admin.elect_leaders(ELECTION_TYPES[kind], partitions, TIMEOUT_MS)
            except PartitionAdminError as e:
                # Kafka's tool says these two in its own words (on stdout), then fails.
                said = REFUSALS.get(e.error) if e.error is not None else None
                if said is None:
                    raise
                click.echo(said)
                raise PartitionAdminError(said) from None
        lines, failed = election_output(kind, results)
        for line in lines:
            click.echo(line)
        if failed:
            raise PartitionAdminError(f"{failed} replica(s) could not be elected")

    sys.exit(asyncio.run(over_bootstrap(bootstrap_server, elect, (PartitionAdminError, AdminClientError, KafkaError))))
