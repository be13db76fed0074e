"""``odradek topics``: kafka-topics.sh's flags, output and semantics."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence

import click

from odradek.assignment import AdminOperationError, parse_replica_assignment
from odradek.common import has_collision_chars, validate_topic_name
from odradek.protocol.errors import KafkaError
from odradek.zk.admin_zk_client import (
    AdminZkClient,
    PartitionDescription,
    RackAwareMode,
    TopicDescription,
)

__all__ = ["format_describe", "topics"]


def _fail(message: str) -> None:
    click.echo(f"Error while executing topic command : {message}", err=True)
    sys.exit(1)


def _parse_configs(items: Sequence[str]) -> dict[str, str]:
    configs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            _fail(f"Invalid topic config: all configs to be added must be in the format \"key=val\", got {item!r}")
        configs[key.strip()] = value.strip()
    return configs


def format_topic_line(d: TopicDescription) -> str:
    configs = ",".join(f"{k}={v}" for k, v in sorted(d.config.items()))
    return (f"Topic:{d.name}\tPartitionCount:{len(d.partitions)}\t"
            f"ReplicationFactor:{d.replication_factor}\tConfigs:{configs}")


def format_partition_line(topic: str, p: PartitionDescription) -> str:
    leader = "none" if p.leader is None else str(p.leader)
    return (f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {leader}\t"
            f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")


def format_describe(descriptions: Sequence[TopicDescription], live_brokers: set[int], *,
                    under_replicated: bool = False, unavailable: bool = False,
                    with_overrides: bool = False) -> list[str]:
    """Kafka's describe output, including its report filters."""
    lines = []
    for d in descriptions:
        describe_configs = not unavailable and not under_replicated
        describe_partitions = not with_overrides
        if describe_configs and (not with_overrides or d.config):
            lines.append(format_topic_line(d))
        if describe_partitions:
            for p in d.partitions:
                show = (not under_replicated and not unavailable) \
                    or (under_replicated and p.under_replicated()) \
                    or (unavailable and (p.leader is None or p.leader not in live_brokers))
                if show:
                    lines.append(format_partition_line(d.name, p))
    return lines


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--zookeeper", "zookeeper", default=None, metavar="HOST:PORT[/CHROOT]",
              help="ZooKeeper connection string.")
@click.option("--bootstrap-server", default=None, metavar="HOST:PORT",
              help="A broker to connect to (instead of --zookeeper).")
@click.option("--create", "create", is_flag=True, help="Create a new topic.")
@click.option("--list", "list_", is_flag=True, help="List all available topics.")
@click.option("--describe", is_flag=True, help="List details for the given topics.")
@click.option("--alter", is_flag=True, help="Alter the number of partitions or the configs of a topic.")
@click.option("--delete", is_flag=True, help="Delete a topic.")
@click.option("--topic", default=None, help="The topic to create, alter, describe or delete.")
@click.option("--partitions", type=int, default=None, help="Number of partitions (create or alter).")
@click.option("--replication-factor", type=int, default=None, help="Replication factor (create).")
@click.option("--replica-assignment", default=None, metavar="B:B:B,B:B:B",
              help="Manual assignment: partitions separated by ',', replicas by ':' (leader first).")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config override.")
@click.option("--delete-config", "delete_configs", multiple=True, metavar="KEY", help="Remove a topic config override.")
@click.option("--if-not-exists", is_flag=True, help="With --create: do nothing if the topic exists.")
@click.option("--if-exists", is_flag=True, help="With --alter/--delete/--describe: do nothing if the topic is missing.")
@click.option("--disable-rack-aware", is_flag=True, help="Ignore racks when placing replicas.")
@click.option("--under-replicated-partitions", is_flag=True, help="Describe: only partitions with ISR < replicas.")
@click.option("--unavailable-partitions", is_flag=True, help="Describe: only partitions whose leader is unavailable.")
@click.option("--topics-with-overrides", is_flag=True, help="Describe: only topics with config overrides.")
@click.option("--exclude-internal", is_flag=True, help="List/describe: leave out internal topics.")
def topics(zookeeper: str | None, bootstrap_server: str | None, create: bool, list_: bool, describe: bool,
           alter: bool, delete: bool, topic: str | None, partitions: int | None, replication_factor: int | None,
           replica_assignment: str | None, configs: tuple[str, ...], delete_configs: tuple[str, ...],
           if_not_exists: bool, if_exists: bool, disable_rack_aware: bool, under_replicated_partitions: bool,
           unavailable_partitions: bool, topics_with_overrides: bool, exclude_internal: bool) -> None:
    """Create, list, describe, alter and delete topics (kafka-topics.sh)."""
    actions = [name for name, on in (("--create", create), ("--list", list_), ("--describe", describe),
                                     ("--alter", alter), ("--delete", delete)) if on]
    if len(actions) != 1:
        _fail("Command must include exactly one action: --list, --describe, --create, --alter or --delete")
    if (zookeeper is None) == (bootstrap_server is None):
        _fail("Exactly one of --zookeeper or --bootstrap-server is required")
    if (create or alter or delete) and not topic:
        _fail(f"Missing required argument \"[topic]\" for {actions[0]}")
    if create and replica_assignment is None and (partitions is None or replication_factor is None):
        _fail("Missing required argument: --partitions and --replication-factor (or --replica-assignment)")
    if create and replica_assignment is not None and (partitions is not None or replication_factor is not None):
        _fail("Option --replica-assignment can't be used with --partitions or --replication-factor")
    if alter and partitions is None and not configs and not delete_configs:
        _fail("--alter needs --partitions, --config or --delete-config")
    config_map = _parse_configs(configs)
    if bootstrap_server is not None:
        from odradek.admin.broker_backend import run_with_broker

        code = run_with_broker(bootstrap_server, locals())
        sys.exit(code)
    code = asyncio.run(_run_zk(zookeeper, locals(), config_map))  # type: ignore[arg-type]
    sys.exit(code)


