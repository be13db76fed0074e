"""AlterPartition at the controller: a partition leader asks for a new ISR (Kafka's
KafkaController.processAlterPartition, KIP-497 and KIP-704)."""

from __future__ import annotations

from typing import Any

from odradek.common import TopicPartition
from odradek.controller.channel import ControllerBrokerRequestBatch
from odradek.controller.context import ControllerContext
from odradek.controller.events import AlterPartitionReceived
from odradek.controller.reassignment import ReassignmentManager
from odradek.protocol.errors import ErrorCode
from odradek.state_change_log import StateChangeLogger
from odradek.zk.client import KafkaZkClient
from odradek.zk.zk_data import LeaderAndIsr, topic_id_to_uuid

__all__ = ["AlterPartitionHandler"]


class AlterPartitionHandler:
    def __init__(self, controller_id: int, ctx: ControllerContext, zk: KafkaZkClient,
                 batch: ControllerBrokerRequestBatch, reassignment: ReassignmentManager) -> None:
        self.controller_id = controller_id
        self.ctx = ctx
        self.zk = zk
        self.batch = batch
        self.reassignment = reassignment

    async def process(self, event: AlterPartitionReceived) -> None:
        """Accept a new ISR only from the current leader, at the current leader epoch and
        partition (znode) version; write ZooKeeper, tell the brokers, and let a reassignment
        waiting for its new replicas to join the ISR complete."""
        if event.broker_epoch != -1 and event.broker_epoch < self.ctx.broker_epochs.get(event.broker_id, -1):
            event.answer(ErrorCode.stale_broker_epoch, {})
            return
        # Topic ids are resolved here, in the event thread, against a fully loaded context.
        names = {topic_id_to_uuid(tid): name for name, tid in self.ctx.topic_ids.items()}
        ids = {name: tid for tid, name in names.items()}
        results: dict[tuple[Any, int], Any] = {}
        proposed: dict[TopicPartition, LeaderAndIsr] = {}
        for (topic_id, partition), (leader_epoch, new_isr, partition_epoch) in event.changes.items():
            topic = names.get(topic_id)
            if topic is None:
                results[(topic_id, partition)] = ErrorCode.unknown_topic_id
                continue
            tp = TopicPartition(topic, partition)
            current = self.ctx.leadership.get(tp)
            error = self._check(current, event.broker_id, leader_epoch, tuple(new_isr), partition_epoch)
            if error is not None:
                results[(topic_id, partition)] = error
            elif current is None or partition_epoch != current.zk_version:
                results[(topic_id, partition)] = current  # a retry of a change already made
            else:
                proposed[tp] = LeaderAndIsr(current.leader, current.leader_epoch, tuple(new_isr), self.ctx.epoch,
                                            current.zk_version)
        changed: list[TopicPartition] = []
        if proposed:
            written = await self.zk.update_partition_states(proposed, self.ctx.epoch_zk_version)
            logger = StateChangeLogger(self.controller_id, controller_epoch=self.ctx.epoch)
            for tp, res in written.items():
                if isinstance(res, Exception):
                    results[(ids[tp.topic], tp.partition)] = ErrorCode.invalid_update_version
                    continue
                self.ctx.leadership[tp] = res
                results[(ids[tp.topic], tp.partition)] = res
                changed.append(tp)
                logger.info(f"Changed ISR of partition {tp} to [{','.join(map(str, res.isr))}] at the "
                            f"request of leader {event.broker_id} (partition epoch {res.zk_version})")
            if changed:
                await self.batch.send_update_metadata_request(self.ctx.live_or_shutting_down_broker_ids, changed)
        event.answer(ErrorCode.none, results)
        for tp in changed:
            if tp in self.ctx.partitions_being_reassigned:
                await self.reassignment.maybe_complete(tp)

    def _check(self, current: LeaderAndIsr | None, broker_id: int, leader_epoch: int,
               new_isr: tuple[int, ...], partition_epoch: int) -> ErrorCode | None:
        """Why the change is refused, or None (then it is either new, or a retry of a change
        already made when ``partition_epoch`` is behind but the ISR is already ``new_isr``)."""
        if current is None:
            return ErrorCode.unknown_topic_or_partition
        if current.leader != broker_id:
            return ErrorCode.not_leader_or_follower
        if leader_epoch < current.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if leader_epoch > current.leader_epoch:
            return ErrorCode.unknown_leader_epoch
        if partition_epoch != current.zk_version:
            return None if new_isr == current.isr else ErrorCode.invalid_update_version
        if any(b not in self.ctx.live_brokers for b in new_isr):
            return ErrorCode.ineligible_replica
        return None
