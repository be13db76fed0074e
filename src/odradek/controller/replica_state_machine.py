"""ReplicaStateMachine: the life of one replica (a partition on one broker).

    NonExistent -> New -> Online <-> Offline -> DeletionStarted -> DeletionSuccessful -> NonExistent
                                      ^                 |
                                      +-- DeletionIneligible <-+

The valid previous states are a table, and so is what each target state does (one method
each); an invalid transition is refused and logged.  Going Offline stops the replica
(StopReplica without delete) and removes it from its partitions' ISR in ZooKeeper.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from enum import Enum
from typing import TYPE_CHECKING

from odradek.common import TopicPartition
from odradek.controller.context import ControllerContext, PartitionAndReplica
from odradek.state_change_log import StateChangeLogger
from odradek.zk.zk_data import LeaderAndIsr

if TYPE_CHECKING:
    from odradek.controller.channel import ControllerBrokerRequestBatch
    from odradek.zk.client import KafkaZkClient

log = logging.getLogger(__name__)

__all__ = ["VALID_PREVIOUS_REPLICA_STATES", "ReplicaState", "ReplicaStateMachine"]


class ReplicaState(Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"

    def __str__(self) -> str:
        return self.value


_S = ReplicaState
VALID_PREVIOUS_REPLICA_STATES: dict[ReplicaState, frozenset[ReplicaState]] = {
    _S.NEW: frozenset({_S.NON_EXISTENT}),
    _S.ONLINE: frozenset({_S.NEW, _S.ONLINE, _S.OFFLINE, _S.DELETION_INELIGIBLE}),
    _S.OFFLINE: frozenset({_S.NEW, _S.ONLINE, _S.OFFLINE, _S.DELETION_INELIGIBLE}),
    _S.DELETION_STARTED: frozenset({_S.OFFLINE}),
    _S.DELETION_SUCCESSFUL: frozenset({_S.DELETION_STARTED}),
    _S.DELETION_INELIGIBLE: frozenset({_S.OFFLINE, _S.DELETION_STARTED}),
    _S.NON_EXISTENT: frozenset({_S.DELETION_SUCCESSFUL}),
}


class ReplicaStateMachine:
    def __init__(self, broker_id: int, ctx: ControllerContext, zk: KafkaZkClient,
                 batch: ControllerBrokerRequestBatch) -> None:
        self.broker_id = broker_id
        self.ctx = ctx
        self.zk = zk
        self.batch = batch
        self.states: dict[PartitionAndReplica, ReplicaState] = {}
        self.topics_being_deleted: set[str] = set()
        self.logger = StateChangeLogger(broker_id, controller_epoch=0)
        # What moving replicas to each target state does (the valid previous states checked)
        self._transitions: dict[ReplicaState, Callable[[int, list[PartitionAndReplica]], Awaitable[None]]] = {
            ReplicaState.NEW: self._to_new,
            ReplicaState.ONLINE: self._to_online,
            ReplicaState.OFFLINE: self._to_offline,
            ReplicaState.DELETION_STARTED: self._to_deletion_started,
            ReplicaState.DELETION_SUCCESSFUL: self._to_deletion_successful,
            ReplicaState.DELETION_INELIGIBLE: self._to_deletion_ineligible,
            ReplicaState.NON_EXISTENT: self._to_non_existent,
        }

    async def startup(self) -> None:
        """Replicas on live brokers go Online (which sends every live replica its partition's
        current leader and ISR); replicas on dead brokers are DeletionIneligible, as Kafka."""
        self.logger = StateChangeLogger(self.broker_id, controller_epoch=self.ctx.epoch)
        online, offline = [], []
        for replica in self.ctx.replicas_for_partitions(self.ctx.all_partitions()):
            if self.ctx.is_replica_online(replica.replica, replica.topic_partition, include_shutting_down=True):
                self.states[replica] = ReplicaState.ONLINE
                online.append(replica)
            else:
                self.states[replica] = ReplicaState.DELETION_INELIGIBLE
                offline.append(replica)
        await self.handle_state_changes(online, ReplicaState.ONLINE)
        if offline:
            await self.handle_state_changes(offline, ReplicaState.OFFLINE)

    def shutdown(self) -> None:
        self.states.clear()

    def state(self, replica: PartitionAndReplica) -> ReplicaState:
        return self.states.get(replica, ReplicaState.NON_EXISTENT)

    def replicas_in_state(self, topic: str, state: ReplicaState) -> list[PartitionAndReplica]:
        return [r for r, s in self.states.items() if r.topic == topic and s is state]

    def are_all_replicas_for_topic_deleted(self, topic: str) -> bool:
        states = [s for r, s in self.states.items() if r.topic == topic]
        return all(s is ReplicaState.DELETION_SUCCESSFUL for s in states)

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return any(s is state for r, s in self.states.items() if r.topic == topic)

    async def handle_state_changes(self, replicas: Iterable[PartitionAndReplica], target: ReplicaState) -> None:
        replicas = list(replicas)
        if not replicas:
            return
        self.batch.new_batch()
        try:
            by_broker: dict[int, list[PartitionAndReplica]] = defaultdict(list)
            for r in replicas:
                by_broker[r.replica].append(r)
            for broker_id, rs in by_broker.items():
                await self._do_handle_state_changes(broker_id, rs, target)
        except BaseException:
            self.batch.clear()  # as in the partition state machine: send nothing on failure
            raise
        await self.batch.send_requests_to_brokers(self.ctx.epoch)

    async def _do_handle_state_changes(self, broker_id: int, replicas: list[PartitionAndReplica],
                                       target: ReplicaState) -> None:
        valid = []
        for r in replicas:
            current = self.state(r)
            if current in VALID_PREVIOUS_REPLICA_STATES[target]:
                valid.append(r)
            else:
                self.logger.error(
                    f"Invalid state transition for replica {r}: {current} -> {target}; valid previous "
                    f"states are {', '.join(sorted(map(str, VALID_PREVIOUS_REPLICA_STATES[target])))}")
        await self._transitions[target](broker_id, valid)

    # ------------------------------------------------------------------ one method per target state

    async def _to_new(self, broker_id: int, replicas: list[PartitionAndReplica]) -> None:
        """A new replica learns its partition's leader and ISR (if it has one), unless it is
        being asked to lead it."""
        for r in replicas:
            tp = r.topic_partition
            state = self.ctx.leadership.get(tp)
            if state is not None:
                if state.leader == broker_id:
                    self.logger.error(f"Replica {broker_id} for partition {tp} cannot be moved to NewReplica "
                                      "state as it is being requested to become leader")
                    continue
                self.batch.add_leader_and_isr_request_for_brokers(
                    [broker_id], tp, state, self.ctx.partition_full_replica_assignment(tp), is_new=True)
            self._set(r, ReplicaState.NEW)

    async def _to_online(self, broker_id: int, replicas: list[PartitionAndReplica]) -> None:
        """A new replica joins its partition's assignment; any other learns the partition's
        leader and ISR."""
        for r in replicas:
            tp = r.topic_partition
            if self.state(r) is ReplicaState.NEW:
                assignment = self.ctx.partition_full_replica_assignment(tp)
                if broker_id not in assignment.replicas:
                    self.ctx.update_partition_full_replica_assignment(
                        tp, type(assignment)((*assignment.replicas, broker_id)))
            else:
                state = self.ctx.leadership.get(tp)
                if state is not None:
                    self.batch.add_leader_and_isr_request_for_brokers(
                        [broker_id], tp, state, self.ctx.partition_full_replica_assignment(tp), is_new=False)
            self._set(r, ReplicaState.ONLINE)

    async def _to_offline(self, broker_id: int, replicas: list[PartitionAndReplica]) -> None:
        """The replicas stop (StopReplica without delete) and leave their partitions' ISR; the
        other replicas learn the new leader and ISR, every broker the partitions without one."""
        for r in replicas:
            self.batch.add_stop_replica_request_for_brokers([broker_id], r.topic_partition, delete_partition=False)
        with_leadership = [r.topic_partition for r in replicas if r.topic_partition in self.ctx.leadership]
        updated = await self.remove_replica_from_isr(broker_id, with_leadership)
        for tp, state in updated.items():
            if tp.topic not in self.topics_being_deleted:
                recipients = [b for b in self.ctx.partition_replica_assignment(tp) if b != broker_id]
                self.batch.add_leader_and_isr_request_for_brokers(
                    recipients, tp, state, self.ctx.partition_full_replica_assignment(tp), is_new=False)
        without = [r.topic_partition for r in replicas if r.topic_partition not in self.ctx.leadership]
        if without:
            self.batch.add_update_metadata_request_for_brokers(self.ctx.live_or_shutting_down_broker_ids, without)
        for r in replicas:
            self._set(r, ReplicaState.OFFLINE)

    async def _to_deletion_started(self, broker_id: int, replicas: list[PartitionAndReplica]) -> None:
        """The replicas are told to delete their logs (StopReplica with delete)."""
        for r in replicas:
            self._set(r, ReplicaState.DELETION_STARTED)
            self.batch.add_stop_replica_request_for_brokers([broker_id], r.topic_partition, delete_partition=True)

    async def _to_deletion_successful(self, broker_id: int, replicas: list[PartitionAndReplica]) -> None:
        for r in replicas:
            self._set(r, ReplicaState.DELETION_SUCCESSFUL)

    async def _to_deletion_ineligible(self, broker_id: int, replicas: list[PartitionAndReplica]) -> None:
        for r in replicas:
            self._set(r, ReplicaState.DELETION_INELIGIBLE)

    async def _to_non_existent(self, broker_id: int, replicas: list[PartitionAndReplica]) -> None:
        """The replicas leave their partitions' assignment and this state machine."""
        for r in replicas:
            tp = r.topic_partition
            self.ctx.update_partition_full_replica_assignment(
                tp, self.ctx.partition_full_replica_assignment(tp).remove_replica(broker_id))
            self._set(r, ReplicaState.NON_EXISTENT)
            self.states.pop(r, None)

    def _set(self, r: PartitionAndReplica, target: ReplicaState) -> None:
        previous = self.state(r)
        self.states[r] = target
        if previous is not target:
            self.logger.info(f"Changed state of replica {r.replica} for partition {r.topic_partition} "
                             f"from {previous} to {target}")

    async def remove_replica_from_isr(self, broker_id: int, partitions: list[TopicPartition]
                                      ) -> dict[TopicPartition, LeaderAndIsr]:
        """Drop ``broker_id`` from these partitions' ISR (and leadership) in ZooKeeper.

        As in Kafka, a partition whose ISR is only this broker keeps it, so that a clean
        election waits for that broker rather than electing a replica that may lack data.
        """
        proposed: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in partitions:
            current = self.ctx.leadership.get(tp)
            if current is None or (broker_id not in current.isr and current.leader != broker_id):
                continue
            leader = LeaderAndIsr.NO_LEADER if current.leader == broker_id else current.leader
            isr = current.isr if len(current.isr) == 1 else tuple(b for b in current.isr if b != broker_id)
            # Stamped with this controller's epoch, as every controller write (Kafka's
            # updateLeaderAndIsr); the cached state may have been written by an older one.
            proposed[tp] = LeaderAndIsr(leader, current.leader_epoch + 1, isr, self.ctx.epoch, current.zk_version)
        if not proposed:
            return {}
        results = await self.zk.update_partition_states(proposed, self.ctx.epoch_zk_version)
        updated = {}
        for tp, res in results.items():
            if isinstance(res, Exception):
                self.logger.error(f"Failed to remove replica {broker_id} from ISR of partition {tp}: {res!r}")
                continue
            self.ctx.leadership[tp] = res
            updated[tp] = res
        return updated
