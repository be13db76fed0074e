"""In-memory stand-ins for the controller's side effects, and a small harness that drives the
real state machines the way KafkaController does.

``FakeZk`` keeps partition states with znode versions and enforces what the real
KafkaZkClient enforces: every write is fenced by ``/controller_epoch``'s version
(ControllerMovedError otherwise), creates fail when the znode exists, updates are conditional
on the version they carry.  ``RecordingBatch`` records what a ControllerBrokerRequestBatch
would have been asked to send.  ``FakeDeletionClient`` removes a deleted topic's znodes from
the FakeZk; ``FakeReassignmentClient`` keeps ``/admin/reassign_partitions`` and the topic
assignments in it.  Plain classes, no mocking library.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from odradek.controller.context import (
    ControllerContext,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from odradek.controller.leader_selectors import ElectionType
from odradek.controller.partition_state_machine import PartitionState, PartitionStateMachine
from odradek.controller.reassignment import ReassignmentManager
from odradek.controller.replica_state_machine import ReplicaState, ReplicaStateMachine
from odradek.controller.topic_deletion import TopicDeletionManager
from odradek.zk.client import BadVersionError, ControllerMovedError, NodeExistsError, NoNodeError
from odradek.zk.zk_data import BrokerInfo, EndPoint, LeaderAndIsr

T = TypeVar("T")

CONTROLLER_ID = 0
CONTROLLER_EPOCH = 5
EPOCH_ZK_VERSION = 4


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to completion (pytest-asyncio is not used here)."""
    return asyncio.run(coro)


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def pr(topic: str, partition: int, replica: int) -> PartitionAndReplica:
    return PartitionAndReplica(topic, partition, replica)


def broker_info(broker_id: int, rack: str | None = None) -> BrokerInfo:
    return BrokerInfo(broker_id, (EndPoint("PLAINTEXT", f"host{broker_id}", 9090 + broker_id),), rack)


def with_version(state: LeaderAndIsr, zk_version: int) -> LeaderAndIsr:
    return LeaderAndIsr(state.leader, state.leader_epoch, state.isr, state.controller_epoch, zk_version)


# ----------------------------------------------------------------------------- ZooKeeper


@dataclass
class FakeZk:
    """The parts of KafkaZkClient the state machines use, over dicts.

    ``epoch_zk_version`` is the current version of ``/controller_epoch``: a write that names
    another version raises ControllerMovedError, as the real fenced multi does.  ``fail_writes``
    maps a partition to the exception its next write returns (one shot).
    """

    epoch_zk_version: int = EPOCH_ZK_VERSION
    states: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    topics: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    delete_markers: set[str] = field(default_factory=set)
    fail_writes: dict[TopicPartition, Exception] = field(default_factory=dict)
    # Every successful write, in order: ("create" | "update", partition, state written).
    writes: list[tuple[str, TopicPartition, LeaderAndIsr]] = field(default_factory=list)
    config_reads: list[set[str]] = field(default_factory=list)

    def _fence(self, epoch_zk_version: int) -> None:
        if epoch_zk_version != self.epoch_zk_version:
            raise ControllerMovedError(
                f"controller epoch zk version {epoch_zk_version} is stale (now {self.epoch_zk_version})")

    def move_controller(self) -> None:
        """Another broker became controller: ``/controller_epoch`` has a new version."""
        self.epoch_zk_version += 1

    async def create_partition_states(self, states: Mapping[TopicPartition, LeaderAndIsr],
                                      epoch_zk_version: int) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        self._fence(epoch_zk_version)
        results: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        for partition, state in states.items():
            if partition in self.fail_writes:
                results[partition] = self.fail_writes.pop(partition)
            elif partition in self.states:
                results[partition] = NodeExistsError()
            else:
                written = with_version(state, 0)
                self.states[partition] = written
                self.writes.append(("create", partition, written))
                results[partition] = written
        return results

    async def update_partition_states(self, states: Mapping[TopicPartition, LeaderAndIsr],
                                      epoch_zk_version: int) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        self._fence(epoch_zk_version)
        results: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        for partition, state in states.items():
            current = self.states.get(partition)
            if partition in self.fail_writes:
                results[partition] = self.fail_writes.pop(partition)
            elif current is None:
                results[partition] = NoNodeError()
            elif state.zk_version != current.zk_version:
                results[partition] = BadVersionError()
            else:
                written = with_version(state, current.zk_version + 1)
                self.states[partition] = written
                self.writes.append(("update", partition, written))
                results[partition] = written
        return results

    async def get_partition_states(self, partitions: Iterable[TopicPartition]
                                   ) -> dict[TopicPartition, LeaderAndIsr]:
        return {p: self.states[p] for p in partitions if p in self.states}

    async def get_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        topics = set(topics)
        self.config_reads.append(topics)
        return {t: dict(self.configs.get(t, {})) for t in topics}

    def bump(self, partition: TopicPartition, **changes: Any) -> LeaderAndIsr:
        """Someone else wrote the state znode: change it and its version behind the cache."""
        current = self.states[partition]
        fields = {"leader": current.leader, "leader_epoch": current.leader_epoch, "isr": current.isr,
                  "controller_epoch": current.controller_epoch, **changes}
        self.states[partition] = LeaderAndIsr(zk_version=current.zk_version + 1, **fields)
        return self.states[partition]


