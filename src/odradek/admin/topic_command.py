"""The topics command's actions (Kafka's kafka.admin.TopicCommand), written once.

Each action (create, list, describe, alter, delete) runs over a ``TopicService``: the small
set of operations a backend must offer.  Kafka 2.8 has two services, ``ZookeeperTopicService``
(``--zookeeper``, odradek.admin.topics) and ``AdminClientTopicService`` (``--bootstrap-server``,
odradek.admin.client); here they differ only in how they carry out those operations, so the
flags' semantics, the output and the error wording are the same over both.

Actions write their output lines through a callable they are given and report failures by
raising (``TopicCommandError``, a ``KafkaError`` or an ``AdminOperationError``); the command
line turns those into kafka-topics.sh's one-line error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from odradek.assignment import parse_replica_assignment
from odradek.common import has_collision_chars, validate_topic_name
from odradek.protocol.errors import TopicAlreadyExistsError
from odradek.zk.admin_zk_client import PartitionDescription, RackAwareMode, TopicDescription

__all__ = [
    "TopicAction",
    "TopicCommandError",
    "TopicCommandOptions",
    "TopicDeletion",
    "TopicListing",
    "TopicService",
    "format_describe",
    "run_topic_command",
]

Output = Callable[[str], None]

WARNING_COLLISION = ("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore "
                     "('_') could collide. To avoid issues it is best to use either, but not both.")
WARNING_PARTITIONS = ("WARNING: If partitions are increased for a topic that has a key, the partition logic or "
                      "ordering of the messages will be affected")
DELETION_NOTE = "Note: This will have no impact if delete.topic.enable is not set to true."


class TopicCommandError(Exception):
    """Bad input or a refused action, reported as one line (Kafka's AdminCommandFailedException)."""


class TopicAction(Enum):
    """The command's actions; the value is the flag that selects it."""

    CREATE = "--create"
    LIST = "--list"
    DESCRIBE = "--describe"
    ALTER = "--alter"
    DELETE = "--delete"


@dataclass(frozen=True, slots=True)
class TopicCommandOptions:
    """What kafka-topics.sh was asked to do (Kafka's TopicCommandOptions).

    ``configs`` are the raw ``--config key=value`` items, parsed by ``config_map``.
    """

    action: TopicAction
    topic: str | None = None
    partitions: int | None = None
    replication_factor: int | None = None
    replica_assignment: str | None = None
    configs: tuple[str, ...] = ()
    delete_configs: tuple[str, ...] = ()
    if_not_exists: bool = False
    if_exists: bool = False
    disable_rack_aware: bool = False
    under_replicated_partitions: bool = False
    unavailable_partitions: bool = False
    topics_with_overrides: bool = False
    exclude_internal: bool = False

    def check(self) -> None:
        """Refuse option combinations that make no sense (Kafka's TopicCommandOptions.checkArgs);
        raises TopicCommandError naming the first problem."""
        a = self.action
        if a in (TopicAction.CREATE, TopicAction.ALTER, TopicAction.DELETE) and not self.topic:
            raise TopicCommandError(f"Missing required argument \"[topic]\" for {a.value}")
        explicit = self.replica_assignment is not None
        sized = self.partitions is not None or self.replication_factor is not None
        if a is TopicAction.CREATE and not explicit and (self.partitions is None or self.replication_factor is None):
            raise TopicCommandError(
                "Missing required argument: --partitions and --replication-factor (or --replica-assignment)")
        if a is TopicAction.CREATE and explicit and sized:
            raise TopicCommandError("Option --replica-assignment can't be used with --partitions or "
                                    "--replication-factor")
        if a is TopicAction.ALTER and self.partitions is None and not self.configs and not self.delete_configs:
            raise TopicCommandError("--alter needs --partitions, --config or --delete-config")
        self.config_map()

    def config_map(self) -> dict[str, str]:
        """The ``--config`` items as a dict (Kafka's parseTopicConfigsToBeAdded)."""
        configs = {}
        for item in self.configs:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise TopicCommandError("Invalid topic config: all configs to be added must be in the format "
                                        f"\"key=val\", got {item!r}")
            configs[key.strip()] = value.strip()
        return configs

    @property
    def rack_aware_mode(self) -> RackAwareMode:
        return RackAwareMode.DISABLED if self.disable_rack_aware else RackAwareMode.ENFORCED


@dataclass(frozen=True, slots=True)
class TopicListing:
    """Every topic (sorted) and those known to be marked for deletion."""

    names: tuple[str, ...]
    marked_for_deletion: frozenset[str] = frozenset()


class TopicDeletion(Enum):
    """How a delete went."""

    MARKED = "marked"  # a deletion marker was written; the controller acts only if deletion is enabled
    ALREADY_MARKED = "already marked"
    REQUESTED = "requested"  # DeleteTopics accepted: the controller refuses it when deletion is disabled


class TopicService(Protocol):
    """The operations the actions need from a backend (Kafka's TopicCommand.TopicService, cut
    down to the primitives the two backends really differ in).  Failures raise KafkaError or
    AdminOperationError with Kafka's wording."""

    async def list_topics(self) -> TopicListing: ...

    async def describe_topics(self, names: Sequence[str]) -> list[TopicDescription]:
        """The named topics, in order; topics that vanished meanwhile are left out."""
        ...

    async def live_broker_ids(self) -> set[int]: ...

    async def create_topic(self, topic: str, partitions: int | None, replication_factor: int | None,
                           assignment: Mapping[int, Sequence[int]] | None, config: Mapping[str, str],
                           rack_aware_mode: RackAwareMode) -> None: ...

    async def alter_topic_config(self, topic: str, to_set: Mapping[str, str], to_delete: Sequence[str]) -> None:
        """Set and remove config overrides of a topic; overrides not named stay."""
        ...

    async def create_partitions(self, topic: str, count: int, assignment: Mapping[int, Sequence[int]] | None,
                                rack_aware_mode: RackAwareMode) -> None:
        """Grow a topic to ``count`` partitions; ``assignment`` places the new ones only."""
        ...

    async def delete_topic(self, topic: str) -> TopicDeletion: ...


# ----------------------------------------------------------------------------- output


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


# ----------------------------------------------------------------------------- actions


def _missing(topic: str) -> TopicCommandError:
    return TopicCommandError(f"Topic '{topic}' does not exist as expected")


def _is_internal(name: str) -> bool:
    return name.startswith("__")


async def create_topic(service: TopicService, opts: TopicCommandOptions, out: Output) -> None:
    """``--create``: validate the name, warn about colliding characters, then create."""
    topic = opts.topic
    assert topic is not None  # TopicCommandOptions.check
    validate_topic_name(topic)
    if has_collision_chars(topic):
        out(WARNING_COLLISION)
    assignment = parse_replica_assignment(opts.replica_assignment) if opts.replica_assignment else None
    if opts.if_not_exists and topic in (await service.list_topics()).names:
        return
    try:
        await service.create_topic(topic, opts.partitions, opts.replication_factor, assignment,
                                   opts.config_map(), opts.rack_aware_mode)
    except TopicAlreadyExistsError:
        if opts.if_not_exists:  # created by someone else since the check above
            return
        raise
    out(f'Created topic "{topic}".')


async def list_topics(service: TopicService, opts: TopicCommandOptions, out: Output) -> None:
    """``--list``: one topic a line, sorted, marking those pending deletion where known."""
    listing = await service.list_topics()
    for name in listing.names:
        if opts.exclude_internal and _is_internal(name):
            continue
        out(f"{name} - marked for deletion" if name in listing.marked_for_deletion else name)


async def describe_topics(service: TopicService, opts: TopicCommandOptions, out: Output) -> None:
    """``--describe``: Kafka's topic and partition lines, with its report filters."""
    names = (await service.list_topics()).names
    wanted = [t for t in names if opts.topic is None or t == opts.topic]
    if opts.exclude_internal:
        wanted = [t for t in wanted if not _is_internal(t)]
    if opts.topic is not None and not wanted:
        if opts.if_exists:
            return
        raise _missing(opts.topic)
    descriptions = await service.describe_topics(wanted)
    live = await service.live_broker_ids()
    for line in format_describe(descriptions, live, under_replicated=opts.under_replicated_partitions,
                                unavailable=opts.unavailable_partitions, with_overrides=opts.topics_with_overrides):
        out(line)


async def alter_topic(service: TopicService, opts: TopicCommandOptions, out: Output) -> None:
    """``--alter``: config overrides first, then the partition count."""
    topic = opts.topic
    assert topic is not None  # TopicCommandOptions.check
    config = opts.config_map()
    if config or opts.delete_configs:
        await service.alter_topic_config(topic, config, opts.delete_configs)
        out(f"Updated config for topic {topic}.")
    if opts.partitions is not None:
        new_assignment = None
        if opts.replica_assignment:
            # As Kafka: the assignment lists every partition; the existing ones are skipped.
            full = parse_replica_assignment(opts.replica_assignment)
            described = await service.describe_topics([topic])
            if not described:
                raise _missing(topic)
            current_count = len(described[0].partitions)
            new_assignment = {p: r for p, r in full.items() if p >= current_count}
        out(WARNING_PARTITIONS)
        await service.create_partitions(topic, opts.partitions, new_assignment, opts.rack_aware_mode)
        out("Adding partitions succeeded!")


async def delete_topic(service: TopicService, opts: TopicCommandOptions, out: Output) -> None:
    """``--delete``: mark the topic for deletion (the controller deletes it)."""
    topic = opts.topic
    assert topic is not None  # TopicCommandOptions.check
    outcome = await service.delete_topic(topic)
    if outcome is TopicDeletion.ALREADY_MARKED:
        out(f"Topic {topic} is already marked for deletion.")
        return
    out(f"Topic {topic} is marked for deletion.")
    if outcome is TopicDeletion.MARKED:
        out(DELETION_NOTE)


_ACTIONS = {
    TopicAction.CREATE: create_topic,
    TopicAction.LIST: list_topics,
    TopicAction.DESCRIBE: describe_topics,
    TopicAction.ALTER: alter_topic,
    TopicAction.DELETE: delete_topic,
}


async def run_topic_command(service: TopicService, opts: TopicCommandOptions, out: Output) -> None:
    """Carry out ``opts.action`` over ``service``; ``--alter`` and ``--delete`` of a missing
    topic fail unless ``--if-exists``."""
    if opts.action in (TopicAction.ALTER, TopicAction.DELETE) and opts.topic not in (await service.list_topics()).names:
        if opts.if_exists:
            return
        raise _missing(opts.topic or "")
    await _ACTIONS[opts.action](service, opts, out)
