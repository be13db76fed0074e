"""AdminZkClient: topic administration over ZooKeeper (Kafka's kafka.zk.AdminZkClient).

Creating a topic writes ``/config/topics/<t>`` and then ``/brokers/topics/<t>``; the
controller notices and brings the partitions online.  Every check runs before the first
write, so a refused request changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from odradek.assignment import (
    AdminOperationError,
    BrokerMetadata,
    assign_new_partitions,
    assign_replicas_to_brokers,
    validate_replica_assignment,
)
from odradek.common import INTERNAL_TOPICS, unify_collision_chars, validate_topic_name
from odradek.config import ConfigError, validate_topic_config
from odradek.protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from odradek.zk.client import KafkaZkClient, NodeExistsError
from odradek.zk.zk_data import LeaderAndIsr, TopicAssignment, TopicZNode

__all__ = [
    "AdminZkClient",
    "PartitionDescription",
    "RackAwareMode",
    "TopicDescription",
]

class RackAwareMode(Enum):
    ENFORCED = "enforced"  # use racks; an error if only some brokers have one
    SAFE = "safe"  # use racks only when every broker has one
    DISABLED = "disabled"  # ignore racks


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    replicas: tuple[int, ...]
    leader: int | None  # None: no leader (or the state znode is missing)
    isr: tuple[int, ...]
    leader_epoch: int = -1

    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: str | None
    partitions: tuple[PartitionDescription, ...]
    config: Mapping[str, str] = field(default_factory=dict)
    marked_for_deletion: bool = False

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


class AdminZkClient:
    """Create / alter / delete / list / describe topics through ZooKeeper."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self.zk = zk

    async def broker_metadatas(self, mode: RackAwareMode = RackAwareMode.ENFORCED) -> list[BrokerMetadata]:
        """Registered brokers sorted by id, with racks as ``mode`` says (Kafka's getBrokerMetadatas)."""
        brokers = await self.zk.get_all_brokers()
        with_rack = [b for b in brokers.values() if b.rack is not None]
        if mode is RackAwareMode.ENFORCED and with_rack and len(with_rack) < len(brokers):
            raise AdminOperationError(
                "Not all brokers have rack information. Add --disable-rack-aware in command line to make "
                "replica assignment without rack information.")
        use_racks = mode is not RackAwareMode.DISABLED and len(with_rack) == len(brokers)
        return sorted((BrokerMetadata(b.id, b.rack if use_racks else None) for b in brokers.values()),
                      key=lambda m: m.id)

    async def validate_create(self, topic: str, assignment: Mapping[int, Sequence[int]] | None,
                              config: Mapping[str, str]) -> dict[str, str]:
        validate_topic_name(topic)
        try:
            checked = validate_topic_config(config)
        except ConfigError as e:
            raise InvalidConfigError(str(e)) from None
        existing = await self.zk.get_all_topics()
        if topic in existing:
            raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
        colliding = sorted(t for t in existing if unify_collision_chars(t) == unify_collision_chars(topic))
        if colliding:
            raise InvalidTopicError(f"Topic '{topic}' collides with existing topics: {', '.join(colliding)}")
        if assignment is not None:
            live = set(await self.zk.get_all_broker_ids())
            validate_replica_assignment(assignment, live_brokers=live)
            if sorted(assignment) != list(range(len(assignment))):
                raise AdminOperationError(
                    "Partitions of the replica assignment must be numbered 0.." + str(len(assignment) - 1))
        return checked

    async def create_topic(self, topic: str, partitions: int | None = None, replication_factor: int | None = None,
                           *, assignment: Mapping[int, Sequence[int]] | None = None,
                           config: Mapping[str, str] | None = None,
                           rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
                           validate_only: bool = False) -> dict[int, list[int]]:
        """Validate and (unless ``validate_only``) create a topic; returns its assignment."""
        config = dict(config or {})
        if assignment is None:
            if partitions is None or replication_factor is None:
                raise InvalidRequestError("Missing required argument: --partitions and --replication-factor, "
                                          "or --replica-assignment")
            if partitions <= 0:
                raise InvalidPartitionsError("Number of partitions must be larger than 0.")
            if replication_factor <= 0:
                raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
        checked = await self.validate_create(topic, assignment, config)
        if assignment is None:
            brokers = await self.broker_metadatas(rack_aware_mode)
            assignment = assign_replicas_to_brokers(brokers, partitions, replication_factor)  # type: ignore[arg-type]
        final = {p: list(r) for p, r in sorted(assignment.items())}
        if not validate_only:
            try:
                await self.zk.create_topic(
                    topic, TopicAssignment(final, TopicZNode.new_topic_id()), checked)
            except NodeExistsError:
                raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.") from None
        return final

    async def add_partitions(self, topic: str, num_partitions: int,
                             assignment: Mapping[int, Sequence[int]] | None = None,
                             *, rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
                             validate_only: bool = False) -> dict[int, list[int]]:
        """Grow a topic to ``num_partitions``; new partitions are placed as Kafka's
        addPartitions does (start index of the existing partition 0's first replica, start
        partition id = the current count).  Returns the new partitions' assignment."""
        entry = await self.zk.get_topic_assignment(topic)
        if entry is None:
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
        current, version = entry
        existing = dict(current.partitions)
        to_add = num_partitions - len(existing)
        if to_add <= 0:
            raise InvalidPartitionsError(
                "The number of partitions for a topic can only be increased. "
                f"Topic {topic} currently has {len(existing)} partitions, {num_partitions} would not be an increase.")
        if await self.zk.is_marked_for_deletion(topic):
            raise InvalidTopicError(f"Topic {topic} is marked for deletion.")
        rf = len(existing[0]) if 0 in existing else len(next(iter(existing.values())))
        if assignment is not None:
            new = {int(p): list(r) for p, r in assignment.items()}
            if sorted(new) != list(range(len(existing), num_partitions)):
                raise InvalidReplicaAssignmentCount(
                    f"Increasing the number of partitions by {to_add} but {len(new)} assignments provided.")
            live = set(await self.zk.get_all_broker_ids())
            validate_replica_assignment(new, live_brokers=live, expected_replication_factor=rf)
        else:
            new = assign_new_partitions(await self.broker_metadatas(rack_aware_mode), existing, num_partitions)
        if not validate_only:
            merged = {**existing, **new}
            await self.zk.set_topic_assignment(
                topic, TopicAssignment(merged, current.topic_id, current.adding_replicas, current.removing_replicas),
                version)
        return new

    async def delete_topic(self, topic: str) -> bool:
        """Mark a topic for deletion; False if it already was.  Internal topics are refused."""
        if topic in INTERNAL_TOPICS:
            raise InvalidTopicError(
                f"Topic {topic} is a kafka internal topic and is not allowed to be marked for deletion.")
        if topic not in await self.zk.get_all_topics():
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
        try:
            await self.zk.create_delete_topic_marker(topic)
        except NodeExistsError:
            return False
        return True

    async def list_topics(self) -> tuple[list[str], set[str]]:
        """All topics (sorted) and those marked for deletion."""
        return sorted(await self.zk.get_all_topics()), await self.zk.get_topic_deletions()

    async def describe_topics(self, topics: Iterable[str]) -> list[TopicDescription]:
        topics = list(topics)
        marked = await self.zk.get_topic_deletions()
        configs = await self.zk.get_topic_configs(topics)
        result = []
        for topic in topics:
            entry = await self.zk.get_topic_assignment(topic)
            if entry is None:
                continue
            assignment, _ = entry
            parts = sorted(assignment.partitions)
            states = await self.zk.get_partition_states([(topic, p) for p in parts])
            descriptions = []
            for p in parts:
                state = states.get((topic, p))
                leader = state.leader if state is not None and state.leader != LeaderAndIsr.NO_LEADER else None
                descriptions.append(PartitionDescription(
                    p, tuple(assignment.partitions[p]), leader, tuple(state.isr) if state else (),
                    state.leader_epoch if state else -1))
            result.append(TopicDescription(topic, assignment.topic_id, tuple(descriptions),
                                           configs.get(topic, {}), topic in marked))
        return result

    async def live_broker_ids(self) -> set[int]:
        return set(await self.zk.get_all_broker_ids())

    async def alter_topic_config(self, topic: str, config: Mapping[str, str], *,
                                 validate_only: bool = False) -> dict[str, str]:
        """Replace a topic's config overrides with ``config`` (unless ``validate_only``);
        returns them as written."""
        try:
            checked = validate_topic_config(config)
        except ConfigError as e:
            raise InvalidConfigError(str(e)) from None
        if topic not in await self.zk.get_all_topics():
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
        if not validate_only:
            await self.zk.set_topic_config(topic, checked)
        return checked


class InvalidReplicaAssignmentCount(AdminOperationError):
    """--alter with --replica-assignment listing the wrong number of new partitions."""