# ----------------------------------------------------------------------------- request batch


@dataclass(frozen=True)
class LeaderAndIsrSent:
    broker: int
    partition: TopicPartition
    state: LeaderAndIsr
    replicas: tuple[int, ...]
    is_new: bool


@dataclass(frozen=True)
class StopReplicaSent:
    broker: int
    partition: TopicPartition
    delete: bool


@dataclass(frozen=True)
class UpdateMetadataSent:
    brokers: frozenset[int]
    partitions: frozenset[TopicPartition]


@dataclass
class SentBatch:
    controller_epoch: int
    leader_and_isr: list[LeaderAndIsrSent] = field(default_factory=list)
    stop_replica: list[StopReplicaSent] = field(default_factory=list)
    update_metadata: list[UpdateMetadataSent] = field(default_factory=list)


class RecordingBatch:
    """Records the requests a ControllerBrokerRequestBatch would send, one SentBatch per
    ``send_requests_to_brokers``.  Like the real batch, negative broker ids are skipped."""

    def __init__(self) -> None:
        self.pending = SentBatch(controller_epoch=-1)
        self.sent: list[SentBatch] = []
        self.new_batch_calls = 0
        self.discarded: list[SentBatch] = []

    def new_batch(self) -> None:
        self.new_batch_calls += 1
        if self.pending.leader_and_isr or self.pending.stop_replica or self.pending.update_metadata:
            self.discarded.append(self.pending)
            self.pending = SentBatch(controller_epoch=-1)

    def add_leader_and_isr_request_for_brokers(self, broker_ids: Iterable[int], partition: TopicPartition,
                                               state: LeaderAndIsr, assignment: ReplicaAssignment,
                                               is_new: bool) -> None:
        for b in broker_ids:
            if b >= 0:
                self.pending.leader_and_isr.append(
                    LeaderAndIsrSent(b, partition, state, tuple(assignment.replicas), is_new))

    def add_stop_replica_request_for_brokers(self, broker_ids: Iterable[int], partition: TopicPartition,
                                             delete_partition: bool) -> None:
        for b in broker_ids:
            if b >= 0:
                self.pending.stop_replica.append(StopReplicaSent(b, partition, delete_partition))

    def add_update_metadata_request_for_brokers(self, broker_ids: Iterable[int],
                                                partitions: Iterable[TopicPartition] = ()) -> None:
        self.pending.update_metadata.append(
            UpdateMetadataSent(frozenset(b for b in broker_ids if b >= 0), frozenset(partitions)))

    async def send_requests_to_brokers(self, controller_epoch: int) -> None:
        self.pending.controller_epoch = controller_epoch
        self.sent.append(self.pending)
        self.pending = SentBatch(controller_epoch=-1)

    # ------------------------------------------------------------------ queries

    def clear(self) -> None:
        self.sent.clear()

    @property
    def leader_and_isr(self) -> list[LeaderAndIsrSent]:
        return [r for b in self.sent for r in b.leader_and_isr]

    @property
    def stop_replica(self) -> list[StopReplicaSent]:
        return [r for b in self.sent for r in b.stop_replica]

    @property
    def update_metadata(self) -> list[UpdateMetadataSent]:
        return [r for b in self.sent for r in b.update_metadata]

    def leader_and_isr_to(self, partition: TopicPartition) -> dict[int, LeaderAndIsrSent]:
        """The last LeaderAndIsr sent per broker for ``partition``."""
        return {r.broker: r for r in self.leader_and_isr if r.partition == partition}


# ----------------------------------------------------------------------------- deletion client


