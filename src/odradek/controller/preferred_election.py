"""Replica leader elections on request and the periodic auto leader rebalance (Kafka's
KafkaController.processReplicaLeaderElection, onReplicaElection and
checkAndTriggerAutoLeaderRebalance).

A request comes from ``/admin/preferred_replica_election`` (preferred elections; the znode is
deleted once done) or from an ElectLeaders request (KIP-460): PREFERRED moves leadership to
each partition's first replica, UNCLEAN elects a leader for partitions that have none, from
outside the ISR if it must.  A partition that already has the leader the election would give
it is answered ELECTION_NOT_NEEDED; one whose election finds no candidate
PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable

from kazoo.protocol.states import WatchedEvent

from odradek.common import TopicPartition
from odradek.controller.context import ControllerContext
from odradek.controller.events import ElectionTrigger, ReplicaLeaderElection
from odradek.controller.leader_selectors import ElectionType
from odradek.controller.partition_state_machine import PartitionState, PartitionStateMachine
from odradek.controller.topic_deletion import TopicDeletionManager
from odradek.protocol.errors import ApiError, ErrorCode
from odradek.zk.client import ControllerMovedError, KafkaZkClient
from odradek.zk.zk_data import LeaderAndIsr, PreferredReplicaElectionZNode

log = logging.getLogger(__name__)

__all__ = ["ElectionResults", "PreferredReplicaElection"]

# Per partition: its new leader, or why it has none.
ElectionResults = dict[TopicPartition, int | ApiError]

_NOT_FOUND = ApiError(ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
_BEING_DELETED = ApiError(ErrorCode.invalid_topic_exception, "The topic is being deleted")
_NOT_NEEDED = ApiError(ErrorCode.election_not_needed)
_NO_CANDIDATE = {ElectionType.PREFERRED: ErrorCode.preferred_leader_not_available,
                 ElectionType.UNCLEAN: ErrorCode.eligible_leaders_not_available}


class PreferredReplicaElection:
    def __init__(self, ctx: ControllerContext, zk: KafkaZkClient, partition_sm: PartitionStateMachine,
                 deletion: TopicDeletionManager, on_znode_change: Callable[[WatchedEvent], None]) -> None:
        self.ctx = ctx
        self.zk = zk
        self.partition_sm = partition_sm
        self.deletion = deletion
        self.on_znode_change = on_znode_change

    async def process(self, event: ReplicaLeaderElection) -> None:
        """Elect the leaders of the partitions the event names, or, without names, of those
        listed in ``/admin/preferred_replica_election`` (then delete the znode)."""
        if event.partitions is None:
            got = await self.zk.get(PreferredReplicaElectionZNode.path, watch=self.on_znode_change)
            if got is None:
                return
            partitions = {TopicPartition(t, p) for t, p in PreferredReplicaElectionZNode.decode(got[0])}
        else:
            partitions = set(event.partitions)
        results = await self.elect_leaders(partitions, event.election)
        if event.trigger is not ElectionTrigger.ADMIN_CLIENT:
            try:
                await self.zk.fenced_multi(self.ctx.epoch_zk_version,
                                           lambda tx: tx.delete(PreferredReplicaElectionZNode.path))
            except ControllerMovedError:
                raise
            except Exception:
                log.debug("preferred election znode already gone")
        event.answer(ErrorCode.none, results)

    async def elect_leaders(self, partitions: Iterable[TopicPartition],
                            election: ElectionType = ElectionType.PREFERRED) -> ElectionResults:
        """Elect a leader for each partition that needs one; its new leader or the error."""
        results: ElectionResults = {}
        candidates = []
        for tp in partitions:
            state = self.ctx.leadership.get(tp)
            if state is None or not self.ctx.partition_replica_assignment(tp):
                log.info("Skipping replica leader election (%s) for partition %s since it doesn't exist",
                         election.value, tp)
                results[tp] = _NOT_FOUND
            elif self.deletion.is_topic_queued_up_for_deletion(tp.topic):
                results[tp] = _BEING_DELETED
            elif self._has_valid_leader(tp, state, election):
                results[tp] = _NOT_NEEDED
            else:
                candidates.append(tp)
        failed = await self.partition_sm.handle_state_changes(candidates, PartitionState.ONLINE, election)
        for tp in candidates:
            if tp in failed:
                results[tp] = ApiError(_NO_CANDIDATE[election], str(failed[tp]))
            else:
                results[tp] = self.ctx.leadership[tp].leader
        return results

    def _has_valid_leader(self, tp: TopicPartition, state: LeaderAndIsr, election: ElectionType) -> bool:
        """PREFERRED: the first replica leads already; UNCLEAN: a live broker leads."""
        if election is ElectionType.PREFERRED:
            return state.leader == self.ctx.partition_replica_assignment(tp)[0]
        return state.leader != LeaderAndIsr.NO_LEADER and state.leader in self.ctx.live_broker_ids

    async def check_and_trigger_auto_leader_rebalance(self, imbalance_percentage: float) -> None:
        """For each broker whose share of partitions led by someone else exceeds
        ``leader.imbalance.per.broker.percentage``, elect it where it is online and the
        partition is not being reassigned."""
        by_preferred: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in self.ctx.all_partitions():
            replicas = self.ctx.partition_replica_assignment(tp)
            if replicas and not self.deletion.is_topic_queued_up_for_deletion(tp.topic):
                by_preferred[replicas[0]].append(tp)
        threshold = imbalance_percentage / 100
        for broker_id, tps in by_preferred.items():
            not_preferred = [tp for tp in tps if tp in self.ctx.leadership and self.ctx.leadership[tp].leader != broker_id]
            if len(not_preferred) / len(tps) > threshold:
                candidates = [tp for tp in not_preferred if self.ctx.is_replica_online(broker_id, tp)
                              and tp not in self.ctx.partitions_being_reassigned]
                if candidates:
                    log.info("Leader imbalance on broker %d (%d of %d not led by it): electing preferred leaders",
                             broker_id, len(not_preferred), len(tps))
                    await self.elect_leaders(candidates)
