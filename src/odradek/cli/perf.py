"""``odradek perf produce|consume``: kafka-producer-perf-test / kafka-consumer-perf-test.

Each run prints one summary line (or, with ``--json``, one JSON object).  Mistakes in the
arguments and failed runs print one ``Error: ...`` line on stderr and exit with code 1.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import click

from odradek.cli.common import (
    OneLineGroup,
    bootstrap_server_option,
    client_security,
    command_config_option,
    fail,
    read_properties,
)
from odradek.perf.common import PerfError, parse_props
from odradek.security.client_properties import librdkafka_properties

__all__ = ["perf"]


def _client(bootstrap_server: str | None, props_option: str, option: Sequence[str], extra: Sequence[str],
            command_config: str | None) -> tuple[str, dict[str, str]]:
    """The bootstrap servers and the other client properties: ``--command-config``'s (Java
    names turned into librdkafka's), overridden by those given on the command line."""
    try:
        props = parse_props([*option, *extra])
    except PerfError as e:
        fail(str(e))
    if command_config is not None:
        client_security(command_config)  # a file no client could use fails here, in one line
        try:
            props = {**librdkafka_properties(read_properties(command_config)), **props}
        except ValueError as e:
            fail(f"--command-config {command_config}: {e}")
    servers = bootstrap_server or props.get("bootstrap.servers")
    props.pop("bootstrap.servers", None)
    if not servers:
        fail(f"--bootstrap-server is required (or bootstrap.servers=... in {props_option})")
    return servers, props


def _report(result: Any, as_json: bool) -> None:
    click.echo(json.dumps(result.to_json()) if as_json else result.summary_line())


def _client_log_echo(verbose: bool) -> Callable[[str], None] | None:
    """With ``--verbose``, the client's log lines go to stderr as they arrive."""
    if not verbose:
        return None
    return lambda line: click.echo(f"[client] {line}", err=True)


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
def perf() -> None:
    """Producer and consumer performance tests (Kafka's perf-test tools)."""


@perf.command()
@click.option("--topic", required=True, help="Topic to produce to (must exist).")
@click.option("--num-records", type=click.IntRange(min=1), required=True, help="Records to send.")
@click.option("--record-size", type=click.IntRange(min=1), required=True, help="Bytes per record.")
@click.option("--throughput", type=float, default=-1, show_default=True,
              help="Target records/s; -1 for no limit.")
@click.option("--producer-props", multiple=True, metavar="KEY=VALUE",
              help="confluent-kafka properties, e.g. acks=1 linger.ms=5 (several may follow).")
@bootstrap_server_option("Brokers to connect to (or bootstrap.servers in --producer-props).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option("-v", "--verbose", is_flag=True, help="Show the client's log lines on stderr.")
@command_config_option
@click.argument("more_props", nargs=-1, metavar="[KEY=VALUE]...")
def produce(topic: str, num_records: int, record_size: int, throughput: float,
            producer_props: tuple[str, ...], bootstrap_server: str | None, as_json: bool,
            verbose: bool, command_config: str | None, more_props: tuple[str, ...]) -> None:
    """Send records as fast as possible (or at --throughput) and report records/s, MB/s and
    latency from send to delivery callback (avg, max, 50th/95th/99th/99.9th percentiles)."""
    from odradek.perf.producer import run_producer

    servers, props = _client(bootstrap_server, "--producer-props", producer_props, more_props, command_config)
    try:
        result = run_producer(servers, topic, num_records, record_size, throughput=throughput,
                              props=props, on_client_log=_client_log_echo(verbose))
    except PerfError as e:
        fail(str(e))
    _report(result, as_json)
    if result.errors:
        fail(f"{result.errors} of {num_records} records failed; first: {result.first_error}")


@perf.command()
@click.option("--topic", required=True, help="Topic to consume (all partitions, by assign()).")
@click.option("--messages", type=click.IntRange(min=1), required=True, help="Records to consume.")
@click.option("--fetch-size", type=click.IntRange(min=1), default=1024 * 1024, show_default=True,
              help="Bytes per partition per fetch (max.partition.fetch.bytes).")
@click.option("--consumer-props", multiple=True, metavar="KEY=VALUE",
              help="confluent-kafka properties, e.g. fetch.wait.max.ms=100 (several may follow).")
@bootstrap_server_option("Brokers to connect to (or bootstrap.servers in --consumer-props).")
@click.option("--timeout", "timeout_ms", type=click.IntRange(min=1), default=10000, show_default=True,
              help="Give up after this many ms without a record (the wait for metadata included).")
@click.option("--from-latest", is_flag=True, help="Start at the log end instead of the beginning.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option("-v", "--verbose", is_flag=True, help="Show the client's log lines on stderr.")
@command_config_option
@click.argument("more_props", nargs=-1, metavar="[KEY=VALUE]...")
def consume(topic: str, messages: int, fetch_size: int, consumer_props: tuple[str, ...],
            bootstrap_server: str | None, timeout_ms: int, from_latest: bool, as_json: bool,
            verbose: bool, command_config: str | None, more_props: tuple[str, ...]) -> None:
    """Read records with assign() (no group) and report records/s and MB/s."""
    from odradek.perf.consumer import run_consumer

    servers, props = _client(bootstrap_server, "--consumer-props", consumer_props, more_props, command_config)
    try:
        result = run_consumer(servers, topic, messages, fetch_size=fetch_size, props=props,
                              timeout_s=timeout_ms / 1000, from_latest=from_latest,
                              on_client_log=_client_log_echo(verbose))
    except PerfError as e:
        fail(str(e))
    _report(result, as_json)
    if result.errors and verbose:
        click.echo(f"warning: {result.errors} transient consumer errors; first: {result.first_error}",
                   err=True)