class FakeDeletionClient:
    """TopicDeletionManager's side effects, applied to a FakeZk and recorded."""

    def __init__(self, zk: FakeZk) -> None:
        self.zk = zk
        self.deleted_topics: list[str] = []
        self.removed_markers: list[set[str]] = []
        self.muted: list[str] = []
        self.metadata_updates: list[set[TopicPartition]] = []

    async def delete_topic(self, topic: str) -> None:
        self.deleted_topics.append(topic)
        self.zk.topics.pop(topic, None)
        self.zk.configs.pop(topic, None)
        self.zk.delete_markers.discard(topic)
        for partition in [p for p in self.zk.states if p.topic == topic]:
            del self.zk.states[partition]

    async def delete_topic_deletions(self, topics: Iterable[str]) -> None:
        topics = set(topics)
        self.removed_markers.append(topics)
        self.zk.delete_markers -= topics

    def mute_partition_modifications(self, topic: str) -> None:
        self.muted.append(topic)

    async def send_metadata_update(self, partitions: Iterable[TopicPartition]) -> None:
        self.metadata_updates.append(set(partitions))


# ----------------------------------------------------------------------------- reassignment client


class FakeReassignmentClient:
    """ReassignmentManager's side effects over a FakeZk: ``requests`` is
    ``/admin/reassign_partitions``; assignments are written to ``zk.topics`` (replicas being
    added and removed to ``reassigning``); partition state writes are fenced as in the FakeZk."""

    def __init__(self, zk: FakeZk, ctx: ControllerContext) -> None:
        self.zk = zk
        self.ctx = ctx
        self.requests: dict[TopicPartition, tuple[int, ...]] = {}
        self.removed: list[TopicPartition] = []
        self.reassigning: dict[TopicPartition, tuple[tuple[int, ...], tuple[int, ...]]] = {}

    async def read_requests(self) -> dict[TopicPartition, tuple[int, ...]]:
        return dict(self.requests)

    async def remove_requests(self, partitions: Mapping[TopicPartition, tuple[int, ...] | None]) -> None:
        for partition, replicas in partitions.items():
            if partition in self.requests and replicas in (None, self.requests[partition]):
                self.removed.append(partition)
                del self.requests[partition]

    async def write_assignment(self, topic: str, partitions: Mapping[int, ReplicaAssignment]) -> None:
        self.zk._fence(self.ctx.epoch_zk_version)
        self.zk.topics[topic] = {p: a.replicas for p, a in partitions.items()}
        for p, a in partitions.items():
            if a.is_being_reassigned:
                self.reassigning[tp(topic, p)] = (a.adding_replicas, a.removing_replicas)
            else:
                self.reassigning.pop(tp(topic, p), None)

    async def update_leader_and_isr(self, partition: TopicPartition, state: LeaderAndIsr
                                    ) -> LeaderAndIsr | Exception:
        written = await self.zk.update_partition_states({partition: state}, self.ctx.epoch_zk_version)
        return written[partition]


# ----------------------------------------------------------------------------- state-change log


