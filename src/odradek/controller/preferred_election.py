"""Preferred replica leader election: on request (``/admin/preferred_replica_election`` or an
ElectLeaders request) and the periodic auto leader rebalance (Kafka's
KafkaController.onReplicaElection and checkAndTriggerAutoLeaderRebalance)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable

from kazoo.protocol.states import WatchedEvent

from odradek.common import TopicPartition
from odradek.controller.context import ControllerContext
from odradek.controller.events import PreferredReplicaLeaderElection
from odradek.controller.leader_selectors import ElectionType
from odradek.controller.partition_state_machine import PartitionState, PartitionStateMachine
from odradek.controller.topic_deletion import TopicDeletionManager
from odradek.protocol.errors import ErrorCode
from odradek.zk.client import ControllerMovedError, KafkaZkClient
from odradek.zk.zk_data import PreferredReplicaElectionZNode

log = logging.getLogger(__name__)

__all__ = ["PreferredReplicaElection"]


class PreferredReplicaElection:
    def __init__(self, ctx: ControllerContext, zk: KafkaZkClient, partition_sm: PartitionStateMachine,
                 deletion: TopicDeletionManager, on_znode_change: Callable[[WatchedEvent], None]) -> None:
        self.ctx = ctx
        self.zk = zk
        self.partition_sm = partition_sm
        self.deletion = deletion
        self.on_znode_change = on_znode_change

    async def process(self, event: PreferredReplicaLeaderElection) -> None:
        """Elect the preferred replicas of the partitions the event names, or, without names,
        of those listed in ``/admin/preferred_replica_election`` (then delete the znode)."""
        from_zk = event.partitions is None
        if event.partitions is None:
            got = await self.zk.get(PreferredReplicaElectionZNode.path, watch=self.on_znode_change)
            if got is None:
                return
            partitions = {TopicPartition(t, p) for t, p in PreferredReplicaElectionZNode.decode(got[0])}
        else:
            partitions = {TopicPartition(t, p) for t, p in event.partitions}
        results = await self.elect_preferred_leaders(partitions)
        if from_zk:
            try:
                await self.zk.fenced_multi(self.ctx.epoch_zk_version,
                                           lambda tx: tx.delete(PreferredReplicaElectionZNode.path))
            except ControllerMovedError:
                raise
            except Exception:
                log.debug("preferred election znode already gone")
        event.answer(ErrorCode.none, results)

    async def elect_preferred_leaders(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Move leadership to each partition's first replica; the error per partition."""
        results: dict[TopicPartition, ErrorCode] = {}
        candidates = []
        for tp in partitions:
            state = self.ctx.leadership.get(tp)
            replicas = self.ctx.partition_replica_assignment(tp)
            if state is None or not replicas or self.deletion.is_topic_queued_up_for_deletion(tp.topic):
                results[tp] = ErrorCode.unknown_topic_or_partition
            elif state.leader == replicas[0]:
                results[tp] = ErrorCode.election_not_needed
            else:
                candidates.append(tp)
        failed = await self.partition_sm.handle_state_changes(candidates, PartitionState.ONLINE, ElectionType.PREFERRED)
        for tp in candidates:
            results[tp] = ErrorCode.preferred_leader_not_available if tp in failed else ErrorCode.none
        return results

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
                    await self.elect_preferred_leaders(candidates)
