"""Partition reassignment through ``/admin/reassign_partitions`` (Kafka's ZooKeeper-mode flow,
KafkaController.onPartitionReassignment).

For a partition with original replicas ORS and target replicas TRS:

1. Write the topic znode with the full replica set RS = TRS + ORS and the replicas being
   added (AR = TRS - ORS) and removed (RR = ORS - TRS); make AR NewReplica; bump the leader
   epoch and send LeaderAndIsr with RS to every replica in RS, so the new replicas start
   fetching.
2. Once every target replica is in the ISR (the ISR grows through AlterPartition): make TRS
   OnlineReplica, move leadership into TRS if the leader is leaving or offline (else bump
   the epoch so every replica hears of RS = TRS), take RR Offline and through deletion
   (StopReplica with delete), write TRS as the assignment, remove the partition from
   ``/admin/reassign_partitions`` and publish the new metadata.

While a topic has partitions being reassigned it is ineligible for deletion.

The ZooKeeper side effects go through ``ReassignmentClient``, so the steps above can be
tested with fakes; ``ZkReassignmentClient`` is the real one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from kazoo.protocol.states import WatchedEvent

from odradek.common import TopicPartition
from odradek.controller.channel import ControllerBrokerRequestBatch
from odradek.controller.context import ControllerContext, PartitionAndReplica, ReplicaAssignment
from odradek.controller.leader_selectors import ElectionType
from odradek.controller.partition_state_machine import PartitionState, PartitionStateMachine
from odradek.controller.replica_state_machine import ReplicaState, ReplicaStateMachine
from odradek.controller.topic_deletion import TopicDeletionManager
from odradek.state_change_log import StateChangeLogger
from odradek.zk.client import KafkaZkClient, NoNodeError
from odradek.zk.zk_data import LeaderAndIsr, ReassignPartitionsZNode, TopicAssignment, TopicZNode

log = logging.getLogger(__name__)

__all__ = ["ReassignmentClient", "ReassignmentManager", "ZkReassignmentClient"]

REASSIGNMENT_IN_PROGRESS = "partition reassignment in progress"


class ReassignmentClient(Protocol):
    """The reassignment's side effects outside the controller's memory."""

    async def read_requests(self) -> dict[TopicPartition, tuple[int, ...]]:
        """The partitions ``/admin/reassign_partitions`` asks to move (empty if it is absent),
        watching the znode for the next request."""
        ...

    async def remove_request(self, tp: TopicPartition) -> None:
        """Drop one partition from ``/admin/reassign_partitions`` (the znode goes when empty)."""
        ...

    async def write_assignment(self, topic: str, partitions: Mapping[int, ReplicaAssignment]) -> None:
        """Store a topic's replica assignment (with the replicas being added and removed)."""
        ...

    async def update_leader_and_isr(self, tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr | Exception:
        """Conditionally write a partition's state; the written state or why it failed."""
        ...


class ReassignmentManager:
    def __init__(self, controller_id: int, ctx: ControllerContext, replica_sm: ReplicaStateMachine,
                 partition_sm: PartitionStateMachine, batch: ControllerBrokerRequestBatch,
                 deletion: TopicDeletionManager, client: ReassignmentClient) -> None:
        self.controller_id = controller_id
        self.ctx = ctx
        self.replica_sm = replica_sm
        self.partition_sm = partition_sm
        self.batch = batch
        self.deletion = deletion
        self.client = client

    @property
    def _state_change_log(self) -> StateChangeLogger:
        return StateChangeLogger(self.controller_id, controller_epoch=self.ctx.epoch)

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
        requested = await self.client.read_requests()
        for tp, target in sorted(requested.items()):
            if tp in self.ctx.partitions_being_reassigned:
                continue
            problem = self._invalid(tp, target)
            if problem:
                log.error("Skipping reassignment of %s to %s: %s", tp, list(target), problem)
                await self.client.remove_request(tp)
                continue
            await self._start(tp, target)
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
        await self.replica_sm.handle_state_changes(
            [PartitionAndReplica(tp.topic, tp.partition, r) for r in target], ReplicaState.ONLINE)
        final = ReplicaAssignment(target)
        self.ctx.update_partition_full_replica_assignment(tp, final)
        if state.leader not in target or not self.ctx.is_replica_online(state.leader, tp):
            await self.partition_sm.handle_state_changes([tp], PartitionState.ONLINE, ElectionType.REASSIGN)
        else:
            await self._bump_epoch_and_send(tp, final, list(target))
        replicas = [PartitionAndReplica(tp.topic, tp.partition, r) for r in removing]
        for step in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED, ReplicaState.DELETION_SUCCESSFUL,
                     ReplicaState.NON_EXISTENT):
            await self.replica_sm.handle_state_changes(replicas, step)
        await self.client.write_assignment(tp.topic, self.ctx.assignments.get(tp.topic, {}))
        self.ctx.partitions_being_reassigned.discard(tp)
        await self.client.remove_request(tp)
        self.batch.new_batch()
        self.batch.add_update_metadata_request_for_brokers(self.ctx.live_or_shutting_down_broker_ids, [tp])
        await self.batch.send_requests_to_brokers(self.ctx.epoch)
        self._state_change_log.info(f"Completed reassignment of partition {tp} to replicas "
                                    f"[{','.join(map(str, target))}]")
        if self.deletion.is_topic_queued_up_for_deletion(tp.topic) and not any(
                p.topic == tp.topic for p in self.ctx.partitions_being_reassigned):
            await self.deletion.resume_deletion_for_topics({tp.topic})

    # ------------------------------------------------------------------ phase 1

    def _invalid(self, tp: TopicPartition, target: tuple[int, ...]) -> str | None:
        if tp.topic not in self.ctx.all_topics or tp.partition not in self.ctx.assignments.get(tp.topic, {}):
            return "the partition does not exist"
        if self.deletion.is_topic_queued_up_for_deletion(tp.topic):
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
            await self.client.remove_request(tp)
            return
        full = tuple(dict.fromkeys(target + current.replicas))
        adding = tuple(r for r in target if r not in current.replicas)
        removing = tuple(r for r in current.replicas if r not in target)
        assignment = ReplicaAssignment(full, adding, removing)
        self.ctx.update_partition_full_replica_assignment(tp, assignment)
        self.ctx.partitions_being_reassigned.add(tp)
        await self.client.write_assignment(tp.topic, self.ctx.assignments.get(tp.topic, {}))
        self.deletion.mark_topic_ineligible_for_deletion({tp.topic}, REASSIGNMENT_IN_PROGRESS)
        self._state_change_log.info(
            f"Reassigning partition {tp} from [{','.join(map(str, current.replicas))}] to "
            f"[{','.join(map(str, target))}]: adding {list(adding)}, removing {list(removing)}")
        await self.replica_sm.handle_state_changes(
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
        result = await self.client.update_leader_and_isr(tp, proposed)
        if isinstance(result, Exception):
            log.error("Could not bump the leader epoch of %s for its reassignment: %r", tp, result)
            return
        self.ctx.leadership[tp] = result
        self.batch.new_batch()
        self.batch.add_leader_and_isr_request_for_brokers(recipients, tp, result, assignment, is_new=False)
        await self.batch.send_requests_to_brokers(self.ctx.epoch)


class ZkReassignmentClient:
    """ReassignmentClient over ZooKeeper; every write is fenced by ``/controller_epoch``."""

    def __init__(self, zk: KafkaZkClient, ctx: ControllerContext,
                 on_request_change: Callable[[WatchedEvent], None]) -> None:
        self.zk = zk
        self.ctx = ctx
        self.on_request_change = on_request_change

    async def read_requests(self) -> dict[TopicPartition, tuple[int, ...]]:
        got = await self.zk.get(ReassignPartitionsZNode.path, watch=self.on_request_change)
        if got is None:
            await self.zk.exists(ReassignPartitionsZNode.path, watch=self.on_request_change)
            return {}
        return {TopicPartition(t, p): tuple(r) for (t, p), r in ReassignPartitionsZNode.decode(got[0]).items()}

    async def update_leader_and_isr(self, tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr | Exception:
        written = await self.zk.update_partition_states({tp: state}, self.ctx.epoch_zk_version)
        return written[tp]

    async def write_assignment(self, topic: str, partitions: Mapping[int, ReplicaAssignment]) -> None:
        for _ in range(3):
            entry = await self.zk.get_topic_assignment(topic)
            if entry is None:
                return
            current, version = entry
            updated = TopicAssignment(
                {p: list(a.replicas) for p, a in partitions.items()}, current.topic_id,
                {p: list(a.adding_replicas) for p, a in partitions.items() if a.adding_replicas},
                {p: list(a.removing_replicas) for p, a in partitions.items() if a.removing_replicas})
            out = await self.zk.fenced_multi(self.ctx.epoch_zk_version, lambda tx, u=updated, v=version: tx.set_data(
                TopicZNode.path(topic), TopicZNode.encode(u), v))
            if not isinstance(out[0], Exception):
                return
        log.error("Could not write the reassigned assignment of topic %s", topic)

    async def remove_request(self, tp: TopicPartition) -> None:
        for _ in range(5):
            got = await self.zk.get(ReassignPartitionsZNode.path)
            if got is None:
                return
            data, stat = got
            requested = ReassignPartitionsZNode.decode(data)
            if (tp.topic, tp.partition) not in requested:
                return
            del requested[(tp.topic, tp.partition)]
            if requested:
                out = await self.zk.fenced_multi(self.ctx.epoch_zk_version, lambda tx, r=requested, v=stat.version:
                                                 tx.set_data(ReassignPartitionsZNode.path,
                                                             ReassignPartitionsZNode.encode(r), v))
            else:
                out = await self.zk.fenced_multi(self.ctx.epoch_zk_version, lambda tx, v=stat.version: tx.delete(
                    ReassignPartitionsZNode.path, v))
            if not isinstance(out[0], Exception) or isinstance(out[0], NoNodeError):
                return
        log.error("Could not remove %s from %s", tp, ReassignPartitionsZNode.path)
