"""Partition reassignment (Kafka's ZooKeeper-mode KafkaController.onPartitionReassignment,
KIP-455): requested by AlterPartitionReassignments or through ``/admin/reassign_partitions``.

For a partition with origin replicas ORS and target replicas TRS, the assignment becomes
RS = TRS + ORS with AR = TRS - ORS being added and RR = ORS - TRS being removed
(``ReplicaAssignment.reassign_to``); it is written to the topic znode's ``partitions``,
``adding_replicas`` and ``removing_replicas``, so a new controller resumes it.  Then:

1. While TRS is not all in the ISR: AR become NewReplica, and every replica in RS gets
   LeaderAndIsr at a bumped leader epoch, so the new replicas start fetching.
2. Once TRS is in the ISR (the ISR grows through AlterPartition): AR become OnlineReplica,
   leadership moves into TRS if the leader is leaving or offline (else the epoch is bumped so
   every replica hears RS = TRS), RR go Offline and through deletion (StopReplica with
   delete), TRS is written as the assignment, the partition leaves ``/admin/reassign_partitions``
   and the new metadata is published.

A new target for a partition being reassigned starts again from its origin replicas (replicas
added earlier and not in the new target are stopped and deleted at once); cancelling (a null
target) is reassigning to the origin replicas.  While a topic has partitions being reassigned
it is ineligible for deletion.

The ZooKeeper side effects go through ``ReassignmentClient``, so the steps above can be
tested with fakes; ``ZkReassignmentClient`` is the real one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from kazoo.protocol.states import WatchedEvent

from odradek.common import TopicPartition
from odradek.controller.channel import ControllerBrokerRequestBatch
from odradek.controller.context import ControllerContext, PartitionAndReplica, ReplicaAssignment
from odradek.controller.leader_selectors import ElectionType
from odradek.controller.partition_state_machine import PartitionState, PartitionStateMachine
from odradek.controller.replica_state_machine import ReplicaState, ReplicaStateMachine
from odradek.controller.topic_deletion import TopicDeletionManager
from odradek.protocol.errors import ApiError, ErrorCode
from odradek.state_change_log import StateChangeLogger
from odradek.zk.client import ControllerMovedError, KafkaZkClient, NoNodeError
from odradek.zk.zk_data import LeaderAndIsr, ReassignPartitionsZNode, TopicAssignment, TopicZNode

log = logging.getLogger(__name__)

__all__ = ["ReassignmentClient", "ReassignmentManager", "ZkReassignmentClient"]

REASSIGNMENT_IN_PROGRESS = "partition reassignment in progress"
_OK = ApiError(ErrorCode.none)
_NOT_FOUND = ApiError(ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
_NOT_REASSIGNING = ApiError(ErrorCode.no_reassignment_in_progress)


class ReassignmentClient(Protocol):
    """The reassignment's side effects outside the controller's memory."""

    async def read_requests(self) -> dict[TopicPartition, tuple[int, ...]]:
        """The partitions ``/admin/reassign_partitions`` asks to move (empty if it is absent),
        watching the znode for the next request."""
        ...

    async def remove_requests(self, partitions: Mapping[TopicPartition, tuple[int, ...] | None]) -> None:
        """Drop partitions from ``/admin/reassign_partitions`` (the znode goes when empty): each
        one named, if its target is the replicas given with it (or whatever it is, for None)."""
        ...

    async def write_assignment(self, topic: str, partitions: Mapping[int, ReplicaAssignment]) -> None:
        """Store a topic's replica assignment (with the replicas being added and removed)."""
        ...

    async def update_leader_and_isr(self, tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr | Exception:
        """Conditionally write a partition's state; the written state or why it failed."""
        ...


def _scala_seq(replicas: Iterable[int], name: str = "ArrayBuffer") -> str:
    """A replica list as Kafka's messages print it (a Scala collection's toString)."""
    return f"{name}({', '.join(map(str, replicas))})"


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
        """On failover: requests in ``/admin/reassign_partitions`` start, and partitions whose
        topic znode records a reassignment resume (Kafka's initializePartitionReassignments)."""
        for tp in self.ctx.all_partitions():
            if self.ctx.partition_full_replica_assignment(tp).is_being_reassigned:
                self.ctx.partitions_being_reassigned.add(tp)
        started = await self.on_request_znode()
        for tp in sorted(self.ctx.partitions_being_reassigned - started):
            await self._on_partition_reassignment(tp, self.ctx.partition_full_replica_assignment(tp))

    async def on_request_znode(self) -> set[TopicPartition]:
        """``/admin/reassign_partitions`` was created: start what it asks (a request that cannot
        start is dropped from it).  Returns the partitions started."""
        requested = await self.client.read_requests()
        results: dict[TopicPartition, ApiError] = {}
        moves: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in sorted(requested.items()):
            current = self.ctx.partition_full_replica_assignment(tp)
            if tp in self.ctx.partitions_being_reassigned and current.target_replicas == target:
                continue  # already under way (the znode changed because another one finished)
            if not target or len(set(target)) != len(target):
                results[tp] = ApiError(ErrorCode.invalid_replica_assignment, f"bad target replicas {list(target)}")
                continue
            moves[tp] = current.reassign_to(target)
        results.update(await self._trigger(moves))
        failed = {tp: error for tp, error in results.items() if not error.is_success}
        if failed:
            log.warning("Failed reassignment through zk with the following errors: %s",
                        {f"{tp.topic}-{tp.partition}": e.error.name for tp, e in sorted(failed.items())})
            await self.client.remove_requests(dict.fromkeys(failed))
        return {tp for tp, error in results.items() if error.is_success}

    async def alter_partition_reassignments(self, reassignments: Mapping[TopicPartition, tuple[int, ...] | None],
                                            allow_replication_factor_change: bool = True
                                            ) -> dict[TopicPartition, ApiError]:
        """AlterPartitionReassignments: start, change or (a None target) cancel each
        partition's reassignment (Kafka's processApiPartitionReassignment)."""
        results: dict[TopicPartition, ApiError] = {}
        moves: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in reassignments.items():
            current = self.ctx.partition_full_replica_assignment(tp)
            if target is not None:
                problem = self._validate_replicas(current, target, allow_replication_factor_change)
                if problem is not None:
                    results[tp] = problem
                    continue
                moves[tp] = current.reassign_to(target)
            elif current.is_being_reassigned:
                moves[tp] = current.reassign_to(current.origin_replicas)
            else:
                results[tp] = _NOT_REASSIGNING
        # The latest request wins: a partition it moves leaves /admin/reassign_partitions.
        if moves:
            await self.client.remove_requests(dict.fromkeys(moves))
        results.update(await self._trigger(moves))
        return results

    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None
                                     ) -> dict[TopicPartition, ReplicaAssignment]:
        """ListPartitionReassignments: the named partitions (None: all) being reassigned."""
        wanted = self.ctx.partitions_being_reassigned if partitions is None else partitions
        found = {tp: self.ctx.partition_full_replica_assignment(tp) for tp in wanted}
        return {tp: a for tp, a in found.items() if a.is_being_reassigned}

    async def maybe_complete(self, tp: TopicPartition) -> None:
        """The ISR (or the brokers) of a partition being reassigned changed: complete the
        reassignment once every target replica is in the ISR."""
        if tp not in self.ctx.partitions_being_reassigned:
            return
        assignment = self.ctx.partition_full_replica_assignment(tp)
        if self._is_complete(tp, assignment):
            await self._on_partition_reassignment(tp, assignment)

    # ------------------------------------------------------------------ validation

    def _validate_replicas(self, current: ReplicaAssignment, target: tuple[int, ...],
                           allow_replication_factor_change: bool) -> ApiError | None:
        """Kafka's KafkaController.validateReplicas, with its messages."""
        if not target:
            return ApiError(ErrorCode.invalid_replica_assignment,
                            "Empty replica list specified in partition reassignment.")
        if len(set(target)) != len(target):
            return ApiError(ErrorCode.invalid_replica_assignment,
                            f"Duplicate replica ids in partition reassignment replica list: {_scala_seq(target)}")
        if any(r < 0 for r in target):
            return ApiError(ErrorCode.invalid_replica_assignment,
                            f"Invalid broker id in replica list: {_scala_seq(target)}")
        origin = current.origin_replicas
        if not allow_replication_factor_change and origin and len(origin) != len(target):
            return ApiError(ErrorCode.invalid_replication_factor,
                            f"The replication factor is changed from {len(origin)} to {len(target)}")
        adding = current.reassign_to(target).adding_replicas
        live = self.ctx.live_broker_ids
        if not set(adding) <= live:
            return ApiError(ErrorCode.invalid_replica_assignment,
                            f"Replica assignment has brokers that are not alive. Replica list: "
                            f"{_scala_seq(adding)}, live broker list: {_scala_seq(sorted(live), 'Set')}")
        return None

    # ------------------------------------------------------------------ the steps

    async def _trigger(self, moves: Mapping[TopicPartition, ReplicaAssignment]) -> dict[TopicPartition, ApiError]:
        """Start (or move on) each reassignment; the outcome of each (Kafka's
        maybeTriggerPartitionReassignment)."""
        results: dict[TopicPartition, ApiError] = {}
        for tp, assignment in sorted(moves.items()):
            if self.deletion.is_topic_queued_up_for_deletion(tp.topic):
                log.info("Skipping reassignment of %s since the topic is currently being deleted", tp)
                results[tp] = _NOT_FOUND
            elif not self.ctx.partition_replica_assignment(tp):
                results[tp] = _NOT_FOUND
            else:
                try:
                    await self._on_partition_reassignment(tp, assignment)
                except ControllerMovedError:
                    raise
                except Exception:
                    log.exception("Error completing reassignment of partition %s", tp)
                    results[tp] = ApiError(ErrorCode.unknown_server_error)
                    continue
                results[tp] = _OK
        return results

    async def _on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        self.deletion.mark_topic_ineligible_for_deletion({tp.topic}, REASSIGNMENT_IN_PROGRESS)
        await self._update_current_reassignment(tp, reassignment)
        if self._is_complete(tp, reassignment):
            await self._complete(tp, reassignment)
            return
        self._state_change_log.info(
            f"Reassigning partition {tp} from [{','.join(map(str, reassignment.origin_replicas))}] to "
            f"[{','.join(map(str, reassignment.target_replicas))}]: adding {list(reassignment.adding_replicas)}, "
            f"removing {list(reassignment.removing_replicas)}")
        await self.replica_sm.handle_state_changes(
            [PartitionAndReplica(tp.topic, tp.partition, r) for r in reassignment.adding_replicas], ReplicaState.NEW)
        await self._bump_epoch_and_send(tp, reassignment)

    async def _update_current_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        """Record the reassignment (ZooKeeper, then memory); replicas an earlier one added that
        this one does not keep are stopped and deleted."""
        current = self.ctx.partition_full_replica_assignment(tp)
        if current != reassignment:
            self.ctx.update_partition_full_replica_assignment(tp, reassignment)
            await self.client.write_assignment(tp.topic, self.ctx.assignments.get(tp.topic, {}))
            unneeded = [r for r in current.replicas if r not in reassignment.replicas]
            if unneeded:
                await self._stop_removed_replicas(tp, unneeded)
        self.ctx.partitions_being_reassigned.add(tp)

    def _is_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        if not assignment.is_being_reassigned:
            return True
        state = self.ctx.leadership.get(tp)
        return state is not None and all(r in state.isr for r in assignment.target_replicas)

    async def _complete(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        """Phase 2: TRS is in the ISR."""
        target = reassignment.target_replicas
        await self.replica_sm.handle_state_changes(
            [PartitionAndReplica(tp.topic, tp.partition, r) for r in reassignment.adding_replicas],
            ReplicaState.ONLINE)
        final = ReplicaAssignment(target)
        self.ctx.update_partition_full_replica_assignment(tp, final)
        await self._move_leader_if_required(tp, final)
        await self._stop_removed_replicas(tp, reassignment.removing_replicas)
        await self.client.write_assignment(tp.topic, self.ctx.assignments.get(tp.topic, {}))
        self.ctx.partitions_being_reassigned.discard(tp)
        await self.client.remove_requests({tp: target})
        self.batch.new_batch()
        self.batch.add_update_metadata_request_for_brokers(self.ctx.live_or_shutting_down_broker_ids, [tp])
        await self.batch.send_requests_to_brokers(self.ctx.epoch)
        self._state_change_log.info(f"Completed reassignment of partition {tp} to replicas "
                                    f"[{','.join(map(str, target))}]")
        if self.deletion.is_topic_queued_up_for_deletion(tp.topic) and not any(
                p.topic == tp.topic for p in self.ctx.partitions_being_reassigned):
            await self.deletion.resume_deletion_for_topics({tp.topic})

    async def _move_leader_if_required(self, tp: TopicPartition, final: ReplicaAssignment) -> None:
        state = self.ctx.leadership.get(tp)
        if state is None:
            return
        if state.leader not in final.replicas or not self.ctx.is_replica_online(state.leader, tp):
            await self.partition_sm.handle_state_changes([tp], PartitionState.ONLINE, ElectionType.REASSIGN)
        else:
            await self._bump_epoch_and_send(tp, final)

    async def _stop_removed_replicas(self, tp: TopicPartition, removed: Iterable[int]) -> None:
        replicas = [PartitionAndReplica(tp.topic, tp.partition, r) for r in removed]
        if not replicas:
            return
        for step in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED, ReplicaState.DELETION_SUCCESSFUL,
                     ReplicaState.NON_EXISTENT):
            await self.replica_sm.handle_state_changes(replicas, step)

    async def _bump_epoch_and_send(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        """A new leader epoch with the new replica set, so every replica hears of it (the
        replicas being added as new ones, which may go to any healthy log directory)."""
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
        self.batch.add_leader_and_isr_request_for_brokers(assignment.origin_replicas, tp, result, assignment,
                                                          is_new=False)
        self.batch.add_leader_and_isr_request_for_brokers(assignment.adding_replicas, tp, result, assignment,
                                                          is_new=True)
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

    async def remove_requests(self, partitions: Mapping[TopicPartition, tuple[int, ...] | None]) -> None:
        for _ in range(5):
            got = await self.zk.get(ReassignPartitionsZNode.path)
            if got is None:
                return
            data, stat = got
            requested = ReassignPartitionsZNode.decode(data)
            drop = [(t, p) for (t, p), r in requested.items() if TopicPartition(t, p) in partitions
                    and partitions[TopicPartition(t, p)] in (None, tuple(r))]
            if not drop:
                return
            for key in drop:
                del requested[key]
            if requested:
                out = await self.zk.fenced_multi(self.ctx.epoch_zk_version, lambda tx, r=requested, v=stat.version:
                                                 tx.set_data(ReassignPartitionsZNode.path,
                                                             ReassignPartitionsZNode.encode(r), v))
            else:
                out = await self.zk.fenced_multi(self.ctx.epoch_zk_version, lambda tx, v=stat.version: tx.delete(
                    ReassignPartitionsZNode.path, v))
            if not isinstance(out[0], Exception) or isinstance(out[0], NoNodeError):
                return
        log.error("Could not remove %s from %s", sorted(partitions), ReassignPartitionsZNode.path)
