"""``odradek console-consumer``: kafka-console-consumer.sh (Kafka 2.8's ConsoleConsumer).

Subscribes to ``--topic`` in ``--group`` (without one, in a group of its own,
``console-consumer-<n>``, committing nothing), or with ``--partition`` reads that partition
alone from ``--offset``; starts at the latest offset unless ``--from-beginning`` (for a group,
where it has no committed offset).  Writes each record as odradek.admin.console's
MessageFormatter does, until ``--max-messages``, ``--timeout-ms`` without a record, the end
of standard output or Ctrl-C, then "Processed a total of N messages" on stderr, as Kafka's.
"""

from __future__ import annotations

import random
import sys
import time

import click

from odradek.admin.console import ConsoleError, MessageFormatter, parse_key_values
from odradek.cli.common import BOOTSTRAP_METAVAR, OneLineCommand, StopSignals, fail
from odradek.cli.console_client import client_config, confluent_kafka, error_text

__all__ = ["console_consumer"]

_POLL_S = 0.2
_ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


def _start_offset(ck: object, offset: str, from_beginning: bool) -> int:
    """``--offset`` (earliest, latest or a number) as the offset to assign()."""
    if from_beginning:
        return ck.OFFSET_BEGINNING  # type: ignore[attr-defined, no-any-return]
    if offset == "earliest":
        return ck.OFFSET_BEGINNING  # type: ignore[attr-defined, no-any-return]
    if offset == "latest":
        return ck.OFFSET_END  # type: ignore[attr-defined, no-any-return]
    try:
        value = int(offset)
    except ValueError:
        fail(f"The offset must be 'earliest', 'latest' or a non-negative number, got {offset!r}")
    if value < 0:
        fail(f"The offset must be 'earliest', 'latest' or a non-negative number, got {offset!r}")
    return value


@click.command("console-consumer", cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", "bootstrap_server", default=None, metavar=BOOTSTRAP_METAVAR,
              help="REQUIRED: The server(s) to connect to.")
@click.option("--topic", default=None, metavar="TOPIC", help="The topic id to consume on.")
@click.option("--partition", type=int, default=None, metavar="PARTITION",
              help="The partition to consume from. Consumption starts from the end of the partition unless "
                   "'--offset' is specified.")
@click.option("--offset", default="latest", show_default=True, metavar="OFFSET",
              help="The offset id to consume from (a non-negative number), or 'earliest' which means from "
                   "beginning, or 'latest' which means from end")
@click.option("--from-beginning", is_flag=True,
              help="If the consumer does not already have an established offset to consume from, start with the "
                   "earliest message present in the log rather than the latest message.")
@click.option("--group", default=None, metavar="GROUP", help="The consumer group id of the consumer.")
@click.option("--max-messages", type=int, default=None, metavar="N",
              help="The maximum number of messages to consume before exiting. If not set, consumption is continual.")
@click.option("--timeout-ms", type=int, default=None, metavar="MS",
              help="If specified, exit if no message is available for consumption for the specified interval.")
@click.option("--isolation-level", default="read_uncommitted", show_default=True, metavar="LEVEL",
              help="Set to read_committed in order to filter out transactional messages which are not committed. "
                   "Set to read_uncommitted to read all messages.")
@click.option("--property", "properties", multiple=True, metavar="PROP",
              help="The properties to initialize the message formatter: print.timestamp, print.key, print.offset, "
                   "print.partition, print.headers, print.value, key.separator, line.separator, "
                   "headers.separator, null.literal.")
@click.option("--consumer-property", "consumer_properties", multiple=True, metavar="PROP",
              help="A mechanism to pass user-defined properties in the form key=value to the consumer.")
@click.option("--consumer.config", "consumer_config", default=None, metavar="FILE",
              help="Consumer config properties file. Note that --consumer-property takes precedence over this config.")
def console_consumer(bootstrap_server: str | None, topic: str | None, partition: int | None, offset: str,
                     from_beginning: bool, group: str | None, max_messages: int | None, timeout_ms: int | None,
                     isolation_level: str, properties: tuple[str, ...], consumer_properties: tuple[str, ...],
                     consumer_config: str | None) -> None:
    """Read records from a topic and write them to standard output (kafka-console-consumer.sh)."""
    if topic is None:
        fail("Exactly one of whitelist/topic is required.")
    if partition is not None and group is not None:
        fail("Options group and partition cannot be specified together.")
    if from_beginning and offset != "latest":
        fail("Options from-beginning and offset cannot be specified together.")
    if offset != "latest" and partition is None:
        fail("The partition is required when offset is specified.")
    if isolation_level not in _ISOLATION_LEVELS:
        fail(f"--isolation-level must be read_committed or read_uncommitted, got {isolation_level!r}")
    try:
        formatter = MessageFormatter.from_properties(parse_key_values(properties, "--property"))
    except ConsoleError as e:
        fail(str(e))
    # librdkafka reads committed records only by default; Kafka's consumer reads all.
    defaults = {"isolation.level": isolation_level,
                "auto.offset.reset": "earliest" if from_beginning else "latest"}
    config = client_config(bootstrap_server, consumer_config, consumer_properties, "--consumer-property", defaults)
    if group is not None:
        config["group.id"] = group
    elif "group.id" not in config:
        # Kafka's: a throwaway group, whose offsets are not worth committing.
        config["group.id"] = f"console-consumer-{random.randrange(100_000)}"
        config.setdefault("enable.auto.commit", "false")
    ck = confluent_kafka()
    try:
        consumer = ck.Consumer(config)
    except ck.KafkaException as e:
        fail(f"invalid consumer configuration: {error_text(e)}")
    if partition is not None:
        consumer.assign([ck.TopicPartition(topic, partition, _start_offset(ck, offset, from_beginning))])
    else:
        consumer.subscribe([topic])
    stop = StopSignals()
    out = sys.stdout.buffer
    count = 0
    last = time.monotonic()
    try:
        while not stop.requested and (max_messages is None or count < max_messages):
            message = consumer.poll(_POLL_S)
            if message is None:
                if timeout_ms is not None and (time.monotonic() - last) * 1000 >= timeout_ms:
                    click.echo("ERROR Error processing message, terminating consumer process: "
                               "org.apache.kafka.common.errors.TimeoutException", err=True)
                    break
                continue
            if message.error() is not None:
                if message.error().code() == ck.KafkaError._PARTITION_EOF:
                    continue
                click.echo(f"ERROR Error processing message, terminating consumer process: "
                           f"{message.error().str()}", err=True)
                break
            last = time.monotonic()
            timestamp_type, timestamp = message.timestamp()
            out.write(formatter.format(timestamp_type=timestamp_type, timestamp=timestamp,
                                       partition=message.partition(), offset=message.offset(),
                                       headers=message.headers() or (), key=message.key(), value=message.value()))
            out.flush()
            count += 1
    except BrokenPipeError:
        pass  # the reader went away (| head): stop as Kafka's does on a closed stdout
    finally:
        consumer.close()
        click.echo(f"Processed a total of {count} messages", err=True)
