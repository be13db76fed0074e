"""Brokers joining, leaving, bouncing and changing their endpoints (Kafka's
KafkaController.processBrokerChange, onBrokerStartup, onBrokerFailure and
onReplicasBecomeOffline).  The controller reads ``/brokers/ids`` and hands the registered
brokers here."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from odradek.controller.channel import ControllerBrokerRequestBatch, ControllerChannelManager
from odradek.controller.context import ControllerContext, PartitionAndReplica
from odradek.controller.partition_state_machine import PartitionState, PartitionStateMachine
from odradek.controller.reassignment import ReassignmentManager
from odradek.controller.replica_state_machine import ReplicaState, ReplicaStateMachine
from odradek.controller.topic_deletion import TopicDeletionManager
from odradek.zk.zk_data import BrokerInfo

log = logging.getLogger(__name__)

__all__ = ["BrokerChangeHandler"]

# broker id -> (registration, broker epoch: the czxid of /brokers/ids/<id>)
Registrations = Mapping[int, tuple[BrokerInfo, int]]


class BrokerChangeHandler:
    def __init__(self, ctx: ControllerContext, channel: ControllerChannelManager,
                 batch: ControllerBrokerRequestBatch, partition_sm: PartitionStateMachine,
                 replica_sm: ReplicaStateMachine, deletion: TopicDeletionManager,
                 reassignment: ReassignmentManager, watch_broker: Callable[[int], Awaitable[None]]) -> None:
        self.ctx = ctx
        self.channel = channel
        self.batch = batch
        self.partition_sm = partition_sm
        self.replica_sm = replica_sm
        self.deletion = deletion
        self.reassignment = reassignment
        self.watch_broker = watch_broker

    async def process_broker_change(self, current: Registrations) -> None:
        """Compare the registered brokers with the live ones: start the new, fail the dead,
        and fail then start the bounced (registered again with a new broker epoch)."""
        live = set(self.ctx.live_brokers)
        new_ids = set(current) - live
        dead_ids = live - set(current)
        bounced = {b for b in set(current) & live if current[b][1] != self.ctx.broker_epochs.get(b)}
        if new_ids or dead_ids or bounced:
            log.info("Newly added brokers: %s, deleted brokers: %s, bounced brokers: %s, all live brokers: %s",
                     sorted(new_ids), sorted(dead_ids), sorted(bounced), sorted(current))
        for b in new_ids:
            self.ctx.add_live_brokers({b: current[b]})
            self.channel.add_broker(current[b][0])
            await self.watch_broker(b)
        for b in bounced | dead_ids:
            await self.channel.remove_broker(b)
            self.ctx.remove_live_brokers([b])
        if new_ids:
            await self.on_broker_startup(new_ids)
        if bounced:
            await self.on_broker_failure(bounced)
            for b in bounced:
                self.ctx.add_live_brokers({b: current[b]})
                self.channel.add_broker(current[b][0])
            await self.on_broker_startup(bounced)
        if dead_ids:
            await self.on_broker_failure(dead_ids)

    async def process_broker_modification(self, broker_id: int, info: BrokerInfo) -> None:
        """A live broker's registration changed (new endpoints): reconnect and tell everyone."""
        if info == self.ctx.live_brokers[broker_id]:
            return
        self.ctx.live_brokers[broker_id] = info
        await self.channel.remove_broker(broker_id)
        self.channel.add_broker(info)
        await self.batch.send_update_metadata_request(self.ctx.live_or_shutting_down_broker_ids, [])

    async def on_broker_startup(self, new_ids: set[int]) -> None:
        log.info("New broker startup callback for %s", sorted(new_ids))
        self.ctx.shutting_down_broker_ids -= new_ids
        existing = self.ctx.live_or_shutting_down_broker_ids - new_ids
        await self.batch.send_update_metadata_request(existing, [])
        await self.batch.send_update_metadata_request(new_ids, self.ctx.partitions_with_leaders())
        replicas = self.ctx.replicas_on_brokers(new_ids)
        deleting = [r for r in replicas if self.deletion.is_topic_queued_up_for_deletion(r.topic)]
        await self.replica_sm.handle_state_changes(
            [r for r in replicas if not self.deletion.is_topic_queued_up_for_deletion(r.topic)], ReplicaState.ONLINE)
        await self.partition_sm.trigger_online_partition_state_change()
        for tp in sorted({r.topic_partition for r in replicas} & self.ctx.partitions_being_reassigned):
            await self.reassignment.maybe_complete(tp)
        if deleting:
            await self.deletion.resume_deletion_for_topics({r.topic for r in deleting})

    async def on_broker_failure(self, dead_ids: set[int]) -> None:
        log.info("Broker failure callback for %s", sorted(dead_ids))
        self.ctx.shutting_down_broker_ids -= dead_ids
        await self.on_replicas_become_offline(self.ctx.replicas_on_brokers(dead_ids))

    async def on_replicas_become_offline(self, replicas: list[PartitionAndReplica]) -> None:
        """Partitions whose leader went get a new one; the replicas go Offline (or fail their
        deletion, for topics being deleted)."""
        deleting = [r for r in replicas if self.deletion.is_topic_queued_up_for_deletion(r.topic)]
        others = [r for r in replicas if not self.deletion.is_topic_queued_up_for_deletion(r.topic)]
        offline_leader = [
            tp for tp, state in self.ctx.leadership.items()
            if not self.ctx.is_replica_online(state.leader, tp, include_shutting_down=True)
            and not self.deletion.is_topic_queued_up_for_deletion(tp.topic)
        ]
        await self.partition_sm.handle_state_changes(offline_leader, PartitionState.OFFLINE)
        await self.partition_sm.trigger_online_partition_state_change()
        await self.replica_sm.handle_state_changes(others, ReplicaState.OFFLINE)
        if deleting:
            await self.deletion.fail_replica_deletion(deleting)
        if not offline_leader:
            await self.batch.send_update_metadata_request(self.ctx.live_or_shutting_down_broker_ids, [])