class StateChangeLog(logging.Handler):
    """Collects the lines written to ``state.change.logger``."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def lines(self, level: int | None = None) -> list[str]:
        return [r.getMessage() for r in self.records if level is None or r.levelno == level]

    def errors(self) -> list[str]:
        return self.lines(logging.ERROR)


@contextmanager
def state_change_log() -> Iterator[StateChangeLog]:
    logger = logging.getLogger("state.change.logger")
    handler = StateChangeLog()
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


# ----------------------------------------------------------------------------- harness


class Cluster:
    """A controller's state machines over a FakeZk and a RecordingBatch.

    The methods that change the cluster do what KafkaController's handlers do
    (onNewPartitionCreation, onBrokerFailure, onBrokerStartup, the StopReplica response
    handler), so tests can drive whole flows without the controller's ZooKeeper plumbing.
    """

    def __init__(self, brokers: Iterable[int] = (0, 1, 2), *, unclean: bool = False,
                 delete_topic_enable: bool = True, epoch: int = CONTROLLER_EPOCH) -> None:
        self.ctx = ControllerContext(epoch=epoch, epoch_zk_version=EPOCH_ZK_VERSION)
        self.ctx.add_live_brokers({b: (broker_info(b), 100 + b) for b in brokers})
        self.zk = FakeZk()
        self.batch = RecordingBatch()
        self.psm = PartitionStateMachine(CONTROLLER_ID, self.ctx, self.zk, self.batch,  # type: ignore[arg-type]
                                         broker_unclean_election=unclean)
        self.rsm = ReplicaStateMachine(CONTROLLER_ID, self.ctx, self.zk, self.batch)  # type: ignore[arg-type]
        self.client = FakeDeletionClient(self.zk)
        self.deletion = TopicDeletionManager(delete_topic_enable, self.ctx, self.rsm, self.psm, self.client)
        self.reassign_client = FakeReassignmentClient(self.zk, self.ctx)
        self.reassignment = ReassignmentManager(CONTROLLER_ID, self.ctx, self.rsm, self.psm, self.batch,  # type: ignore[arg-type]
                                                self.deletion, self.reassign_client)

    def add_topic(self, topic: str, assignment: Mapping[int, Iterable[int]],
                  config: Mapping[str, str] | None = None) -> list[TopicPartition]:
        """Write the topic to ZooKeeper and the context, as TopicChange loads it."""
        parts = {p: tuple(r) for p, r in assignment.items()}
        self.zk.topics[topic] = parts
        self.zk.configs[topic] = dict(config or {})
        self.ctx.all_topics.add(topic)
        for p, replicas in parts.items():
            self.ctx.update_partition_full_replica_assignment(tp(topic, p), ReplicaAssignment(replicas))
        return [tp(topic, p) for p in sorted(parts)]

    async def create_topic(self, topic: str, assignment: Mapping[int, Iterable[int]],
                           config: Mapping[str, str] | None = None) -> list[TopicPartition]:
        """TopicChange -> onNewPartitionCreation: partitions and replicas New, then Online."""
        partitions = self.add_topic(topic, assignment, config)
        replicas = self.ctx.replicas_for_partitions(partitions)
        await self.psm.handle_state_changes(partitions, PartitionState.NEW)
        await self.rsm.handle_state_changes(replicas, ReplicaState.NEW)
        await self.psm.handle_state_changes(partitions, PartitionState.ONLINE, ElectionType.OFFLINE)
        await self.rsm.handle_state_changes(replicas, ReplicaState.ONLINE)
        return partitions

    async def fail_brokers(self, *broker_ids: int) -> None:
        """onBrokerFailure: partitions led by the dead brokers go Offline and get a new leader,
        the dead brokers' replicas go Offline (or fail deletion if their topic is queued)."""
        self.ctx.remove_live_brokers(broker_ids)
        replicas = self.ctx.replicas_on_brokers(broker_ids)
        deleting = [r for r in replicas if self.deletion.is_topic_queued_up_for_deletion(r.topic)]
        others = [r for r in replicas if not self.deletion.is_topic_queued_up_for_deletion(r.topic)]
        offline_leader = [p for p, s in self.ctx.leadership.items()
                          if not self.ctx.is_replica_online(s.leader, p, include_shutting_down=True)
                          and not self.deletion.is_topic_queued_up_for_deletion(p.topic)]
        await self.psm.handle_state_changes(offline_leader, PartitionState.OFFLINE)
        await self.psm.trigger_online_partition_state_change()
        await self.rsm.handle_state_changes(others, ReplicaState.OFFLINE)
        if deleting:
            await self.deletion.fail_replica_deletion(deleting)

    async def start_brokers(self, *broker_ids: int) -> None:
        """onBrokerStartup: replicas Online (except topics being deleted), offline partitions
        elect, deletion resumes for topics with replicas on these brokers."""
        self.ctx.add_live_brokers({b: (broker_info(b), 200 + b) for b in broker_ids})
        replicas = self.ctx.replicas_on_brokers(broker_ids)
        deleting = {r.topic for r in replicas if self.deletion.is_topic_queued_up_for_deletion(r.topic)}
        await self.rsm.handle_state_changes(
            [r for r in replicas if r.topic not in deleting], ReplicaState.ONLINE)
        await self.psm.trigger_online_partition_state_change()
        if deleting:
            await self.deletion.resume_deletion_for_topics(deleting)

    async def stop_replica_response(self, broker: int, errors: Mapping[TopicPartition, int],
                                    top_error: int = 0) -> None:
        """TopicDeletionStopReplicaResponseReceived, as KafkaController handles it."""
        await self.deletion.on_stop_replica_response(
            broker, {(p.topic, p.partition): e for p, e in errors.items()}, top_error)

    def grow_isr(self, partition: TopicPartition, isr: Iterable[int]) -> LeaderAndIsr:
        """The leader's AlterPartition was accepted: a new ISR in ZooKeeper and the cache."""
        state = self.zk.bump(partition, isr=tuple(isr))
        self.ctx.leadership[partition] = state
        return state

    def replica_states(self, topic: str) -> dict[PartitionAndReplica, ReplicaState]:
        return {r: s for r, s in self.rsm.states.items() if r.topic == topic}
