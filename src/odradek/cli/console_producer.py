"""``odradek console-producer``: kafka-console-producer.sh (Kafka 2.8's ConsoleProducer).

Reads lines from standard input until its end and sends each as a record (the line format is
odradek.admin.console's LineReader).  Keyed records are partitioned as Kafka's Java producer
does (murmur2).  A line the reader refuses stops the tool with one line and exit code 1, after
the records before it are sent; records the cluster refuses are reported one line each and
make the exit code 1.
"""

from __future__ import annotations

import sys

import click

from odradek.admin.console import ConsoleError, LineReader, line_text, parse_key_values
from odradek.cli.common import BOOTSTRAP_METAVAR, OneLineCommand, fail
from odradek.cli.console_client import client_config, confluent_kafka, error_text

__all__ = ["console_producer"]

_FLUSH_TIMEOUT_S = 60.0


@click.command("console-producer", cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", "bootstrap_server", default=None, metavar=BOOTSTRAP_METAVAR,
              help="REQUIRED unless --broker-list(deprecated) is specified. The server(s) to connect to.")
@click.option("--broker-list", "broker_list", default=None, metavar=BOOTSTRAP_METAVAR,
              help="DEPRECATED, use --bootstrap-server instead; ignored if --bootstrap-server is specified.")
@click.option("--topic", default=None, metavar="TOPIC", help="REQUIRED: The topic id to produce messages to.")
@click.option("--property", "properties", multiple=True, metavar="PROP",
              help="A mechanism to pass user-defined properties in the form key=value to the message reader: "
                   "parse.key, key.separator, ignore.error.")
@click.option("--producer-property", "producer_properties", multiple=True, metavar="PROP",
              help="A mechanism to pass user-defined properties in the form key=value to the producer.")
@click.option("--producer.config", "producer_config", default=None, metavar="FILE",
              help="Producer config properties file. Note that --producer-property takes precedence over this config.")
@click.option("--sync", is_flag=True, help="If set message send requests to the brokers are synchronously, one at a "
              "time as they arrive.")
@click.option("--compression-codec", "compression_codec", is_flag=False, flag_value="gzip", default=None,
              metavar="CODEC", help="The compression codec: either 'none', 'gzip', 'snappy', 'lz4', or 'zstd'. "
              "If specified without value, then it defaults to 'gzip'")
@click.option("--request-required-acks", "acks", default="1", show_default=True, metavar="ACKS",
              help="The required acks of the producer requests")
@click.option("--request-timeout-ms", type=int, default=1500, show_default=True, metavar="MS",
              help="The ack timeout of the producer requests. Value must be non-negative and non-zero")
@click.option("--timeout", "linger_ms", type=int, default=1000, show_default=True, metavar="MS",
              help="If set and the producer is running in asynchronous mode, this gives the maximum amount of time "
                   "a message will queue awaiting sufficient batch size. The value is given in ms.")
@click.option("--batch-size", type=int, default=200, show_default=True, metavar="SIZE",
              help="Number of messages to send in a single batch if they are not being sent synchronously.")
def console_producer(bootstrap_server: str | None, broker_list: str | None, topic: str | None,
                     properties: tuple[str, ...], producer_properties: tuple[str, ...], producer_config: str | None,
                     sync: bool, compression_codec: str | None, acks: str, request_timeout_ms: int, linger_ms: int,
                     batch_size: int) -> None:
    """Read lines from standard input and publish them to a topic (kafka-console-producer.sh)."""
    if topic is None:
        fail("Missing required argument \"[topic]\"")
    try:
        reader = LineReader.from_properties(parse_key_values(properties, "--property"))
    except ConsoleError as e:
        fail(str(e))
    defaults = {"acks": acks, "request.timeout.ms": str(request_timeout_ms), "linger.ms": str(linger_ms),
                "batch.num.messages": str(batch_size), "compression.type": compression_codec or "none",
                # Kafka's Java producer places keyed records by murmur2 of the key.
                "partitioner": "murmur2_random"}
    if sync:
        defaults.update({"linger.ms": "0", "max.in.flight.requests.per.connection": "1"})
    config = client_config(bootstrap_server or broker_list, producer_config, producer_properties,
                           "--producer-property", defaults)
    ck = confluent_kafka()
    failures: list[str] = []

    def delivered(error: object, message: object) -> None:
        if error is not None:
            failures.append(f"Error when sending message to topic {topic}: {error_text(ck.KafkaException(error))}")

    try:
        producer = ck.Producer(config)
    except ck.KafkaException as e:
        fail(f"invalid producer configuration: {error_text(e)}")
    refused: str | None = None
    try:
        for number, raw in enumerate(sys.stdin.buffer, start=1):
            try:
                key, value = reader.record(line_text(raw), number)
            except ConsoleError as e:
                refused = str(e)
                break
            while True:
                try:
                    producer.produce(topic, value=value, key=key, on_delivery=delivered)
                    producer.poll(0)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
            if sync:
                producer.flush(_FLUSH_TIMEOUT_S)
    finally:
        left = producer.flush(_FLUSH_TIMEOUT_S)
    for failure in failures:
        click.echo(failure, err=True)
    if refused is not None:
        fail(refused)
    if left:
        fail(f"{left} records were not acknowledged within {_FLUSH_TIMEOUT_S:.0f} s")
    if failures:
        sys.exit(1)
