"""The topics command's shared actions (admin/topic_command.py, Kafka's TopicCommand) over an
in-memory TopicService: what each action prints, which operations it asks for, and that bad
input fails before anything is written."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from odradek.admin.topic_command import (
    TopicAction,
    TopicCommandError,
    TopicCommandOptions,
    TopicDeletion,
    TopicListing,
    run_topic_command,
)
from odradek.protocol.errors import (
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from odradek.zk.admin_zk_client import PartitionDescription, RackAwareMode, TopicDescription


class FakeTopicService:
    """Topics kept in memory.  Every write is recorded in ``writes``; reads are not."""

    def __init__(self, brokers: Sequence[int] = (0, 1, 2), *, deletion: TopicDeletion = TopicDeletion.MARKED) -> None:
        self.brokers = set(brokers)
        self.assignments: dict[str, dict[int, list[int]]] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.leaders: dict[tuple[str, int], int | None] = {}
        self.isrs: dict[tuple[str, int], list[int]] = {}
        self.marked: set[str] = set()
        self.deletion = deletion
        self.writes: list[tuple[object, ...]] = []
        self.create_raises: Exception | None = None

    def add(self, topic: str, assignment: Mapping[int, list[int]], config: Mapping[str, str] | None = None) -> None:
        self.assignments[topic] = dict(assignment)
        self.configs[topic] = dict(config or {})
        for p, replicas in assignment.items():
            self.leaders[(topic, p)] = replicas[0]
            self.isrs[(topic, p)] = list(replicas)

    async def list_topics(self) -> TopicListing:
        return TopicListing(tuple(sorted(self.assignments)), frozenset(self.marked))

    async def describe_topics(self, names: Sequence[str]) -> list[TopicDescription]:
        return [TopicDescription(
            name, None,
            tuple(PartitionDescription(p, tuple(r), self.leaders[(name, p)], tuple(self.isrs[(name, p)]))
                  for p, r in sorted(self.assignments[name].items())),
            self.configs[name]) for name in names if name in self.assignments]

    async def live_broker_ids(self) -> set[int]:
        return set(self.brokers)

    async def create_topic(self, topic: str, partitions: int | None, replication_factor: int | None,
                           assignment: Mapping[int, Sequence[int]] | None, config: Mapping[str, str],
                           rack_aware_mode: RackAwareMode) -> None:
        if self.create_raises is not None:
            raise self.create_raises
        if topic in self.assignments:
            raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
        self.writes.append(("create", topic, partitions, replication_factor,
                            None if assignment is None else {p: list(r) for p, r in assignment.items()},
                            dict(config), rack_aware_mode))
        placed = assignment or {p: [sorted(self.brokers)[p % len(self.brokers)]] for p in range(partitions or 0)}
        self.add(topic, {p: list(r) for p, r in placed.items()}, config)

    async def alter_topic_config(self, topic: str, to_set: Mapping[str, str], to_delete: Sequence[str]) -> None:
        self.writes.append(("alter_config", topic, dict(to_set), tuple(to_delete)))

    async def create_partitions(self, topic: str, count: int, assignment: Mapping[int, Sequence[int]] | None,
                                rack_aware_mode: RackAwareMode) -> None:
        self.writes.append(("create_partitions", topic, count,
                            None if assignment is None else {p: list(r) for p, r in assignment.items()},
                            rack_aware_mode))

    async def delete_topic(self, topic: str) -> TopicDeletion:
        if topic not in self.assignments:
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
        self.writes.append(("delete", topic))
        return self.deletion


def run(service: FakeTopicService, action: TopicAction, **options: object) -> list[str]:
    """Run one action; the lines it printed."""
    lines: list[str] = []
    opts = TopicCommandOptions(action, **options)  # type: ignore[arg-type]
    opts.check()
    asyncio.run(run_topic_command(service, opts, lines.append))
    return lines


def service_with_topics() -> FakeTopicService:
    service = FakeTopicService()
    service.add("orders", {0: [1, 2, 0], 1: [2, 0, 1]}, {"retention.ms": "1000"})
    service.add("__consumer_offsets", {0: [0]})
    service.add("clicks", {0: [0, 1]})
    return service


# ----------------------------------------------------------------------------- create


def test_create_prints_the_created_topic_and_passes_sizes_and_configs() -> None:
    service = FakeTopicService()
    lines = run(service, TopicAction.CREATE, topic="orders", partitions=3, replication_factor=2,
                configs=("retention.ms = 1000",))
    assert lines == ['Created topic "orders".']
    assert service.writes == [("create", "orders", 3, 2, None, {"retention.ms": "1000"}, RackAwareMode.ENFORCED)]


def test_create_with_an_explicit_assignment_and_racks_ignored() -> None:
    service = FakeTopicService()
    run(service, TopicAction.CREATE, topic="t", replica_assignment="1:2:0,2:0:1,0:1:2", disable_rack_aware=True)
    assert service.writes == [("create", "t", None, None, {0: [1, 2, 0], 1: [2, 0, 1], 2: [0, 1, 2]}, {},
                               RackAwareMode.DISABLED)]


def test_create_warns_about_colliding_characters_before_creating() -> None:
    service = FakeTopicService()
    assert run(service, TopicAction.CREATE, topic="a.b", partitions=1, replication_factor=1) == [
        "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could "
        "collide. To avoid issues it is best to use either, but not both.",
        'Created topic "a.b".',
    ]


def test_create_of_an_invalid_name_asks_the_service_nothing() -> None:
    service = FakeTopicService()
    with pytest.raises(InvalidTopicError, match="contains a character other than ASCII alphanumerics"):
        run(service, TopicAction.CREATE, topic="bad name", partitions=1, replication_factor=1)
    assert service.writes == []


def test_create_of_an_existing_topic_fails_unless_if_not_exists() -> None:
    service = service_with_topics()
    with pytest.raises(TopicAlreadyExistsError, match=r"^Topic 'orders' already exists\.$"):
        run(service, TopicAction.CREATE, topic="orders", partitions=1, replication_factor=1)
    assert run(service, TopicAction.CREATE, topic="orders", partitions=1, replication_factor=1,
               if_not_exists=True) == []
    assert service.writes == []


def test_if_not_exists_also_covers_a_topic_created_meanwhile() -> None:
    service = FakeTopicService()
    service.create_raises = TopicAlreadyExistsError("Topic 'late' already exists.")
    assert run(service, TopicAction.CREATE, topic="late", partitions=1, replication_factor=1,
               if_not_exists=True) == []
    with pytest.raises(TopicAlreadyExistsError):
        run(service, TopicAction.CREATE, topic="late", partitions=1, replication_factor=1)


# ----------------------------------------------------------------------------- list and describe


def test_list_is_sorted_marks_pending_deletions_and_can_leave_out_internal_topics() -> None:
    service = service_with_topics()
    service.marked.add("clicks")
    assert run(service, TopicAction.LIST) == ["__consumer_offsets", "clicks - marked for deletion", "orders"]
    assert run(service, TopicAction.LIST, exclude_internal=True) == ["clicks - marked for deletion", "orders"]


def test_describe_prints_kafkas_topic_and_partition_lines() -> None:
    assert run(service_with_topics(), TopicAction.DESCRIBE, topic="orders") == [
        "Topic:orders\tPartitionCount:2\tReplicationFactor:3\tConfigs:retention.ms=1000",
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,0\tIsr: 1,2,0",
        "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,0,1\tIsr: 2,0,1",
    ]


def test_describe_all_in_name_order_without_internal_topics() -> None:
    lines = run(service_with_topics(), TopicAction.DESCRIBE, exclude_internal=True)
    assert [line.split("\t")[0] for line in lines if line.startswith("Topic:")] == ["Topic:clicks", "Topic:orders"]


def test_describe_report_filters() -> None:
    service = service_with_topics()
    service.isrs[("orders", 1)] = [2]
    service.leaders[("clicks", 0)] = None
    service.brokers.discard(1)
    service.leaders[("orders", 0)] = 1  # on a broker that is no longer live
    assert run(service, TopicAction.DESCRIBE, under_replicated_partitions=True) == [
        "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,0,1\tIsr: 2",
    ]
    assert run(service, TopicAction.DESCRIBE, unavailable_partitions=True) == [
        "\tTopic: clicks\tPartition: 0\tLeader: none\tReplicas: 0,1\tIsr: 0,1",
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,0\tIsr: 1,2,0",
    ]
    assert run(service, TopicAction.DESCRIBE, topics_with_overrides=True) == [
        "Topic:orders\tPartitionCount:2\tReplicationFactor:3\tConfigs:retention.ms=1000",
    ]


def test_describe_of_a_missing_topic() -> None:
    with pytest.raises(TopicCommandError, match=r"^Topic 'nope' does not exist as expected$"):
        run(service_with_topics(), TopicAction.DESCRIBE, topic="nope")
    assert run(service_with_topics(), TopicAction.DESCRIBE, topic="nope", if_exists=True) == []


# ----------------------------------------------------------------------------- alter and delete


def test_alter_sets_configs_before_adding_partitions() -> None:
    service = service_with_topics()
    lines = run(service, TopicAction.ALTER, topic="orders", partitions=4, configs=("segment.ms=60000",),
                delete_configs=("retention.ms",))
    assert lines == [
        "Updated config for topic orders.",
        "WARNING: If partitions are increased for a topic that has a key, the partition logic or ordering of "
        "the messages will be affected",
        "Adding partitions succeeded!",
    ]
    assert service.writes == [
        ("alter_config", "orders", {"segment.ms": "60000"}, ("retention.ms",)),
        ("create_partitions", "orders", 4, None, RackAwareMode.ENFORCED),
    ]


def test_alter_with_an_assignment_passes_only_the_new_partitions() -> None:
    service = service_with_topics()
    run(service, TopicAction.ALTER, topic="orders", partitions=4, replica_assignment="1:2:0,2:0:1,0:1:2,1:0:2",
        disable_rack_aware=True)
    assert service.writes == [("create_partitions", "orders", 4, {2: [0, 1, 2], 3: [1, 0, 2]},
                               RackAwareMode.DISABLED)]


@pytest.mark.parametrize("action", [TopicAction.ALTER, TopicAction.DELETE])
def test_alter_and_delete_of_a_missing_topic(action: TopicAction) -> None:
    service = service_with_topics()
    extra = {"partitions": 5} if action is TopicAction.ALTER else {}
    with pytest.raises(TopicCommandError, match=r"^Topic 'nope' does not exist as expected$"):
        run(service, action, topic="nope", **extra)
    assert run(service, action, topic="nope", if_exists=True, **extra) == []
    assert service.writes == []


@pytest.mark.parametrize(("deletion", "lines"), [
    (TopicDeletion.MARKED, ["Topic orders is marked for deletion.",
                            "Note: This will have no impact if delete.topic.enable is not set to true."]),
    (TopicDeletion.REQUESTED, ["Topic orders is marked for deletion."]),
    (TopicDeletion.ALREADY_MARKED, ["Topic orders is already marked for deletion."]),
])
def test_delete_says_what_happened(deletion: TopicDeletion, lines: list[str]) -> None:
    service = service_with_topics()
    service.deletion = deletion
    assert run(service, TopicAction.DELETE, topic="orders") == lines
    assert service.writes == [("delete", "orders")]


# ----------------------------------------------------------------------------- options


@pytest.mark.parametrize(("options", "message"), [
    (TopicCommandOptions(TopicAction.CREATE, partitions=1, replication_factor=1),
     'Missing required argument "[topic]" for --create'),
    (TopicCommandOptions(TopicAction.DELETE), 'Missing required argument "[topic]" for --delete'),
    (TopicCommandOptions(TopicAction.CREATE, topic="t", partitions=1),
     "Missing required argument: --partitions and --replication-factor (or --replica-assignment)"),
    (TopicCommandOptions(TopicAction.CREATE, topic="t", replica_assignment="0", partitions=1),
     "Option --replica-assignment can't be used with --partitions or --replication-factor"),
    (TopicCommandOptions(TopicAction.ALTER, topic="t"), "--alter needs --partitions, --config or --delete-config"),
    (TopicCommandOptions(TopicAction.ALTER, topic="t", configs=("retention.ms",)),
     "Invalid topic config: all configs to be added must be in the format \"key=val\", got 'retention.ms'"),
])
def test_options_check_names_the_first_problem(options: TopicCommandOptions, message: str) -> None:
    with pytest.raises(TopicCommandError) as raised:
        options.check()
    assert str(raised.value) == message


def test_options_are_frozen() -> None:
    opts = TopicCommandOptions(TopicAction.LIST)
    with pytest.raises(AttributeError):
        opts.topic = "t"  # type: ignore[misc]
    assert replace(opts, topic="t").topic == "t"
