"""Controlled shutdown: a broker about to stop asks the controller to move leadership off it
(Kafka's KafkaController.doControlledShutdown)."""

from __future__ import annotations

import logging

from odradek.controller.channel import ControllerBrokerRequestBatch
from odradek.controller.context import ControllerContext, PartitionAndReplica
from odradek.controller.events import ControlledShutdown
from odradek.controller.leader_selectors import ElectionType
from odradek.controller.partition_state_machine import PartitionState, PartitionStateMachine
from odradek.controller.replica_state_machine import ReplicaState, ReplicaStateMachine
from odradek.controller.topic_deletion import TopicDeletionManager
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

__all__ = ["ControlledShutdownHandler"]


class ControlledShutdownHandler:
    def __init__(self, ctx: ControllerContext, partition_sm: PartitionStateMachine,
                 replica_sm: ReplicaStateMachine, batch: ControllerBrokerRequestBatch,
                 deletion: TopicDeletionManager) -> None:
        self.ctx = ctx
        self.partition_sm = partition_sm
        self.replica_sm = replica_sm
        self.batch = batch
        self.deletion = deletion

    async def process(self, event: ControlledShutdown) -> None:
        """Move leadership off a broker that is shutting down; reply with the partitions it
        still leads (the broker retries until that set is empty).  Partitions it leads get a
        new leader (ControlledShutdownLeaderElection); on those it follows, its replica gets
        StopReplica and goes Offline, leaving the ISR."""
        broker_id = event.broker_id
        if event.broker_epoch < self.ctx.broker_epochs.get(broker_id, -1):
            event.answer(ErrorCode.stale_broker_epoch, [])
            return
        if broker_id not in self.ctx.live_brokers:
            event.answer(ErrorCode.broker_not_available, [])
            return
        self.ctx.shutting_down_broker_ids.add(broker_id)
        to_act_on = [
            tp for tp in self.ctx.partitions_on_broker(broker_id)
            if len(self.ctx.partition_replica_assignment(tp)) > 1 and tp in self.ctx.leadership
            and not self.deletion.is_topic_queued_up_for_deletion(tp.topic)
        ]
        led = [tp for tp in to_act_on if self.ctx.leadership[tp].leader == broker_id]
        followed = [tp for tp in to_act_on if self.ctx.leadership[tp].leader != broker_id]
        await self.partition_sm.handle_state_changes(led, PartitionState.ONLINE, ElectionType.CONTROLLED_SHUTDOWN)
        self.batch.new_batch()
        for tp in followed:
            self.batch.add_stop_replica_request_for_brokers([broker_id], tp, delete_partition=False)
        await self.batch.send_requests_to_brokers(self.ctx.epoch)
        await self.replica_sm.handle_state_changes(
            [PartitionAndReplica(tp.topic, tp.partition, broker_id) for tp in followed], ReplicaState.OFFLINE)
        remaining = [tp for tp, s in self.ctx.leadership.items()
                     if s.leader == broker_id and len(self.ctx.partition_replica_assignment(tp)) > 1]
        log.info("Controlled shutdown of broker %d: %d partitions still led by it", broker_id, len(remaining))
        event.answer(ErrorCode.none, remaining)