async def _run_zk(connect: str, opts: dict, config_map: dict[str, str]) -> int:
    from odradek.zk.client import KafkaZkClient, ZkConnectionError

    # kazoo reports every failed connection attempt; the command reports the outcome once.
    logging.getLogger("kazoo").addHandler(logging.NullHandler())
    logging.getLogger("kazoo").propagate = False
    zk = KafkaZkClient(connect, session_timeout_ms=30000, connection_timeout_ms=10000)
    try:
        await zk.start()
    except ZkConnectionError as e:
        click.echo(f"Error while executing topic command : {e}", err=True)
        return 1
    try:
        return await _execute(AdminZkClient(zk), opts, config_map)
    except (KafkaError, AdminOperationError) as e:
        click.echo(f"Error while executing topic command : {e}", err=True)
        return 1
    finally:
        await zk.close()


async def _execute(admin: AdminZkClient, o: dict, config_map: dict[str, str]) -> int:
    topic = o["topic"]
    mode = RackAwareMode.DISABLED if o["disable_rack_aware"] else RackAwareMode.ENFORCED
    if o["create"]:
        validate_topic_name(topic)
        if has_collision_chars(topic):
            click.echo("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore "
                       "('_') could collide. To avoid issues it is best to use either, but not both.")
        assignment = parse_replica_assignment(o["replica_assignment"]) if o["replica_assignment"] else None
        existing, _ = await admin.list_topics()
        if topic in existing and o["if_not_exists"]:
            return 0
        await admin.create_topic(topic, o["partitions"], o["replication_factor"], assignment=assignment,
                                 config=config_map, rack_aware_mode=mode)
        click.echo(f'Created topic "{topic}".')
        return 0
    if o["list_"]:
        names, marked = await admin.list_topics()
        for name in names:
            if o["exclude_internal"] and name.startswith("__"):
                continue
            click.echo(f"{name} - marked for deletion" if name in marked else name)
        return 0
    if o["describe"]:
        names, _ = await admin.list_topics()
        wanted = [t for t in names if topic is None or t == topic]
        if o["exclude_internal"]:
            wanted = [t for t in wanted if not t.startswith("__")]
        if topic is not None and not wanted:
            if o["if_exists"]:
                return 0
            click.echo(f"Error while executing topic command : Topic '{topic}' does not exist as expected", err=True)
            return 1
        descriptions = await admin.describe_topics(wanted)
        live = await admin.live_broker_ids()
        for line in format_describe(descriptions, live, under_replicated=o["under_replicated_partitions"],
                                    unavailable=o["unavailable_partitions"],
                                    with_overrides=o["topics_with_overrides"]):
            click.echo(line)
        return 0
    names, _ = await admin.list_topics()
    if topic not in names:
        if o["if_exists"]:
            return 0
        click.echo(f"Error while executing topic command : Topic '{topic}' does not exist as expected", err=True)
        return 1
    if o["alter"]:
        if config_map or o["delete_configs"]:
            current = (await admin.describe_topics([topic]))[0].config
            merged = {k: v for k, v in {**current, **config_map}.items() if k not in o["delete_configs"]}
            await admin.alter_topic_config(topic, merged)
            click.echo(f"Updated config for topic {topic}.")
        if o["partitions"] is not None:
            new_assignment = None
            if o["replica_assignment"]:
                full = parse_replica_assignment(o["replica_assignment"])
                current_count = len((await admin.describe_topics([topic]))[0].partitions)
                new_assignment = {p: r for p, r in full.items() if p >= current_count}
            click.echo("WARNING: If partitions are increased for a topic that has a key, the partition logic or "
                       "ordering of the messages will be affected")
            await admin.add_partitions(topic, o["partitions"], new_assignment, rack_aware_mode=mode)
            click.echo("Adding partitions succeeded!")
        return 0
    if o["delete"]:
        if await admin.delete_topic(topic):
            click.echo(f"Topic {topic} is marked for deletion.")
            click.echo("Note: This will have no impact if delete.topic.enable is not set to true.")
        else:
            click.echo(f"Topic {topic} is already marked for deletion.")
        return 0
    return 1
