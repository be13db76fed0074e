"""KafkaController: election, failover, resignation, and the event loop that dispatches
every controller event to its handler.

Every broker runs one; it is active only while its broker holds ``/controller``.  Watches on
ZooKeeper only enqueue events (see ``events.py``); this class processes them one at a time.
A write that finds ``/controller_epoch`` moved raises ControllerMovedError, and the controller
resigns.  The handlers live beside it, one module per concern, with their collaborators
injected: ``broker_change``, ``topic_change``, ``topic_deletion``, ``reassignment``,
``alter_partition``, ``controlled_shutdown``, ``preferred_election`` and ``log_dir_event``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from kazoo.exceptions import SessionExpiredError
from kazoo.protocol.states import EventType, WatchedEvent

from odradek import tasks
from odradek.common import TopicPartition
from odradek.config import KafkaConfig
from odradek.controller.alter_partition import AlterPartitionHandler
from odradek.controller.broker_change import BrokerChangeHandler
from odradek.controller.channel import ControllerBrokerRequestBatch, ControllerChannelManager
from odradek.controller.context import ControllerContext
from odradek.controller.controlled_shutdown import ControlledShutdownHandler
from odradek.controller.event_manager import ControllerEventManager
from odradek.controller.events import (
    AlterPartitionReceived,
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    BrokerModifications,
    ControlledShutdown,
    ControllerChange,
    ControllerEvent,
    Expire,
    LeaderAndIsrResponseReceived,
    LogDirEventNotification,
    PartitionModifications,
    PartitionReassignment,
    PreferredReplicaLeaderElection,
    Reelect,
    RegisterBrokerAndReelect,
    Startup,
    TopicChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
    TopicUncleanLeaderElectionEnable,
)
from odradek.controller.log_dir_event import LogDirEventHandler
from odradek.controller.partition_state_machine import PartitionStateMachine
from odradek.controller.preferred_election import PreferredReplicaElection
from odradek.controller.reassignment import ReassignmentManager, ZkReassignmentClient
from odradek.controller.replica_state_machine import ReplicaStateMachine
from odradek.controller.topic_change import TopicChangeHandler
from odradek.controller.topic_deletion import TopicDeletionManager
from odradek.protocol.errors import ErrorCode
from odradek.security.client import ClientSecurity
from odradek.state_change_log import StateChangeLogger
from odradek.zk.client import ControllerMovedError, KafkaZkClient, NodeExistsError
from odradek.zk.zk_data import (
    BrokerIdZNode,
    ControllerZNode,
    DeleteTopicsZNode,
    PreferredReplicaElectionZNode,
)

log = logging.getLogger(__name__)

__all__ = ["KafkaController"]

# Processed whether or not this broker is the active controller; every other event is
# preempted (its caller hears NOT_CONTROLLER) when it is not.
ELECTION_EVENTS = (Startup, ControllerChange, Reelect, Expire, RegisterBrokerAndReelect)


class KafkaController:
    def __init__(self, config: KafkaConfig, zk: KafkaZkClient,
                 register_broker: Callable[[], Awaitable[int]], *,
                 inter_broker_security: ClientSecurity | None = None) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.zk = zk
        self._register_broker = register_broker
        self.ctx = ControllerContext()
        self.active_controller_id: int | None = None
        self.event_manager = ControllerEventManager(self.process)
        self.channel = ControllerChannelManager(
            self.broker_id, config.inter_broker_listener_name, config["controller.socket.timeout.ms"],
            inter_broker_security)
        self.batch = ControllerBrokerRequestBatch(
            self.broker_id, self.ctx, self.channel, self.event_manager.put, self._topics_being_deleted)
        self.partition_sm = PartitionStateMachine(
            self.broker_id, self.ctx, zk, self.batch, config["unclean.leader.election.enable"])
        self.replica_sm = ReplicaStateMachine(self.broker_id, self.ctx, zk, self.batch)
        self.deletion = TopicDeletionManager(
            config["delete.topic.enable"], self.ctx, self.replica_sm, self.partition_sm, self)
        self.reassignment = ReassignmentManager(
            self.broker_id, self.ctx, self.replica_sm, self.partition_sm, self.batch, self.deletion,
            ZkReassignmentClient(zk, self.ctx, self._on_reassignment_znode))
        self.broker_change = BrokerChangeHandler(
            self.ctx, self.channel, self.batch, self.partition_sm, self.replica_sm, self.deletion,
            self.reassignment, self._watch_broker)
        self.topic_change = TopicChangeHandler(zk, self.ctx, self.partition_sm, self.replica_sm, self.deletion, self)
        self.alter_partition = AlterPartitionHandler(self.broker_id, self.ctx, zk, self.batch, self.reassignment)
        self.controlled_shutdown = ControlledShutdownHandler(
            self.ctx, self.partition_sm, self.replica_sm, self.batch, self.deletion)
        self.preferred_election = PreferredReplicaElection(
            self.ctx, zk, self.partition_sm, self.deletion, self._on_preferred_election)
        self.log_dir_event = LogDirEventHandler(
            self.broker_id, self.ctx, zk, self.replica_sm, self.broker_change.on_replicas_become_offline,
            self._on_log_dir_event)
        self._watchers: dict[str | int, Callable[[WatchedEvent], None]] = {}
        self._rebalance_task: asyncio.Task[None] | None = None
        self._session_lost = False
        self._zk_unreachable = False
        # Tests and tools wait on this: set whenever this broker finishes a failover.
        self.failover_count = 0

    # ------------------------------------------------------------------ lifecycle

    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker_id

    def startup(self) -> None:
        self.zk.add_state_listener(self._on_zk_state)
        self.event_manager.start()
        self.event_manager.put(Startup())

    async def shutdown(self) -> None:
        await self.event_manager.close()
        await self._on_controller_resignation()

    def enable_topic_unclean_leader_election(self, topic: str) -> None:
        """A topic's config turned unclean leader election on: if this broker is the active
        controller, try to elect leaders for its offline partitions (Kafka's
        KafkaController.enableTopicUncleanLeaderElection)."""
        if self.is_active:
            self.event_manager.put(TopicUncleanLeaderElectionEnable(topic))

    def _on_zk_state(self, state: str) -> None:
        self._log_zk_reachability(state)
        if state == "LOST":
            self._session_lost = True
            self.event_manager.clear_and_put(Expire())
        elif state == "CONNECTED" and self._session_lost:
            self._session_lost = False
            self.event_manager.put(RegisterBrokerAndReelect())

    def _log_zk_reachability(self, state: str) -> None:
        """While ZooKeeper is unreachable no controller write can succeed and no watch fires:
        the active controller says so, and says when it can act again."""
        if state == "SUSPENDED" and self.is_active and not self._zk_unreachable:
            self._zk_unreachable = True
            StateChangeLogger(self.broker_id, controller_epoch=self.ctx.epoch).warn(
                "ZooKeeper unreachable: no controller changes until it returns")
        elif state in ("CONNECTED", "LOST") and self._zk_unreachable:
            self._zk_unreachable = False
            outcome = ("session kept, the controller carries on" if state == "CONNECTED"
                       else "session expired, resigning and re-electing")
            StateChangeLogger(self.broker_id, controller_epoch=self.ctx.epoch).info(
                f"ZooKeeper reachable again: {outcome}")

    # ------------------------------------------------------------------ watch callbacks

    def _on_controller_znode(self, event: WatchedEvent) -> None:
        self.event_manager.put(Reelect() if event.type == EventType.DELETED else ControllerChange())

    def _on_broker_change(self, _event: WatchedEvent) -> None:
        self.event_manager.put(BrokerChange())

    def on_topic_change(self, _event: WatchedEvent) -> None:
        self.event_manager.put(TopicChange())

    def on_topic_deletion(self, _event: WatchedEvent) -> None:
        self.event_manager.put(TopicDeletion())

    def _on_preferred_election(self, event: WatchedEvent) -> None:
        if event.type in (EventType.CREATED, EventType.CHANGED):
            self.event_manager.put(PreferredReplicaLeaderElection())

    def _on_log_dir_event(self, _event: WatchedEvent) -> None:
        self.event_manager.put(LogDirEventNotification())

    def _on_reassignment_znode(self, event: WatchedEvent) -> None:
        if event.type in (EventType.CREATED, EventType.CHANGED):
            self.event_manager.put(PartitionReassignment())

    def topic_watcher(self, topic: str) -> Callable[[WatchedEvent], None]:
        """The watch callback of a topic znode."""
        return self._change_watcher(topic, PartitionModifications(topic))

    def _broker_watcher(self, broker_id: int) -> Callable[[WatchedEvent], None]:
        return self._change_watcher(broker_id, BrokerModifications(broker_id))

    def _change_watcher(self, key: str | int, on_change: ControllerEvent) -> Callable[[WatchedEvent], None]:
        """One callback per znode, queuing ``on_change`` whenever the znode changes (the
        ZooKeeper client keys its watches by callback, so a znode must always get the same one)."""
        watcher = self._watchers.get(key)
        if watcher is None:
            def watcher(event: WatchedEvent) -> None:
                if event.type == EventType.CHANGED:
                    self.event_manager.put(on_change)
            self._watchers[key] = watcher
        return watcher

    async def _watch_broker(self, broker_id: int) -> None:
        await self.zk.exists(BrokerIdZNode.path(broker_id), watch=self._broker_watcher(broker_id))

    # ------------------------------------------------------------------ event dispatch

    async def process(self, event: ControllerEvent) -> None:
        """Process one event (Kafka's KafkaController.process)."""
        if not isinstance(event, ELECTION_EVENTS) and not self.is_active:
            event.preempt()
            return
        try:
            await self._dispatch(event)
        except ControllerMovedError as e:
            log.info("Controller moved to another broker when processing %s: %s", event.name, e)
            await self._maybe_resign()
            event.fail(ErrorCode.not_controller)
        except Exception:
            event.fail(ErrorCode.unknown_server_error)
            raise

    async def _dispatch(self, event: ControllerEvent) -> None:
        match event:
            case Startup():
                await self._elect()
            case ControllerChange():
                await self._maybe_resign()
            case Reelect():
                await self._maybe_resign()
                await self._elect()
            case Expire():
                self.active_controller_id = None
                await self._on_controller_resignation()
            case RegisterBrokerAndReelect():
                await self._register_broker()
                await self._maybe_resign()
                await self._elect()
            case BrokerChange():
                ids = await self.zk.get_all_broker_ids(watch=self._on_broker_change)
                await self.broker_change.process_broker_change(await self.zk.get_brokers(ids))
            case BrokerModifications(broker_id=broker_id) if broker_id in self.ctx.live_brokers:
                got = await self.zk.get_brokers([broker_id])
                await self._watch_broker(broker_id)
                if broker_id in got:
                    await self.broker_change.process_broker_modification(broker_id, got[broker_id][0])
            case TopicChange():
                await self.topic_change.process_topic_change()
            case PartitionModifications(topic=topic):
                await self.topic_change.process_partition_modifications(topic)
            case TopicDeletion():
                await self.topic_change.process_topic_deletion()
            case TopicDeletionStopReplicaResponseReceived():
                await self.deletion.on_stop_replica_response(event.replica_id, event.partition_errors,
                                                             event.top_error)
            case LeaderAndIsrResponseReceived():
                _log_leader_and_isr_errors(event)
                await self.log_dir_event.process_leader_and_isr_response(event)
            case LogDirEventNotification():
                await self.log_dir_event.process_notifications()
            case ControlledShutdown():
                await self.controlled_shutdown.process(event)
            case AlterPartitionReceived():
                await self.alter_partition.process(event)
            case PreferredReplicaLeaderElection():
                await self.preferred_election.process(event)
            case AutoPreferredReplicaLeaderElection():
                await self.preferred_election.check_and_trigger_auto_leader_rebalance(
                    self.config["leader.imbalance.per.broker.percentage"])
            case TopicUncleanLeaderElectionEnable(topic=topic):
                await self.partition_sm.trigger_online_partition_state_change(topic)
            case PartitionReassignment():
                await self.reassignment.on_request_znode()

    # ------------------------------------------------------------------ election

    async def _elect(self) -> None:
        self.active_controller_id = await self.zk.get_controller_id(watch=self._on_controller_znode)
        if self.active_controller_id is not None:
            log.debug("Broker %s has been elected as controller, so stopping the election process",
                      self.active_controller_id)
            return
        try:
            registration = await self.zk.register_controller_and_increment_epoch(self.broker_id)
        except NodeExistsError:
            self.active_controller_id = await self.zk.get_controller_id(watch=self._on_controller_znode)
            return
        self.ctx.epoch = registration.epoch
        self.ctx.epoch_zk_version = registration.epoch_zk_version
        self.active_controller_id = self.broker_id
        log.info("Broker %d became controller with epoch %d", self.broker_id, registration.epoch)
        try:
            await self._on_controller_failover()
        except ControllerMovedError:
            raise
        except SessionExpiredError as e:
            # /controller went with the session; the session listener re-registers and re-elects.
            log.warning("Controller failover interrupted by the ZooKeeper session (%r); resigning", e)
            await self._on_controller_resignation()
            self.active_controller_id = None
        except Exception:
            log.exception("Error during controller failover; resigning")
            await self._trigger_controller_move()

    async def _maybe_resign(self) -> None:
        was_active = self.is_active
        self.active_controller_id = await self.zk.get_controller_id(watch=self._on_controller_znode)
        if was_active and not self.is_active:
            await self._on_controller_resignation()

    async def _trigger_controller_move(self) -> None:
        await self._on_controller_resignation()
        self.active_controller_id = None
        try:
            await self.zk.fenced_multi(self.ctx.epoch_zk_version, lambda tx: tx.delete(ControllerZNode.path))
        except Exception:
            log.exception("could not delete /controller while resigning")

    async def _on_controller_failover(self) -> None:
        started = time.monotonic()

        def phase(name: str) -> None:
            log.info("Controller failover: %s (%.0f ms since start)", name, (time.monotonic() - started) * 1000)

        await self.zk.get_children(DeleteTopicsZNode.path, watch=self.on_topic_deletion)
        await self.zk.exists(PreferredReplicaElectionZNode.path, watch=self._on_preferred_election)
        await self.log_dir_event.on_failover()
        await self._initialize_controller_context()
        phase(f"loaded {len(self.ctx.live_brokers)} brokers, {len(self.ctx.all_topics)} topics, "
              f"{len(self.ctx.leadership)} partition states")
        to_delete, ineligible = await self._fetch_topic_deletions()
        await self.deletion.init(to_delete, ineligible)
        # Brokers must learn the live broker list before any LeaderAndIsr names a leader.  The
        # partition states go with it: a broker that registered just before this election has
        # an empty cache, and an UpdateMetadata without them would make it answer "no such
        # topic" until the state machines below reach its topics.
        await self.batch.send_update_metadata_request(self.ctx.live_or_shutting_down_broker_ids,
                                                      self.ctx.partitions_with_leaders())
        await self.replica_sm.startup()
        phase("replica state machine started")
        await self.partition_sm.startup()
        phase("partition state machine started")
        await self.reassignment.initialize()
        await self.deletion.try_topic_deletion()
        if await self.zk.exists(PreferredReplicaElectionZNode.path) is not None:
            self.event_manager.put(PreferredReplicaLeaderElection())
        if self.config["auto.leader.rebalance.enable"]:
            self._schedule_auto_rebalance()
        self.failover_count += 1
        StateChangeLogger(self.broker_id, controller_epoch=self.ctx.epoch).info(
            f"Controller {self.broker_id} completed failover: {len(self.ctx.live_brokers)} live "
            f"brokers, {len(self.ctx.all_topics)} topics")
        phase("done")

    async def _on_controller_resignation(self) -> None:
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        self.deletion.reset()
        self.partition_sm.shutdown()
        self.replica_sm.shutdown()
        self.batch.clear()
        await self.channel.shutdown()
        self.topic_change.muted_topics.clear()
        if self.ctx.epoch:
            log.info("Resigned as controller (epoch %d)", self.ctx.epoch)
        self.ctx.reset()

    async def _initialize_controller_context(self) -> None:
        ids = await self.zk.get_all_broker_ids(watch=self._on_broker_change)
        brokers = await self.zk.get_brokers(ids)
        self.ctx.add_live_brokers(brokers)
        for broker_id in brokers:
            await self._watch_broker(broker_id)
        topics = await self.zk.get_all_topics(watch=self.on_topic_change)
        self.ctx.all_topics = set(topics)
        await self.topic_change.load_assignments(topics)
        self.ctx.leadership.update(await self.zk.get_partition_states(self.ctx.all_partitions()))
        self.channel.startup(info for info, _ in brokers.values())

    async def _fetch_topic_deletions(self) -> tuple[set[str], set[str]]:
        """Topics marked for deletion, and those of them that cannot proceed yet (a replica
        on a dead broker, or a partition being reassigned)."""
        marked = await self.zk.get_topic_deletions()
        missing = marked - self.ctx.all_topics
        if missing:
            await self.zk.delete_topic_deletion_markers(missing, self.ctx.epoch_zk_version)
        to_delete = marked & self.ctx.all_topics
        ineligible = {
            r.topic for r in self.ctx.replicas_for_partitions(
                tp for t in to_delete for tp in self.ctx.partitions_for_topic(t))
            if not self.ctx.is_replica_online(r.replica, r.topic_partition, include_shutting_down=True)
        }
        ineligible |= {tp.topic for tp in self.ctx.partitions_being_reassigned if tp.topic in to_delete}
        return to_delete, ineligible

    def _topics_being_deleted(self) -> set[str]:
        return self.deletion.topics_to_be_deleted

    def _schedule_auto_rebalance(self) -> None:
        interval = self.config["leader.imbalance.check.interval.seconds"]

        async def tick() -> None:
            while True:
                await asyncio.sleep(interval)
                self.event_manager.put(AutoPreferredReplicaLeaderElection())

        self._rebalance_task = tasks.start(tick(), "auto-leader-rebalance")

    # ------------------------------------------------------------------ DeletionClient

    async def delete_topic(self, topic: str) -> None:
        await self.zk.delete_topic_znodes(topic, self.ctx.epoch_zk_version)

    async def delete_topic_deletions(self, topics: Iterable[str]) -> None:
        await self.zk.delete_topic_deletion_markers(topics, self.ctx.epoch_zk_version)

    def mute_partition_modifications(self, topic: str) -> None:
        self.topic_change.muted_topics.add(topic)

    async def send_metadata_update(self, partitions: Iterable[TopicPartition]) -> None:
        await self.batch.send_update_metadata_request(self.ctx.live_or_shutting_down_broker_ids, partitions)


def _log_leader_and_isr_errors(event: LeaderAndIsrResponseReceived) -> None:
    if event.top_error:
        log.warning("Broker %d refused a LeaderAndIsr request: error %s", event.broker_id,
                    ErrorCode(event.top_error).name)
    bad = {tp: err for tp, err in event.partition_errors.items() if err}
    if bad:
        log.info("Broker %d reported LeaderAndIsr errors for %d partitions: %s", event.broker_id, len(bad),
                 ", ".join(f"{t}-{p}:{ErrorCode(e).name}" for (t, p), e in sorted(bad.items())[:10]))
