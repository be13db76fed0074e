"""``odradek replica-verification``: kafka-replica-verification.sh's flags and output (Kafka
2.8's ReplicaVerificationTool); the verification is odradek.admin.replica_verification's.
Runs until Ctrl-C or SIGTERM (exit code 0), or until replicas disagree on offsets (exit
code 1); bad input: one line, exit code 1."""

from __future__ import annotations

import asyncio
import signal
import sys
import time

import click

from odradek.admin.client import AdminClientError, AdminConnection
from odradek.admin.get_offset_shell import GetOffsetShellError, topic_pattern
from odradek.admin.kafka_errors import exception_text
from odradek.admin.leaders import LeaderRequests
from odradek.admin.replica_verification import (
    ReplicaFetcher,
    ReplicaMismatch,
    ReplicaVerifier,
    time_text,
)
from odradek.cli.common import BOOTSTRAP_METAVAR, OneLineCommand, fail, over_bootstrap
from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = ["replica_verification"]


class _NoTopics(Exception):
    pass


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@click.command("replica-verification", cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--broker-list", "broker_list", default=None, metavar="hostname:port,...,hostname:port",
              help="REQUIRED: The list of hostname and port of the server to connect to.")
@click.option("--bootstrap-server", "bootstrap_server", default=None, metavar=BOOTSTRAP_METAVAR,
              help="The server(s) to connect to (Kafka 3's name of --broker-list).")
@click.option("--fetch-size", type=int, default=1024 * 1024, show_default=True, metavar="BYTES",
              help="The fetch size of each request.")
@click.option("--max-wait-ms", type=int, default=1000, show_default=True, metavar="MS",
              help="The max amount of time each fetch request waits.")
@click.option("--topic-white-list", "topic_white_list", default=".*", show_default=True, metavar="REGEX",
              help="White list of topics to verify replica consistency. Defaults to all topics.")
@click.option("--time", "initial_time", type=int, default=-1, show_default=True,
              metavar="timestamp/-1(latest)/-2(earliest)", help="Timestamp for getting the initial offsets.")
@click.option("--report-interval-ms", type=int, default=30_000, show_default=True, metavar="MS",
              help="The reporting interval.")
def replica_verification(broker_list: str | None, bootstrap_server: str | None, fetch_size: int, max_wait_ms: int,
                         topic_white_list: str, initial_time: int, report_interval_ms: int) -> None:
    """Validate that all replicas for a set of topics have the same data
    (kafka-replica-verification.sh)."""
    bootstrap = bootstrap_server or broker_list
    if bootstrap is None or not bootstrap.strip():
        fail("Missing required argument \"[broker-list]\"")
    if fetch_size <= 0 or max_wait_ms < 0 or report_interval_ms < 0:
        fail("--fetch-size must be positive, --max-wait-ms and --report-interval-ms not negative")
    try:
        wanted = topic_pattern(topic_white_list)
    except GetOffsetShellError as e:
        fail(str(e))

    async def run() -> None:
        async with AdminConnection(bootstrap) as admin:
            view = await admin.metadata(None)
        topics = [t for t in view.topics if t.error_code == ErrorCode.none and wanted.fullmatch(t.name)]
        if not topics:
            raise _NoTopics("No topics found. --topic-white-list, if specified, is either filtering out all topics "
                            "or there is no topic.")
        replicas = {TopicPartition(t.name, p.partition_index): list(p.replica_nodes)
                    for t in topics for p in t.partitions}
        initial = await LeaderRequests(bootstrap).list_offsets(replicas, initial_time)
        for tp, (error, _, _) in initial.items():
            if error != ErrorCode.none:
                raise _NoTopics(f"could not get the initial offset of {tp}: {exception_text(error)}")
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp, nodes in replicas.items():
            for broker in nodes:
                by_broker.setdefault(broker, []).append(tp)
        fetchers = {broker: ReplicaFetcher(f"{view.brokers[broker][0]}:{view.brokers[broker][1]}", tps, fetch_size,
                                           max_wait_ms) for broker, tps in by_broker.items() if broker in view.brokers}
        verifier = ReplicaVerifier({tp: len(nodes) for tp, nodes in replicas.items()},
                                   {tp: offset for tp, (_, offset, _) in initial.items()}, report_interval_ms,
                                   _now_ms())
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        click.echo(f"{time_text(_now_ms())}: verification process is started.")
        try:
            while not stop.is_set():
                answers = await asyncio.gather(*(f.fetch(verifier.offsets) for f in fetchers.values()))
                fetched: dict[TopicPartition, dict[int, object]] = {}
                for broker, answer in zip(fetchers, answers, strict=True):
                    for tp, replica in answer.items():
                        fetched.setdefault(tp, {})[broker] = replica
                for line in verifier.verify(fetched, _now_ms()):  # type: ignore[arg-type]
                    click.echo(line)
        finally:
            for fetcher in fetchers.values():
                await fetcher.close()

    try:
        status = asyncio.run(over_bootstrap(bootstrap, run, (_NoTopics, AdminClientError, KafkaError)))
    except ReplicaMismatch as e:
        click.echo(str(e))
        status = 1
    sys.exit(status)
