"""TopicDeletionManager: deletes topics marked under ``/admin/delete_topics`` (Kafka's
TopicDeletionManager).

For each queued topic: partitions go Offline -> NonExistent (brokers are told the topic is
going: leader -2 in UpdateMetadata); replicas on live brokers go Offline ->
ReplicaDeletionStarted (StopReplica with delete) -> ReplicaDeletionSuccessful when the broker
answers; replicas on dead brokers are ReplicaDeletionIneligible and the topic waits until
those brokers return.  When every replica is deleted the topic's znodes are removed.
Side effects go through a small client interface so this logic can be tested alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Protocol

from odradek.common import TopicPartition
from odradek.controller.context import ControllerContext, PartitionAndReplica
from odradek.controller.partition_state_machine import PartitionState, PartitionStateMachine
from odradek.controller.replica_state_machine import ReplicaState, ReplicaStateMachine

log = logging.getLogger(__name__)

__all__ = ["DeletionClient", "TopicDeletionManager"]


class DeletionClient(Protocol):
    async def delete_topic(self, topic: str) -> None: ...
    async def delete_topic_deletions(self, topics: Iterable[str]) -> None: ...
    def mute_partition_modifications(self, topic: str) -> None: ...
    async def send_metadata_update(self, partitions: Iterable[TopicPartition]) -> None: ...


class TopicDeletionManager:
    def __init__(self, enabled: bool, ctx: ControllerContext, replica_sm: ReplicaStateMachine,
                 partition_sm: PartitionStateMachine, client: DeletionClient) -> None:
        self.enabled = enabled
        self.ctx = ctx
        self.replica_sm = replica_sm
        self.partition_sm = partition_sm
        self.client = client
        self.topics_to_be_deleted: set[str] = set()
        self.topics_with_deletion_started: set[str] = set()
        self.topics_ineligible: set[str] = set()

    def _sync_state_machines(self) -> None:
        # The state machines skip topics being deleted (no elections, no LeaderAndIsr).
        self.partition_sm.topics_being_deleted = self.topics_to_be_deleted
        self.replica_sm.topics_being_deleted = self.topics_to_be_deleted

    async def init(self, topics_to_delete: set[str], ineligible: set[str]) -> None:
        if self.enabled:
            self.topics_to_be_deleted |= topics_to_delete
            self.topics_ineligible |= ineligible & self.topics_to_be_deleted
        elif topics_to_delete:
            log.info("delete.topic.enable is false: removing deletion markers for %s", sorted(topics_to_delete))
            await self.client.delete_topic_deletions(topics_to_delete)
        self._sync_state_machines()

    def reset(self) -> None:
        self.topics_to_be_deleted.clear()
        self.topics_with_deletion_started.clear()
        self.topics_ineligible.clear()

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return self.enabled and topic in self.topics_to_be_deleted

    async def try_topic_deletion(self) -> None:
        if self.enabled:
            await self._resume_deletions()

    async def enqueue_topics_for_deletion(self, topics: set[str]) -> None:
        if self.enabled:
            self.topics_to_be_deleted |= topics
            self._sync_state_machines()
            await self._resume_deletions()

    async def resume_deletion_for_topics(self, topics: set[str]) -> None:
        to_resume = topics & self.topics_to_be_deleted
        if self.enabled and to_resume:
            self.topics_ineligible -= to_resume
            await self._resume_deletions()

    def mark_topic_ineligible_for_deletion(self, topics: set[str], reason: str) -> None:
        if not self.enabled:
            return
        halted = self.topics_to_be_deleted & topics
        if halted - self.topics_ineligible:
            log.info("Halted deletion of topics %s due to %s", sorted(halted), reason)
        self.topics_ineligible |= halted

    async def fail_replica_deletion(self, replicas: list[PartitionAndReplica]) -> None:
        if not self.enabled:
            return
        failed = [r for r in replicas if r.topic in self.topics_to_be_deleted]
        if failed:
            await self.replica_sm.handle_state_changes(failed, ReplicaState.DELETION_INELIGIBLE)
            self.mark_topic_ineligible_for_deletion({r.topic for r in failed}, "replica deletion failure")
            await self._resume_deletions()

    async def on_stop_replica_response(self, replica_id: int, partition_errors: Mapping[tuple[str, int], int],
                                       top_error: int) -> None:
        """A broker answered a StopReplica with delete: its replicas without an error are
        deleted, the others (all of them, on a top-level error) failed."""
        in_error = set(partition_errors) if top_error else {tp for tp, err in partition_errors.items() if err}
        failed = [PartitionAndReplica(t, p, replica_id) for t, p in sorted(in_error)]
        done = [PartitionAndReplica(t, p, replica_id) for t, p in sorted(set(partition_errors) - in_error)]
        if failed:
            await self.fail_replica_deletion(failed)
        if done:
            await self.complete_replica_deletion(done)

    async def complete_replica_deletion(self, replicas: list[PartitionAndReplica]) -> None:
        done = [r for r in replicas if self.is_topic_queued_up_for_deletion(r.topic)]
        await self.replica_sm.handle_state_changes(done, ReplicaState.DELETION_SUCCESSFUL)
        await self._resume_deletions()

    # ------------------------------------------------------------------ internals

    def _deletion_in_progress(self, topic: str) -> bool:
        return self.replica_sm.is_any_replica_in_state(topic, ReplicaState.DELETION_STARTED)

    def _eligible(self, topic: str) -> bool:
        return (topic in self.topics_to_be_deleted and not self._deletion_in_progress(topic)
                and topic not in self.topics_ineligible)

    async def _resume_deletions(self) -> None:
        retry: set[str] = set()
        eligible: set[str] = set()
        for topic in sorted(self.topics_to_be_deleted):
            if topic in self.ctx.all_topics and any(tp.topic == topic for tp in self.ctx.partitions_being_reassigned):
                self.mark_topic_ineligible_for_deletion({topic}, "partition reassignment in progress")
            if self.replica_sm.are_all_replicas_for_topic_deleted(topic):
                await self._complete_delete_topic(topic)
                log.info("Deletion of topic %s successfully completed", topic)
                continue
            if not self._deletion_in_progress(topic) and self.replica_sm.is_any_replica_in_state(
                    topic, ReplicaState.DELETION_INELIGIBLE):
                retry.add(topic)
            if self._eligible(topic):
                eligible.add(topic)
        if retry:
            # Replicas whose deletion failed (their broker was down) go back to Offline so the
            # next round can start deleting them again.
            failed = [r for t in sorted(retry) for r in self.replica_sm.replicas_in_state(t, ReplicaState.DELETION_INELIGIBLE)]
            await self.replica_sm.handle_state_changes(failed, ReplicaState.OFFLINE)
        if eligible:
            await self._on_topic_deletion(eligible)

    async def _on_topic_deletion(self, topics: set[str]) -> None:
        unseen = topics - self.topics_with_deletion_started
        if unseen:
            partitions = [tp for t in sorted(unseen) for tp in self.ctx.partitions_for_topic(t)]
            await self.partition_sm.handle_state_changes(partitions, PartitionState.OFFLINE)
            await self.partition_sm.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
            self.topics_with_deletion_started |= unseen
        all_partitions = [tp for t in sorted(topics) for tp in self.ctx.partitions_for_topic(t)]
        await self.client.send_metadata_update(all_partitions)
        for topic in sorted(topics):
            await self._start_replica_deletion(topic)

    async def _start_replica_deletion(self, topic: str) -> None:
        replicas = self.ctx.replicas_for_topic(topic)
        alive = [r for r in replicas if self.ctx.is_replica_online(r.replica, r.topic_partition, include_shutting_down=True)]
        dead = [r for r in replicas if r not in set(alive)]
        deleted = set(self.replica_sm.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL))
        to_delete = [r for r in alive if r not in deleted]
        await self.replica_sm.handle_state_changes(dead, ReplicaState.DELETION_INELIGIBLE)
        await self.replica_sm.handle_state_changes(to_delete, ReplicaState.OFFLINE)
        await self.replica_sm.handle_state_changes(to_delete, ReplicaState.DELETION_STARTED)
        if dead:
            self.mark_topic_ineligible_for_deletion({topic}, "offline replicas")

    async def _complete_delete_topic(self, topic: str) -> None:
        self.client.mute_partition_modifications(topic)
        deleted = self.replica_sm.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL)
        await self.replica_sm.handle_state_changes(deleted, ReplicaState.NON_EXISTENT)
        # Partitions may still be Offline if deletion began under an earlier controller.
        partitions = self.ctx.partitions_for_topic(topic)
        offline = [tp for tp in partitions if self.partition_sm.state(tp) is not PartitionState.NON_EXISTENT]
        if offline:
            await self.partition_sm.handle_state_changes(offline, PartitionState.OFFLINE)
            await self.partition_sm.handle_state_changes(offline, PartitionState.NON_EXISTENT)
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible.discard(topic)
        await self.client.delete_topic(topic)
        self.ctx.remove_topic(topic)
        for r in [r for r in self.replica_sm.states if r.topic == topic]:
            self.replica_sm.states.pop(r, None)
