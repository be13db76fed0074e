"""Topics created, partitions added, and topics marked for deletion (Kafka's
KafkaController.processTopicChange, processPartitionModifications, onNewPartitionCreation and
processTopicDeletion).  Also loads topic assignments into the context at failover."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from kazoo.protocol.states import WatchedEvent

from odradek.common import TopicPartition
from odradek.controller.context import ControllerContext, ReplicaAssignment
from odradek.controller.leader_selectors import ElectionType
from odradek.controller.partition_state_machine import PartitionState, PartitionStateMachine
from odradek.controller.reassignment import REASSIGNMENT_IN_PROGRESS
from odradek.controller.replica_state_machine import ReplicaState, ReplicaStateMachine
from odradek.controller.topic_deletion import TopicDeletionManager
from odradek.zk.client import ControllerMovedError, KafkaZkClient
from odradek.zk.zk_data import TopicAssignment, TopicZNode

log = logging.getLogger(__name__)

__all__ = ["TopicChangeHandler", "TopicWatches"]


class TopicWatches(Protocol):
    """The watch callbacks the topic handlers re-arm (each only enqueues an event)."""

    def on_topic_change(self, event: WatchedEvent) -> None: ...
    def on_topic_deletion(self, event: WatchedEvent) -> None: ...
    def topic_watcher(self, topic: str) -> Callable[[WatchedEvent], None]: ...


class TopicChangeHandler:
    def __init__(self, zk: KafkaZkClient, ctx: ControllerContext, partition_sm: PartitionStateMachine,
                 replica_sm: ReplicaStateMachine, deletion: TopicDeletionManager, watches: TopicWatches) -> None:
        self.zk = zk
        self.ctx = ctx
        self.partition_sm = partition_sm
        self.replica_sm = replica_sm
        self.deletion = deletion
        self.watches = watches
        # Topics whose deletion completed: a late change of their znode must not re-add partitions.
        self.muted_topics: set[str] = set()

    async def load_assignments(self, topics: Iterable[str]) -> None:
        """Read the topics' assignments into the context, watching each topic znode; topics
        without an id get one."""
        topics = list(topics)
        got = await asyncio.gather(*(self.zk.get_topic_assignment(t, watch=self.watches.topic_watcher(t))
                                     for t in topics))
        for topic, entry in zip(topics, got, strict=True):
            if entry is None:
                continue
            assignment, version = entry
            if assignment.topic_id is None:
                assignment = await self._assign_topic_id(topic, assignment, version)
            self.ctx.topic_ids[topic] = assignment.topic_id or ""
            for p, replicas in assignment.partitions.items():
                self.ctx.update_partition_full_replica_assignment(
                    TopicPartition(topic, p),
                    ReplicaAssignment(tuple(replicas), tuple(assignment.adding_replicas.get(p, ())),
                                      tuple(assignment.removing_replicas.get(p, ()))))

    async def _assign_topic_id(self, topic: str, assignment: TopicAssignment, version: int) -> TopicAssignment:
        """Topics created by old tools have no id; give them one, as Kafka 2.8+ controllers do."""
        with_id = TopicAssignment(assignment.partitions, TopicZNode.new_topic_id(),
                                  assignment.adding_replicas, assignment.removing_replicas)
        try:
            await self.zk.fenced_multi(self.ctx.epoch_zk_version, lambda tx: tx.set_data(
                TopicZNode.path(topic), TopicZNode.encode(with_id), version))
        except ControllerMovedError:
            raise
        except Exception:
            log.warning("could not store a topic id for %s", topic, exc_info=True)
        return with_id

    # ------------------------------------------------------------------ events

    async def process_topic_change(self) -> None:
        topics = await self.zk.get_all_topics(watch=self.watches.on_topic_change)
        new_topics = topics - self.ctx.all_topics
        deleted = self.ctx.all_topics - topics
        self.ctx.all_topics = set(topics)
        for topic in deleted:
            self.ctx.remove_topic(topic)
        if not new_topics:
            return
        await self.load_assignments(new_topics)
        self.muted_topics -= new_topics
        new_partitions = [tp for t in sorted(new_topics) for tp in self.ctx.partitions_for_topic(t)]
        log.info("New topics: %s, deleted topics: %s, new partition count: %d",
                 sorted(new_topics), sorted(deleted), len(new_partitions))
        await self.on_new_partition_creation(new_partitions)

    async def process_partition_modifications(self, topic: str) -> None:
        if topic in self.muted_topics:
            return
        entry = await self.zk.get_topic_assignment(topic, watch=self.watches.topic_watcher(topic))
        if entry is None:
            return
        assignment, _ = entry
        existing = self.ctx.assignments.get(topic, {})
        added = {p: r for p, r in assignment.partitions.items() if p not in existing}
        if not added:
            return
        if self.deletion.is_topic_queued_up_for_deletion(topic):
            log.error("Skipping adding partitions %s for topic %s since it is currently being deleted",
                      sorted(added), topic)
            return
        for p, replicas in added.items():
            self.ctx.update_partition_full_replica_assignment(TopicPartition(topic, p),
                                                              ReplicaAssignment(tuple(replicas)))
        log.info("New partitions to be added for topic %s: %s", topic, sorted(added))
        await self.on_new_partition_creation([TopicPartition(topic, p) for p in sorted(added)])

    async def on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        """New partitions and their replicas go New, then Online (electing the first leaders)."""
        replicas = self.ctx.replicas_for_partitions(partitions)
        await self.partition_sm.handle_state_changes(partitions, PartitionState.NEW)
        await self.replica_sm.handle_state_changes(replicas, ReplicaState.NEW)
        await self.partition_sm.handle_state_changes(partitions, PartitionState.ONLINE, ElectionType.OFFLINE)
        await self.replica_sm.handle_state_changes(replicas, ReplicaState.ONLINE)

    async def process_topic_deletion(self) -> None:
        """``/admin/delete_topics`` changed: queue the marked topics that exist for deletion."""
        marked = await self.zk.get_topic_deletions(watch=self.watches.on_topic_deletion)
        missing = marked - self.ctx.all_topics
        if missing:
            log.info("Deleting markers of topics that do not exist: %s", sorted(missing))
            await self.zk.delete_topic_deletion_markers(missing, self.ctx.epoch_zk_version)
        topics = marked - missing
        if not topics:
            return
        if not self.deletion.enabled:
            log.info("Removing %s from /admin/delete_topics since delete.topic.enable is false", sorted(topics))
            await self.zk.delete_topic_deletion_markers(topics, self.ctx.epoch_zk_version)
            return
        new = topics - self.deletion.topics_to_be_deleted
        if new:
            log.info("Starting topic deletion for topics %s", sorted(new))
        reassigning = {tp.topic for tp in self.ctx.partitions_being_reassigned}
        self.deletion.mark_topic_ineligible_for_deletion(topics & reassigning, REASSIGNMENT_IN_PROGRESS)
        await self.deletion.enqueue_topics_for_deletion(topics)
