"""PartitionStateMachine: NonExistent -> New -> Online <-> Offline -> NonExistent.

The valid transitions are a table; an invalid one is refused and logged.  Moving a
partition Online either initializes its leader and ISR (a new partition: the first live
replica of the assignment leads, every live assigned replica is in the ISR) or elects a new
leader with one of the election algorithms.  Every ZooKeeper write is fenced by the
controller epoch; LeaderAndIsr / UpdateMetadata go out through the request batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from enum import Enum
from typing import TYPE_CHECKING

from odradek.common import TopicPartition
from odradek.controller.context import ControllerContext
from odradek.controller.leader_selectors import (
    ElectionResult,
    ElectionType,
    controlled_shutdown_election,
    offline_partition_election,
    preferred_replica_election,
    reassign_partition_election,
)
from odradek.state_change_log import StateChangeLogger
from odradek.zk.client import BadVersionError, KafkaZkClient
from odradek.zk.zk_data import LeaderAndIsr

if TYPE_CHECKING:
    from odradek.controller.channel import ControllerBrokerRequestBatch

log = logging.getLogger(__name__)

__all__ = ["VALID_PREVIOUS_STATES", "PartitionState", "PartitionStateMachine", "StateChangeFailed"]


class PartitionState(Enum):
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"
    NON_EXISTENT = "NonExistentPartition"

    def __str__(self) -> str:
        return self.value


VALID_PREVIOUS_STATES: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.NEW: frozenset({PartitionState.NON_EXISTENT}),
    PartitionState.ONLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.OFFLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.NON_EXISTENT: frozenset({PartitionState.OFFLINE}),
}


class StateChangeFailed(Exception):
    """A partition could not be moved to the target state (reason in the message)."""


class PartitionStateMachine:
    def __init__(self, broker_id: int, ctx: ControllerContext, zk: KafkaZkClient,
                 batch: ControllerBrokerRequestBatch, broker_unclean_election: bool) -> None:
        self.broker_id = broker_id
        self.ctx = ctx
        self.zk = zk
        self.batch = batch
        self.broker_unclean_election = broker_unclean_election
        self.states: dict[TopicPartition, PartitionState] = {}
        self.unclean_leader_elections = 0
        # Topics being deleted: their partitions are not brought online.
        self.topics_being_deleted: set[str] = set()
        self.logger = StateChangeLogger(broker_id, controller_epoch=0)

    # ------------------------------------------------------------------ start / stop

    async def startup(self) -> None:
        self.logger = StateChangeLogger(self.broker_id, controller_epoch=self.ctx.epoch)
        self.initialize_partition_states()
        await self.trigger_online_partition_state_change()

    def shutdown(self) -> None:
        self.states.clear()

    def initialize_partition_states(self) -> None:
        """New if no leader was ever written; Online if the leader is alive; else Offline."""
        for tp in self.ctx.all_partitions():
            state = self.ctx.leadership.get(tp)
            if state is None:
                self.states[tp] = PartitionState.NEW
            elif self.ctx.is_replica_online(state.leader, tp, include_shutting_down=True):
                self.states[tp] = PartitionState.ONLINE
            else:
                self.states[tp] = PartitionState.OFFLINE

    def state(self, tp: TopicPartition) -> PartitionState:
        return self.states.get(tp, PartitionState.NON_EXISTENT)

    def offline_partition_count(self) -> int:
        return sum(1 for tp, s in self.states.items()
                   if s in (PartitionState.OFFLINE, PartitionState.NEW) and tp.topic not in self.topics_being_deleted)

    async def trigger_online_partition_state_change(self, topic: str | None = None) -> dict[TopicPartition, Exception]:
        """Try to bring every New/Offline partition online (not those of topics being deleted)."""
        candidates = [
            tp for tp, s in self.states.items()
            if s in (PartitionState.NEW, PartitionState.OFFLINE)
            and tp.topic not in self.topics_being_deleted
            and (topic is None or tp.topic == topic)
        ]
        if not candidates:
            return {}
        return await self.handle_state_changes(candidates, PartitionState.ONLINE, ElectionType.OFFLINE)

    # ------------------------------------------------------------------ transitions

    async def handle_state_changes(self, partitions: Iterable[TopicPartition], target: PartitionState,
                                   election: ElectionType | None = None) -> dict[TopicPartition, Exception]:
        """Move ``partitions`` to ``target``; returns the partitions that failed and why."""
        partitions = list(partitions)
        if not partitions:
            return {}
        self.batch.new_batch()
        try:
            failed = await self._do_handle_state_changes(partitions, target, election)
        except BaseException:
            # A controller that just lost its seat (or hit a bug) sends nothing it collected.
            self.batch.clear()
            raise
        await self.batch.send_requests_to_brokers(self.ctx.epoch)
        return failed

    async def _do_handle_state_changes(self, partitions: list[TopicPartition], target: PartitionState,
                                       election: ElectionType | None) -> dict[TopicPartition, Exception]:
        failed: dict[TopicPartition, Exception] = {}
        valid: list[TopicPartition] = []
        for tp in partitions:
            current = self.state(tp)
            if current in VALID_PREVIOUS_STATES[target]:
                valid.append(tp)
            else:
                msg = (f"Invalid state transition for partition {tp}: {current} -> {target}; "
                       f"valid previous states are {', '.join(sorted(map(str, VALID_PREVIOUS_STATES[target])))}")
                self.logger.error(msg)
                failed[tp] = StateChangeFailed(msg)
        if target is PartitionState.NEW:
            for tp in valid:
                self._set(tp, target)
        elif target is PartitionState.ONLINE:
            uninitialized = [tp for tp in valid if self.state(tp) is PartitionState.NEW]
            ready = [tp for tp in valid if self.state(tp) is not PartitionState.NEW]
            if uninitialized:
                done, errors = await self._initialize_leader_and_isr(uninitialized)
                failed.update(errors)
                for tp in done:
                    self._set(tp, target, self.ctx.leadership.get(tp))
            if ready:
                done, errors = await self.elect_leaders(ready, election or ElectionType.OFFLINE)
                failed.update(errors)
                for tp in done:
                    self._set(tp, target, self.ctx.leadership.get(tp))
        elif target is PartitionState.OFFLINE:
            for tp in valid:
                self._set(tp, target)
        elif target is PartitionState.NON_EXISTENT:
            for tp in valid:
                self._set(tp, target)
                self.states.pop(tp, None)
        return failed

    def _set(self, tp: TopicPartition, target: PartitionState, leadership: LeaderAndIsr | None = None) -> None:
        previous = self.state(tp)
        self.states[tp] = target
        suffix = f" with state {_fmt(leadership)}" if leadership is not None else ""
        self.logger.info(f"Changed partition {tp} state from {previous} to {target}{suffix}")

    async def _initialize_leader_and_isr(self, partitions: list[TopicPartition]
                                         ) -> tuple[list[TopicPartition], dict[TopicPartition, Exception]]:
        failed: dict[TopicPartition, Exception] = {}
        proposed: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in partitions:
            replicas = self.ctx.partition_replica_assignment(tp)
            live = [r for r in replicas if self.ctx.is_replica_online(r, tp)]
            if not live:
                msg = (f"Encountered error during state change of partition {tp} from New to Online, "
                       f"assigned replicas are [{','.join(map(str, replicas))}], live brokers are "
                       f"[{','.join(map(str, sorted(self.ctx.live_broker_ids)))}]. No assigned replica is alive.")
                self.logger.error(msg)
                failed[tp] = StateChangeFailed(msg)
                continue
            proposed[tp] = LeaderAndIsr(live[0], 0, tuple(live), self.ctx.epoch)
        if not proposed:
            return [], failed
        results = await self.zk.create_partition_states(proposed, self.ctx.epoch_zk_version)
        done = []
        for tp, result in results.items():
            if isinstance(result, Exception):
                msg = f"Failed to initialize leader and ISR of partition {tp} in ZooKeeper: {result!r}"
                self.logger.error(msg)
                failed[tp] = StateChangeFailed(msg)
                continue
            self.ctx.leadership[tp] = result
            assignment = self.ctx.partition_full_replica_assignment(tp)
            self.batch.add_leader_and_isr_request_for_brokers(result.isr, tp, result, assignment, is_new=True)
            done.append(tp)
        return done, failed

    async def elect_leaders(self, partitions: list[TopicPartition], election: ElectionType
                            ) -> tuple[list[TopicPartition], dict[TopicPartition, Exception]]:
        """Elect and write new leaders.  Uses the cached states (the controller is their only
        writer); a conditional write that finds a newer version re-reads and retries once."""
        done: list[TopicPartition] = []
        failed: dict[TopicPartition, Exception] = {}
        pending = list(partitions)
        for attempt in range(2):
            if attempt:
                fresh = await self.zk.get_partition_states(pending)
                self.ctx.leadership.update(fresh)
            unclean_topics = await self._unclean_topics(pending, election)
            proposed: dict[TopicPartition, LeaderAndIsr] = {}
            unclean: set[TopicPartition] = set()
            for tp in pending:
                current = self.ctx.leadership.get(tp)
                if current is None:
                    failed[tp] = StateChangeFailed(f"partition {tp} has no leader and ISR state in ZooKeeper")
                    continue
                if current.controller_epoch > self.ctx.epoch:
                    failed[tp] = StateChangeFailed(
                        f"Aborted leader election for partition {tp}: its state was written by a newer "
                        f"controller (epoch {current.controller_epoch} > {self.ctx.epoch})")
                    continue
                result = self._elect(tp, current, election, tp.topic in unclean_topics)
                if result.leader is None:
                    failed[tp] = StateChangeFailed(
                        f"Failed to elect leader for partition {tp} under strategy {election.value}: "
                        f"no live replica in the ISR [{','.join(map(str, current.isr))}]"
                        + ("" if tp.topic in unclean_topics else " and unclean leader election is disabled"))
                    continue
                if result.unclean:
                    unclean.add(tp)
                proposed[tp] = LeaderAndIsr(result.leader, current.leader_epoch + 1, result.isr,
                                            self.ctx.epoch, current.zk_version)
            results = await self.zk.update_partition_states(proposed, self.ctx.epoch_zk_version) if proposed else {}
            retry = []
            for tp, res in results.items():
                if isinstance(res, Exception):
                    if attempt == 0 and isinstance(res, BadVersionError):
                        retry.append(tp)
                    else:
                        failed[tp] = StateChangeFailed(f"Failed to write leader of partition {tp}: {res!r}")
                    continue
                self.ctx.leadership[tp] = res
                if tp in unclean:
                    self.unclean_leader_elections += 1  # UncleanLeaderElectionsPerSec
                    self.logger.warn(
                        f"Unclean leader election for partition {tp}: broker {res.leader} was not in the ISR "
                        f"and becomes leader; records acknowledged by the old ISR may be lost")
                recipients = self.ctx.partition_replica_assignment(tp)
                assignment = self.ctx.partition_full_replica_assignment(tp)
                self.batch.add_leader_and_isr_request_for_brokers(recipients, tp, res, assignment, is_new=False)
                done.append(tp)
            if not retry:
                break
            pending = retry
        for err in failed.values():
            self.logger.error(str(err))
        return done, failed

    def _elect(self, tp: TopicPartition, current: LeaderAndIsr, election: ElectionType,
               unclean_enabled: bool) -> ElectionResult:
        full = self.ctx.partition_full_replica_assignment(tp)
        live = [r for r in full.replicas if self.ctx.is_replica_online(r, tp)]
        if election in (ElectionType.OFFLINE, ElectionType.UNCLEAN):
            return offline_partition_election(full.replicas, current.isr, live, unclean_enabled)
        if election is ElectionType.REASSIGN:
            return reassign_partition_election(full.target_replicas, current.isr, live)
        if election is ElectionType.PREFERRED:
            return preferred_replica_election(full.replicas, current.isr, live)
        live_incl_shutting = [r for r in full.replicas if self.ctx.is_replica_online(r, tp, include_shutting_down=True)]
        return controlled_shutdown_election(full.replicas, current.isr, live_incl_shutting,
                                            self.ctx.shutting_down_broker_ids)

    async def _unclean_topics(self, partitions: list[TopicPartition], election: ElectionType) -> set[str]:
        """Topics among ``partitions`` that allow unclean election, reading their config only
        when a partition actually lacks a live in-sync replica (as Kafka does).  An UNCLEAN
        election allows it everywhere."""
        if election is ElectionType.UNCLEAN:
            return {tp.topic for tp in partitions}
        if election is not ElectionType.OFFLINE:
            return set()
        needy: set[str] = set()
        for tp in partitions:
            current = self.ctx.leadership.get(tp)
            if current is None:
                continue
            if not any(self.ctx.is_replica_online(r, tp) for r in current.isr):
                needy.add(tp.topic)
        if not needy:
            return set()
        configs = await self.zk.get_topic_configs(needy)
        unclean = set()
        for topic, config in configs.items():
            value = config.get("unclean.leader.election.enable")
            enabled = self.broker_unclean_election if value is None else value.strip().lower() == "true"
            if enabled:
                unclean.add(topic)
        return unclean


def _fmt(state: LeaderAndIsr | None) -> str:
    if state is None:
        return "none"
    return (f"LeaderAndIsr(leader={state.leader}, leaderEpoch={state.leader_epoch}, "
            f"isr=[{','.join(map(str, state.isr))}], zkVersion={state.zk_version}, "
            f"controllerEpoch={state.controller_epoch})")
