"""Controller -> broker requests: a queue and a sender per broker, and the request batch.

``ControllerChannelManager`` keeps one connection and one sender task per live broker;
requests to a broker go out in order and a failed send is retried until it succeeds or the
broker is removed (as Kafka's RequestSendThread).  ``ControllerBrokerRequestBatch`` collects
the LeaderAndIsr / UpdateMetadata / StopReplica work of one controller step and sends it as
one request per broker and kind.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from odradek import tasks
from odradek.common import TopicPartition
from odradek.controller import control_requests as build
from odradek.controller.context import ControllerContext, ReplicaAssignment
from odradek.controller.events import (
    ControllerEvent,
    LeaderAndIsrResponseReceived,
    TopicDeletionStopReplicaResponseReceived,
)
from odradek.net.client import BrokerConnection
from odradek.protocol import control
from odradek.security.client import ClientSecurity
from odradek.state_change_log import StateChangeLogger
from odradek.zk.zk_data import BrokerInfo, LeaderAndIsr

log = logging.getLogger(__name__)

__all__ = ["ControllerBrokerRequestBatch", "ControllerChannelManager"]

# Leader epoch sent in StopReplica for a partition whose topic is being deleted (Kafka's
# LeaderAndIsr.EpochDuringDelete), and when the controller knows no epoch.
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1


@dataclass
class _QueueItem:
    payload: Any
    response_type: type[Any] | None
    callback: Callable[[Any], None] | None


class _BrokerSender:
    """One broker's queue and the task that drains it."""

    def __init__(self, controller_id: int, info: BrokerInfo, listener: str, timeout_s: float,
                 security: ClientSecurity | None = None) -> None:
        self.info = info
        self.security = security
        self.listener = listener
        self.timeout_s = timeout_s
        self.controller_id = controller_id
        self.queue: asyncio.Queue[_QueueItem] = asyncio.Queue()
        self.conn: BrokerConnection | None = None
        self.task = tasks.start(self._run(), f"controller-sender-{info.id}")

    async def _connect(self) -> BrokerConnection:
        backoff = 0.05
        while True:
            endpoint = self.info.endpoint(self.listener) if any(
                e.listener == self.listener for e in self.info.endpoints) else self.info.endpoint()
            conn = BrokerConnection(endpoint.host, endpoint.port, f"controller-{self.controller_id}",
                                    security=self.security)
            try:
                await conn.connect(timeout_s=self.timeout_s)
                return conn
            except (TimeoutError, OSError) as e:
                log.debug("controller connection to broker %d failed: %r", self.info.id, e)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    async def _run(self) -> None:
        while True:
            item = await self.queue.get()
            while True:
                if self.conn is None or not self.conn.connected:
                    self.conn = await self._connect()
                try:
                    response = await self.conn.send(item.payload, item.response_type, self.timeout_s)
                    break
                except (TimeoutError, ConnectionError, OSError) as e:
                    log.info("controller request to broker %d failed, retrying: %r", self.info.id, e)
                    await self.conn.close()
                    self.conn = None
                    await asyncio.sleep(0.1)
            if item.callback is not None:
                try:
                    item.callback(response)
                except Exception:
                    log.exception("controller response callback failed")

    async def close(self) -> None:
        await tasks.cancel_and_wait(self.task)
        if self.conn is not None:
            await self.conn.close()


class ControllerChannelManager:
    def __init__(self, controller_id: int, listener: str, request_timeout_ms: int,
                 security: ClientSecurity | None = None) -> None:
        self.controller_id = controller_id
        self.security = security  # the inter-broker listener's (config.inter_broker_client_properties)
        self.listener = listener
        self.timeout_s = request_timeout_ms / 1000
        self._senders: dict[int, _BrokerSender] = {}

    def startup(self, brokers: Iterable[BrokerInfo]) -> None:
        for info in brokers:
            self.add_broker(info)

    def add_broker(self, info: BrokerInfo) -> None:
        if info.id not in self._senders:
            self._senders[info.id] = _BrokerSender(self.controller_id, info, self.listener, self.timeout_s,
                                                   self.security)

    async def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            await sender.close()

    def send_request(self, broker_id: int, payload: Any, response_type: type[Any] | None,
                     callback: Callable[[Any], None] | None = None) -> bool:
        sender = self._senders.get(broker_id)
        if sender is None:
            log.warning("Not sending %s to broker %d: it is not alive", type(payload).__name__, broker_id)
            return False
        sender.queue.put_nowait(_QueueItem(payload, response_type, callback))
        return True

    def pending(self) -> int:
        return sum(s.queue.qsize() for s in self._senders.values())

    async def shutdown(self) -> None:
        senders, self._senders = self._senders, {}
        await asyncio.gather(*(s.close() for s in senders.values()))


