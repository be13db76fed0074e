"""Partition reassignment through ``/admin/reassign_partitions`` (Kafka's ZooKeeper-mode flow).

For a partition with original replicas ORS and target replicas TRS:

1. Write the topic znode with the full replica set RS = TRS + ORS and the replicas being
   added and removed; bump the leader epoch and send LeaderAndIsr with RS, so the new
   replicas start fetching.
2. Once every target replica is in the ISR (the ISR grows through AlterPartition): make the
   target replicas Online, move leadership into TRS if the leader is leaving (or bump the
   epoch), stop and delete the removed replicas, write TRS as the assignment, and remove the
   partition from ``/admin/reassign_partitions``.

While a topic has partitions being reassigned it is ineligible for deletion.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from odradek.common import TopicPartition
from odradek.controller.context import PartitionAndReplica, ReplicaAssignment
from odradek.controller.leader_selectors import ElectionType
from odradek.controller.partition_state_machine import PartitionState
from odradek.controller.replica_state_machine import ReplicaState
from odradek.zk.client import NoNodeError
from odradek.zk.zk_data import LeaderAndIsr, ReassignPartitionsZNode, TopicAssignment, TopicZNode

if TYPE_CHECKING:
    from odradek.controller.controller import KafkaController

log = logging.getLogger(__name__)

__all__ = ["ReassignmentManager"]


class ReassignmentManager:
    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller

    @property
    def ctx(self):
        return self.controller.ctx

    # ------------------------------------------------------------------ entry points

    async def initialize(self) -> None:
        """On failover: partitions whose topic znode records a reassignment are in progress."""
        for tp in self.ctx.all_partitions():
            if self.ctx.partition_full_replica_assignment(tp).is_being_reassigned:
                self.ctx.partitions_being_reassigned.add(tp)
        await self.on_request_znode()
        for tp in sorted(self.ctx.partitions_being_reassigned):
            await self.maybe_complete(tp)

    async def on_request_znode(self) -> None:
        """``/admin/reassign_partitions`` was created (or we just became controller)."""
        zk = self.controller.zk
        got = await zk.get(ReassignPartitionsZNode.path, watch=self.controller.on_reassignment_znode)
        if got is None:
            await zk.exists(ReassignPartitionsZNode.path, watch=self.controller.on_reassignment_znode)
            return
        requested = ReassignPartitionsZNode.decode(got[0])
        for (topic, partition), target in sorted(requested.items()):
            tp = TopicPartition(topic, partition)
            if tp in self.ctx.partitions_being_reassigned:
                continue
            problem = self._invalid(tp, target)
            if problem:
                log.error("Skipping reassignment of %s to %s: %s", tp, target, problem)
                await self._forget_request(tp)
                continue
            await self._start(tp, tuple(target))
        for tp in sorted(self.ctx.partitions_being_reassigned):
            await self.maybe_complete(tp)

    async def maybe_complete(self, tp: TopicPartition) -> None:
        """Phase 2, once every target replica is in the ISR."""
        assignment = self.ctx.partition_full_replica_assignment(tp)
        state = self.ctx.leadership.get(tp)
        if tp not in self.ctx.partitions_being_reassigned or state is None:
            return
        target = assignment.target_replicas
        if not all(r in state.isr for r in target):
            return
        removing = [r for r in assignment.replicas if r not in target]
        await self.controller.replica_sm.handle_state_changes(
            [PartitionAndReplica(tp.topic, tp.partition, r) for r in target], ReplicaState.ONLINE)
        final = ReplicaAssignment(target)
        self.ctx.update_partition_full_replica_assignment(tp, final)
        if state.leader not in target or not self.ctx.is_replica_online(state.leader, tp):
            await self.controller.partition_sm.handle_state_changes([tp], PartitionState.ONLINE, ElectionType.REASSIGN)
        else:
            await self._bump_epoch_and_send(tp, final, list(target))
        replicas = [PartitionAndReplica(tp.topic, tp.partition, r) for r in removing]
        replica_sm = self.controller.replica_sm
        await replica_sm.handle_state_changes(replicas, ReplicaState.OFFLINE)
        await replica_sm.handle_state_changes(replicas, ReplicaState.DELETION_STARTED)
        await replica_sm.handle_state_changes(replicas, ReplicaState.DELETION_SUCCESSFUL)
        await replica_sm.handle_state_changes(replicas, ReplicaState.NON_EXISTENT)
        self.ctx.update_partition_full_replica_assignment(tp, final)
        await self._write_topic_assignment(tp.topic)
        self.ctx.partitions_being_reassigned.discard(tp)
        await self._forget_request(tp)
        await self.controller.send_update_metadata_request(self.ctx.live_or_shutting_down_broker_ids, [tp])
        self.controller.logger.info(f"Completed reassignment of partition {tp} to replicas "
                                    f"[{','.join(map(str, target))}]")
        if self.controller.deletion.is_topic_queued_up_for_deletion(tp.topic) and not any(
                p.topic == tp.topic for p in self.ctx.partitions_being_reassigned):
            await self.controller.deletion.resume_deletion_for_topics({tp.topic})

    # ------------------------------------------------------------------ phase 1

    def _invalid(self, tp: TopicPartition, target: list[int]) -> str | None:
        if tp.topic not in self.ctx.all_topics or tp.partition not in self.ctx.assignments.get(tp.topic, {}):
            return "the partition does not exist"
        if self.controller.deletion.is_topic_queued_up_for_deletion(tp.topic):
            return "the topic is being deleted"
        if not target:
            return "the target replica list is empty"
        if len(set(target)) != len(target):
            return "the target replica list has duplicates"
        return None

    async def _start(self, tp: TopicPartition, target: tuple[int, ...]) -> None:
        current = self.ctx.partition_full_replica_assignment(tp)
        if target == current.replicas:
            log.info("Partition %s already has replicas %s; nothing to reassign", tp, list(target))
            await self._forget_request(tp)
            return
        full = tuple(dict.fromkeys(target + current.replicas))
        adding = tuple(r for r in target if r not in current.replicas)
        removing = tuple(r for r in current.replicas if r not in target)
        assignment = ReplicaAssignment(full, adding, removing)
        self.ctx.update_partition_full_replica_assignment(tp, assignment)
        self.ctx.partitions_being_reassigned.add(tp)
        await self._write_topic_assignment(tp.topic)
        self.controller.deletion.mark_topic_ineligible_for_deletion({tp.topic}, "partition reassignment in progress")
        self.controller.logger.info(
            f"Reassigning partition {tp} from [{','.join(map(str, current.replicas))}] to "
            f"[{','.join(map(str, target))}]: adding {list(adding)}, removing {list(removing)}")
        await self.controller.replica_sm.handle_state_changes(
            [PartitionAndReplica(tp.topic, tp.partition, r) for r in adding], ReplicaState.NEW)
        await self._bump_epoch_and_send(tp, assignment, list(full))

    async def _bump_epoch_and_send(self, tp: TopicPartition, assignment: ReplicaAssignment,
                                   recipients: list[int]) -> None:
        """A new leader epoch with the new replica set, so every replica hears of it."""
        state = self.ctx.leadership.get(tp)
        if state is None:
            return
        isr = tuple(r for r in state.isr if r in assignment.replicas) or state.isr
        proposed = LeaderAndIsr(state.leader, state.leader_epoch + 1, isr, self.ctx.epoch, state.zk_version)
        written = await self.controller.zk.update_partition_states({tp: proposed}, self.ctx.epoch_zk_version)
        result = written[tp]
        if isinstance(result, Exception):
            log.error("Could not bump the leader epoch of %s for its reassignment: %r", tp, result)
            return
        self.ctx.leadership[tp] = result
        batch = self.controller.batch
        batch.new_batch()
        batch.add_leader_and_isr_request_for_brokers(recipients, tp, result, assignment, is_new=False)
        await batch.send_requests_to_brokers(self.ctx.epoch)

    # ------------------------------------------------------------------ ZooKeeper

    async def _write_topic_assignment(self, topic: str) -> None:
        zk = self.controller.zk
        for _ in range(3):
            entry = await zk.get_topic_assignment(topic)
            if entry is None:
                return
            current, version = entry
            parts = self.ctx.assignments.get(topic, {})
            updated = TopicAssignment(
                {p: list(a.replicas) for p, a in parts.items()}, current.topic_id,
                {p: list(a.adding_replicas) for p, a in parts.items() if a.adding_replicas},
                {p: list(a.removing_replicas) for p, a in parts.items() if a.removing_replicas})
            out = await zk.fenced_multi(self.ctx.epoch_zk_version, lambda tx, u=updated, v=version: tx.set_data(
                TopicZNode.path(topic), TopicZNode.encode(u), v))
            if not isinstance(out[0], Exception):
                return
        log.error("Could not write the reassigned assignment of topic %s", topic)

    async def _forget_request(self, tp: TopicPartition) -> None:
        """Drop a partition from ``/admin/reassign_partitions`` (the znode goes when empty)."""
        zk = self.controller.zk
        for _ in range(5):
            got = await zk.get(ReassignPartitionsZNode.path)
            if got is None:
                return
            data, stat = got
            requested = ReassignPartitionsZNode.decode(data)
            if (tp.topic, tp.partition) not in requested:
                return
            del requested[(tp.topic, tp.partition)]
            if requested:
                out = await zk.fenced_multi(self.ctx.epoch_zk_version, lambda tx, r=requested, v=stat.version: tx.set_data(
                    ReassignPartitionsZNode.path, ReassignPartitionsZNode.encode(r), v))
            else:
                out = await zk.fenced_multi(self.ctx.epoch_zk_version, lambda tx, v=stat.version: tx.delete(
                    ReassignPartitionsZNode.path, v))
            if not isinstance(out[0], Exception) or isinstance(out[0], NoNodeError):
                return
        log.error("Could not remove %s from %s", tp, ReassignPartitionsZNode.path)
