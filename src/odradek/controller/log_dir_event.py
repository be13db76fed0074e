"""Failed log directories, as the controller learns of them (Kafka's
KafkaController.processLogDirEventNotification, onBrokerLogDirFailure and
processLeaderAndIsrResponseReceived).

A broker whose log directory fails writes ``/log_dir_event_notification/log_dir_event_<n>``.
The controller does not know which replicas were there, so it asks: every replica on that
broker goes (again) to OnlineReplica, which sends the broker its partitions' LeaderAndIsr.
The broker answers KAFKA_STORAGE_ERROR for each replica in a failed directory; those replicas
are recorded as offline (``ControllerContext.replicas_on_offline_dirs``) and go through
``onReplicasBecomeOffline``: partitions they led elect a new leader, and they leave the ISR.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from kazoo.protocol.states import WatchedEvent

from odradek.common import TopicPartition
from odradek.controller.context import ControllerContext, PartitionAndReplica
from odradek.controller.events import LeaderAndIsrResponseReceived
from odradek.controller.replica_state_machine import ReplicaState, ReplicaStateMachine
from odradek.protocol.errors import ErrorCode
from odradek.state_change_log import StateChangeLogger

log = logging.getLogger(__name__)

__all__ = ["LogDirEventClient", "LogDirEventHandler"]


class LogDirEventClient(Protocol):
    """The notification znodes (KafkaZkClient)."""

    async def get_log_dir_event_notifications(self, watch: Callable[[WatchedEvent], None] | None = None
                                              ) -> list[str]: ...

    async def get_broker_ids_from_log_dir_events(self, names: Iterable[str]) -> list[int]: ...

    async def delete_log_dir_event_notifications(self, names: Iterable[str], epoch_zk_version: int) -> None: ...


class LogDirEventHandler:
    def __init__(self, broker_id: int, ctx: ControllerContext, zk: LogDirEventClient,
                 replica_sm: ReplicaStateMachine,
                 on_replicas_become_offline: Callable[[list[PartitionAndReplica]], Awaitable[None]],
                 watch: Callable[[WatchedEvent], None]) -> None:
        self.broker_id = broker_id
        self.ctx = ctx
        self.zk = zk
        self.replica_sm = replica_sm
        self.on_replicas_become_offline = on_replicas_become_offline
        self.watch = watch

    async def on_failover(self) -> None:
        """Watch for notifications; those written before this controller are dropped (the
        replica state machine's start-up asks every broker about every replica anyway)."""
        names = await self.zk.get_log_dir_event_notifications(self.watch)
        await self.zk.delete_log_dir_event_notifications(names, self.ctx.epoch_zk_version)

    async def process_notifications(self) -> None:
        """LogDirEventNotification: ask the brokers named about every replica they host."""
        names = await self.zk.get_log_dir_event_notifications(self.watch)
        if not names:
            return
        try:
            broker_ids = sorted(set(await self.zk.get_broker_ids_from_log_dir_events(names)))
            log.info("Handling log directory failure for brokers %s", ",".join(map(str, broker_ids)))
            await self.replica_sm.handle_state_changes(self.ctx.replicas_on_brokers(broker_ids), ReplicaState.ONLINE)
        finally:
            await self.zk.delete_log_dir_event_notifications(names, self.ctx.epoch_zk_version)

    async def process_leader_and_isr_response(self, event: LeaderAndIsrResponseReceived) -> None:
        """Replicas answered KAFKA_STORAGE_ERROR are offline, those answered NONE online again;
        the newly offline ones go through onReplicasBecomeOffline."""
        logger = StateChangeLogger(self.broker_id, controller_epoch=self.ctx.epoch)
        if event.top_error:
            logger.error(f"Received error {ErrorCode(event.top_error).name.upper()} in LeaderAndIsr response "
                         f"from broker {event.broker_id}")
            return
        if event.broker_id not in self.ctx.live_brokers:
            return
        previous = self.ctx.replicas_on_offline_dirs.get(event.broker_id, set())
        current = set(previous)
        for (topic, partition), error in event.partition_errors.items():
            tp = TopicPartition(topic, partition)
            if error == ErrorCode.kafka_storage_error:
                current.add(tp)
            elif error == ErrorCode.none:
                current.discard(tp)
        self.ctx.replicas_on_offline_dirs[event.broker_id] = current
        new_offline = sorted(current - previous)
        if new_offline:
            logger.info(f"Mark replicas {','.join(map(str, new_offline))} on broker {event.broker_id} as offline")
            await self.on_replicas_become_offline(
                [PartitionAndReplica(tp.topic, tp.partition, event.broker_id) for tp in new_offline])
