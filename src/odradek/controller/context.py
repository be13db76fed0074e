"""ControllerContext: the active controller's cached view of the cluster (no I/O).

Filled from ZooKeeper when a broker becomes controller and kept current by the event
handlers; the state machines read and write it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from odradek.common import TopicPartition
from odradek.zk.zk_data import BrokerInfo, LeaderAndIsr

__all__ = ["ControllerContext", "PartitionAndReplica", "ReplicaAssignment"]


class PartitionAndReplica(NamedTuple):
    topic: str
    partition: int
    replica: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __str__(self) -> str:
        return f"[Topic={self.topic},Partition={self.partition},Replica={self.replica}]"


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas; during a reassignment also the replicas being added/removed."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """The replicas before the reassignment (ORS)."""
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def remove_replica(self, replica: int) -> ReplicaAssignment:
        """This assignment without ``replica`` (whose reassignment, if any, goes on)."""
        return ReplicaAssignment(*(tuple(r for r in rs if r != replica)
                                   for rs in (self.replicas, self.adding_replicas, self.removing_replicas)))

    def reassign_to(self, target: tuple[int, ...]) -> ReplicaAssignment:
        """The assignment while moving from the origin replicas to ``target``: RS = TRS + ORS,
        adding TRS - ORS, removing ORS - TRS (Kafka's ReplicaAssignment.reassignTo); moving to
        the origin replicas is no reassignment at all."""
        origin = self.origin_replicas
        full = tuple(dict.fromkeys(target + origin))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = -1
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    all_topics: set[str] = field(default_factory=set)
    topic_ids: dict[str, str] = field(default_factory=dict)
    # topic -> partition -> assignment
    assignments: dict[str, dict[int, ReplicaAssignment]] = field(default_factory=lambda: defaultdict(dict))
    leadership: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    partitions_being_reassigned: set[TopicPartition] = field(default_factory=set)
    # broker id -> its replicas in failed log directories (from LeaderAndIsr responses'
    # KAFKA_STORAGE_ERROR); forgotten when the broker goes or comes back
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    # ------------------------------------------------------------------ brokers

    @property
    def live_broker_ids(self) -> set[int]:
        return set(self.live_brokers) - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    def is_replica_online(self, broker_id: int, tp: TopicPartition, *, include_shutting_down: bool = False) -> bool:
        """Kafka's isReplicaOnline: the replica of ``tp`` on ``broker_id`` is online while its
        broker is live (and, unless ``include_shutting_down``, not shutting down) and the log
        directory holding it has not failed."""
        if broker_id not in self.live_brokers:
            return False
        if not include_shutting_down and broker_id in self.shutting_down_broker_ids:
            return False
        offline = self.replicas_on_offline_dirs.get(broker_id)
        return offline is None or tp not in offline

    def add_live_brokers(self, brokers: dict[int, tuple[BrokerInfo, int]]) -> None:
        for broker_id, (info, epoch) in brokers.items():
            self.live_brokers[broker_id] = info
            self.broker_epochs[broker_id] = epoch
            self.replicas_on_offline_dirs.pop(broker_id, None)  # a (re)started broker reports anew

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self.live_brokers.pop(broker_id, None)
            self.broker_epochs.pop(broker_id, None)
            self.shutting_down_broker_ids.discard(broker_id)
            self.replicas_on_offline_dirs.pop(broker_id, None)

    # ------------------------------------------------------------------ partitions

    def partition_replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        assignment = self.assignments.get(tp.topic, {}).get(tp.partition)
        return assignment.replicas if assignment else ()

    def partition_full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return self.assignments.get(tp.topic, {}).get(tp.partition) or ReplicaAssignment(())

    def update_partition_full_replica_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.assignments[tp.topic][tp.partition] = assignment

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def all_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, parts in self.assignments.items() for p in parts]

    def replicas_for_partitions(self, partitions: Iterable[TopicPartition]) -> list[PartitionAndReplica]:
        return [
            PartitionAndReplica(tp.topic, tp.partition, r)
            for tp in partitions for r in self.partition_replica_assignment(tp)
        ]

    def replicas_for_topic(self, topic: str) -> list[PartitionAndReplica]:
        return self.replicas_for_partitions(self.partitions_for_topic(topic))

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> list[PartitionAndReplica]:
        ids = set(broker_ids)
        return [
            PartitionAndReplica(t, p, r)
            for t, parts in self.assignments.items()
            for p, a in parts.items()
            for r in a.replicas if r in ids
        ]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [
            TopicPartition(t, p)
            for t, parts in self.assignments.items()
            for p, a in parts.items() if broker_id in a.replicas
        ]

    def partitions_led_by_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, state in self.leadership.items() if state.leader == broker_id]

    def partitions_with_leaders(self) -> list[TopicPartition]:
        return [tp for tp in self.leadership if tp.topic in self.all_topics]

    def all_live_replicas(self) -> set[PartitionAndReplica]:
        return {r for r in self.replicas_on_brokers(self.live_broker_ids)
                if self.is_replica_online(r.replica, r.topic_partition)}

    def remove_topic(self, topic: str) -> None:
        self.all_topics.discard(topic)
        self.topic_ids.pop(topic, None)
        for p in self.assignments.pop(topic, {}):
            self.leadership.pop(TopicPartition(topic, p), None)
        self.partitions_being_reassigned = {
            tp for tp in self.partitions_being_reassigned if tp.topic != topic}

    def reset(self) -> None:
        """Forget everything (on resignation)."""
        self.__init__()  # type: ignore[misc]