@dataclass(frozen=True, slots=True)
class _PartitionInfo:
    state: LeaderAndIsr
    assignment: ReplicaAssignment
    is_new: bool


class ControllerBrokerRequestBatch:
    """The requests one controller step produces, grouped per broker."""

    def __init__(self, controller_id: int, ctx: ControllerContext, channel: ControllerChannelManager,
                 event_sink: Callable[[ControllerEvent], None],
                 topics_being_deleted: Callable[[], set[str]]) -> None:
        self.controller_id = controller_id
        self.ctx = ctx
        self.channel = channel
        self.event_sink = event_sink
        self.topics_being_deleted = topics_being_deleted
        self.leader_and_isr: dict[int, dict[TopicPartition, _PartitionInfo]] = defaultdict(dict)
        self.stop_replica: dict[int, dict[TopicPartition, bool]] = defaultdict(dict)
        self.update_metadata_brokers: set[int] = set()
        self.update_metadata_partitions: set[TopicPartition] = set()

    def new_batch(self) -> None:
        if self.leader_and_isr or self.stop_replica or self.update_metadata_brokers:
            log.warning("controller request batch was not empty when a new one started; discarding it")
            self.clear()

    def clear(self) -> None:
        self.leader_and_isr.clear()
        self.stop_replica.clear()
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()

    def add_leader_and_isr_request_for_brokers(self, broker_ids: Iterable[int], tp: TopicPartition,
                                               state: LeaderAndIsr, assignment: ReplicaAssignment,
                                               is_new: bool) -> None:
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            previous = self.leader_and_isr[broker_id].get(tp)
            self.leader_and_isr[broker_id][tp] = _PartitionInfo(
                state, assignment, is_new or (previous is not None and previous.is_new))
        self.add_update_metadata_request_for_brokers(self.ctx.live_or_shutting_down_broker_ids, [tp])

    def add_stop_replica_request_for_brokers(self, broker_ids: Iterable[int], tp: TopicPartition,
                                             delete_partition: bool) -> None:
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            already = self.stop_replica[broker_id].get(tp, False)
            self.stop_replica[broker_id][tp] = already or delete_partition

    def add_update_metadata_request_for_brokers(self, broker_ids: Iterable[int],
                                                partitions: Iterable[TopicPartition] = ()) -> None:
        self.update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        self.update_metadata_partitions.update(partitions)

    async def send_update_metadata_request(self, broker_ids: Iterable[int],
                                           partitions: Iterable[TopicPartition]) -> None:
        """One UpdateMetadata step on its own (Kafka's KafkaController.sendUpdateMetadataRequest)."""
        self.new_batch()
        self.add_update_metadata_request_for_brokers(broker_ids, partitions)
        await self.send_requests_to_brokers(self.ctx.epoch)

    async def send_requests_to_brokers(self, controller_epoch: int) -> None:
        """Send LeaderAndIsr first, then UpdateMetadata, then StopReplica (Kafka's order)."""
        logger = StateChangeLogger(self.controller_id, controller_epoch=controller_epoch)
        try:
            self._send_leader_and_isr(controller_epoch, logger)
            self._send_update_metadata(controller_epoch, logger)
            self._send_stop_replica(controller_epoch, logger)
        finally:
            self.clear()

    # ------------------------------------------------------------------ building requests

    def _broker_epoch(self, broker_id: int) -> int:
        return self.ctx.broker_epochs.get(broker_id, -1)

    def _send_leader_and_isr(self, controller_epoch: int, logger: StateChangeLogger) -> None:
        for broker_id, partitions in self.leader_and_isr.items():
            if broker_id not in self.ctx.live_brokers:
                continue
            leader_ids = {info.state.leader for info in partitions.values()}
            live_leaders = [self.ctx.live_brokers[b] for b in sorted(leader_ids) if b in self.ctx.live_brokers]
            for tp, info in partitions.items():
                kind = "become-leader" if info.state.leader == broker_id else "become-follower"
                logger.info(f"Sending {kind} LeaderAndIsr request {_fmt_state(info)} to broker {broker_id} "
                            f"for partition {tp}")
            request = build.build_leader_and_isr_request(
                controller_id=self.controller_id,
                controller_epoch=controller_epoch,
                broker_epoch=self._broker_epoch(broker_id),
                partitions={tp: (info.state, info.assignment, info.is_new) for tp, info in partitions.items()},
                topic_ids=self.ctx.topic_ids,
                live_leaders=live_leaders,
                listener=self.channel.listener,
            )
            self.channel.send_request(broker_id, request, control.LeaderAndIsrResponse,
                                      self._leader_and_isr_callback(broker_id))

    def _leader_and_isr_callback(self, broker_id: int) -> Callable[[Any], None]:
        def on_response(response: Any) -> None:
            top, errors = build.leader_and_isr_response_errors(response, self.ctx.topic_ids)
            self.event_sink(LeaderAndIsrResponseReceived(broker_id, errors, top))
        return on_response

    def _send_update_metadata(self, controller_epoch: int, logger: StateChangeLogger) -> None:
        if not self.update_metadata_brokers:
            return
        deleting = self.topics_being_deleted()
        states: dict[TopicPartition, tuple[LeaderAndIsr, tuple[int, ...], tuple[int, ...]]] = {}
        for tp in self.update_metadata_partitions:
            state = self.ctx.leadership.get(tp)
            if state is None:
                continue  # no leader assigned yet; nothing to publish
            replicas = self.ctx.partition_replica_assignment(tp)
            offline = tuple(r for r in replicas if not self.ctx.is_replica_online(r, tp, include_shutting_down=True))
            if tp.topic in deleting:
                state = LeaderAndIsr(LeaderAndIsr.LEADER_DURING_DELETE, state.leader_epoch, state.isr,
                                     state.controller_epoch, state.zk_version)
            states[tp] = (state, replicas, offline)
        live = list(self.ctx.live_brokers.values())
        # The partition states are the same for every broker: build them once.
        template = build.build_update_metadata_request(
            controller_id=self.controller_id, controller_epoch=controller_epoch, broker_epoch=-1,
            partitions=states, topic_ids=self.ctx.topic_ids, live_brokers=live)
        for broker_id in sorted(self.update_metadata_brokers):
            if broker_id not in self.ctx.live_brokers:
                continue
            if states:
                logger.info(f"Sending UpdateMetadata request to broker {broker_id} for {len(states)} partitions")
            request = dataclasses.replace(template, broker_epoch=self._broker_epoch(broker_id))
            self.channel.send_request(broker_id, request, control.UpdateMetadataResponse)

    def _send_stop_replica(self, controller_epoch: int, logger: StateChangeLogger) -> None:
        deleting = self.topics_being_deleted()
        for broker_id, partitions in self.stop_replica.items():
            if broker_id not in self.ctx.live_brokers:
                continue
            entries: dict[TopicPartition, tuple[int, bool]] = {}
            for tp, delete in partitions.items():
                if tp.topic in deleting:
                    epoch = EPOCH_DURING_DELETE
                else:
                    state = self.ctx.leadership.get(tp)
                    epoch = state.leader_epoch if state is not None else NO_EPOCH
                entries[tp] = (epoch, delete)
            logger.info(f"Sending StopReplica request for {len(entries)} partitions to broker {broker_id}"
                        f" (delete: {sorted(str(tp) for tp, (_, d) in entries.items() if d)})")
            request = build.build_stop_replica_request(
                controller_id=self.controller_id,
                controller_epoch=controller_epoch,
                broker_epoch=self._broker_epoch(broker_id),
                partitions=entries,
            )
            callback = self._stop_replica_callback(broker_id) if any(d for _, d in entries.values()) else None
            self.channel.send_request(broker_id, request, control.StopReplicaResponse, callback)

    def _stop_replica_callback(self, broker_id: int) -> Callable[[Any], None]:
        def on_response(response: Any) -> None:
            top, errors = build.stop_replica_response_errors(response)
            self.event_sink(TopicDeletionStopReplicaResponseReceived(broker_id, errors, top))
        return on_response


def _fmt_state(info: _PartitionInfo) -> str:
    s = info.state
    return (f"(leader={s.leader}, leaderEpoch={s.leader_epoch}, isr=[{','.join(map(str, s.isr))}], "
            f"zkVersion={s.zk_version}, replicas=[{','.join(map(str, info.assignment.replicas))}], "
            f"isNew={str(info.is_new).lower()})")
