"""KafkaController: election, failover and the handlers for every controller event.

Every broker runs one; it is active only while its broker holds ``/controller``.  Watches on
ZooKeeper only enqueue events (see ``events.py``); this class processes them one at a time.
A write that finds ``/controller_epoch`` moved raises ControllerMovedError, and the controller
resigns.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kazoo.exceptions import SessionExpiredError
from kazoo.protocol.states import EventType, WatchedEvent

from odradek import tasks
from odradek.config import KafkaConfig
from odradek.controller.channel import ControllerBrokerRequestBatch, ControllerChannelManager
from odradek.controller.context import (
    ControllerContext,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
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
from odradek.controller.leader_selectors import ElectionType
from odradek.controller.partition_state_machine import PartitionState, PartitionStateMachine
from odradek.controller.reassignment import ReassignmentManager
from odradek.controller.replica_state_machine import ReplicaState, ReplicaStateMachine
from odradek.controller.topic_deletion import TopicDeletionManager
from odradek.protocol.errors import ErrorCode
from odradek.state_change_log import StateChangeLogger
from odradek.zk.client import ControllerMovedError, KafkaZkClient, NodeExistsError
from odradek.zk.zk_data import (
    BrokerIdsZNode,
    BrokerIdZNode,
    ControllerZNode,
    DeleteTopicsZNode,
    PreferredReplicaElectionZNode,
    TopicAssignment,
    TopicsZNode,
    TopicZNode,
    topic_id_to_uuid,
)

log = logging.getLogger(__name__)

__all__ = ["KafkaController"]


class KafkaController:
    def __init__(self, config: KafkaConfig, zk: KafkaZkClient,
                 register_broker: Callable[[], Awaitable[int]]) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.zk = zk
        self._register_broker = register_broker
        self.ctx = ControllerContext()
        self.active_controller_id: int | None = None
        self.event_manager = ControllerEventManager(self.process)
        self.channel = ControllerChannelManager(
            self.broker_id, config.inter_broker_listener_name, config["controller.socket.timeout.ms"])
        self.batch = ControllerBrokerRequestBatch(
            self.broker_id, self.ctx, self.channel, self.event_manager.put, self._topics_being_deleted)
        self.partition_sm = PartitionStateMachine(
            self.broker_id, self.ctx, zk, self.batch, config["unclean.leader.election.enable"])
        self.replica_sm = ReplicaStateMachine(self.broker_id, self.ctx, zk, self.batch)
        self.deletion = TopicDeletionManager(
            config["delete.topic.enable"], self.ctx, self.replica_sm, self.partition_sm, self)
        self.reassignment = ReassignmentManager(self)
        self._topic_watchers: dict[str, Callable[[WatchedEvent], None]] = {}
        self._muted_topics: set[str] = set()
        self._rebalance_task: asyncio.Task[None] | None = None
        self.logger = StateChangeLogger(self.broker_id, controller_epoch=0)
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
        if state == "LOST":
            self._session_lost = True
            self.event_manager.clear_and_put(Expire())
        elif state == "CONNECTED" and getattr(self, "_session_lost", False):
            self._session_lost = False
            self.event_manager.put(RegisterBrokerAndReelect())

    # ------------------------------------------------------------------ watch callbacks

    def _on_controller_znode(self, event: WatchedEvent) -> None:
        self.event_manager.put(Reelect() if event.type == EventType.DELETED else ControllerChange())

    def _on_broker_change(self, _event: WatchedEvent) -> None:
        self.event_manager.put(BrokerChange())

    def _on_topic_change(self, _event: WatchedEvent) -> None:
        self.event_manager.put(TopicChange())

    def _on_topic_deletion(self, _event: WatchedEvent) -> None:
        self.event_manager.put(TopicDeletion())

    def _on_preferred_election(self, event: WatchedEvent) -> None:
        if event.type in (EventType.CREATED, EventType.CHANGED):
            self.event_manager.put(PreferredReplicaLeaderElection())

    def on_reassignment_znode(self, event: WatchedEvent) -> None:
        if event.type in (EventType.CREATED, EventType.CHANGED):
            self.event_manager.put(PartitionReassignment())

    def _topic_watcher(self, topic: str) -> Callable[[WatchedEvent], None]:
        watcher = self._topic_watchers.get(topic)
        if watcher is None:
            def watcher(event: WatchedEvent, topic: str = topic) -> None:
                if event.type == EventType.CHANGED:
                    self.event_manager.put(PartitionModifications(topic))
            self._topic_watchers[topic] = watcher
        return watcher

    def _broker_watcher(self, broker_id: int) -> Callable[[WatchedEvent], None]:
        key = f"broker:{broker_id}"
        watcher = self._topic_watchers.get(key)
        if watcher is None:
            def watcher(event: WatchedEvent, broker_id: int = broker_id) -> None:
                if event.type == EventType.CHANGED:
                    self.event_manager.put(BrokerModifications(broker_id))
            self._topic_watchers[key] = watcher
        return watcher

    # ------------------------------------------------------------------ event dispatch

    async def process(self, event: ControllerEvent) -> None:
        try:
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
                    await self._process_broker_change()
                case BrokerModifications(broker_id=broker_id):
                    await self._process_broker_modification(broker_id)
                case TopicChange():
                    await self._process_topic_change()
                case PartitionModifications(topic=topic):
                    await self._process_partition_modifications(topic)
                case TopicDeletion():
                    await self._process_topic_deletion()
                case TopicDeletionStopReplicaResponseReceived():
                    await self._process_stop_replica_response(event)
                case LeaderAndIsrResponseReceived():
                    self._process_leader_and_isr_response(event)
                case ControlledShutdown():
                    await self._process_controlled_shutdown(event)
                case AlterPartitionReceived():
                    await self._process_alter_partition(event)
                case PreferredReplicaLeaderElection():
                    await self._process_preferred_election(event)
                case AutoPreferredReplicaLeaderElection():
                    await self._check_and_trigger_auto_leader_rebalance()
                case TopicUncleanLeaderElectionEnable(topic=topic):
                    if self.is_active:
                        await self.partition_sm.trigger_online_partition_state_change(topic)
                case PartitionReassignment():
                    if self.is_active:
                        await self.reassignment.on_request_znode()
                case _:
                    log.warning("unknown controller event %r", event)
        except ControllerMovedError as e:
            log.info("Controller moved to another broker when processing %s: %s", event.name, e)
            await self._maybe_resign()
            event.fail(ErrorCode.not_controller)
        except Exception:
            event.fail(ErrorCode.unknown_server_error)
            raise

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
        self.logger = StateChangeLogger(self.broker_id, controller_epoch=self.ctx.epoch)
        started = time.monotonic()

        def phase(name: str) -> None:
            log.info("Controller failover: %s (%.0f ms since start)", name, (time.monotonic() - started) * 1000)

        await self.zk.get_children(DeleteTopicsZNode.path, watch=self._on_topic_deletion)
        await self.zk.exists(PreferredReplicaElectionZNode.path, watch=self._on_preferred_election)
        await self._initialize_controller_context()
        phase(f"loaded {len(self.ctx.live_brokers)} brokers, {len(self.ctx.all_topics)} topics, "
              f"{len(self.ctx.leadership)} partition states")
        to_delete, ineligible = await self._fetch_topic_deletions()
        await self.deletion.init(to_delete, ineligible)
        # Brokers must learn the live broker list before any LeaderAndIsr names a leader.  The
        # partition states go with it: a broker that registered just before this election has
        # an empty cache, and an UpdateMetadata without them would make it answer "no such
        # topic" until the state machines below reach its topics.
        await self.send_update_metadata_request(self.ctx.live_or_shutting_down_broker_ids,
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
        self.logger.info(f"Controller {self.broker_id} completed failover: {len(self.ctx.live_brokers)} live "
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
        self._muted_topics.clear()
        if self.ctx.epoch:
            log.info("Resigned as controller (epoch %d)", self.ctx.epoch)
        self.ctx.reset()

    async def _initialize_controller_context(self) -> None:
        ids = await self.zk.get_all_broker_ids(watch=self._on_broker_change)
        brokers = await self.zk.get_brokers(ids)
        self.ctx.add_live_brokers(brokers)
        for broker_id in brokers:
            await self.zk.exists(BrokerIdZNode.path(broker_id), watch=self._broker_watcher(broker_id))
        topics = await self.zk.get_all_topics(watch=self._on_topic_change)
        self.ctx.all_topics = set(topics)
        await self._load_assignments(topics)
        self.ctx.leadership.update(await self.zk.get_partition_states(self.ctx.all_partitions()))
        self.channel.startup(info for info, _ in brokers.values())

    async def _load_assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        topics = list(topics)
        got = await asyncio.gather(*(self.zk.get_topic_assignment(t, watch=self._topic_watcher(t)) for t in topics))
        loaded = {}
        for topic, entry in zip(topics, got, strict=True):
            if entry is None:
                continue
            assignment, version = entry
            if assignment.topic_id is None:
                assignment = await self._assign_topic_id(topic, assignment, version)
            self.ctx.topic_ids[topic] = assignment.topic_id or ""
            for p, replicas in assignment.partitions.items():
                self.ctx.update_partition_full_replica_assignment(
                    TopicPartition(topic, p),
                    ReplicaAssignment(tuple(replicas), tuple(assignment.adding_replicas.get(p, ())),
                                      tuple(assignment.removing_replicas.get(p, ()))))
            loaded[topic] = assignment
        return loaded

    async def _assign_topic_id(self, topic: str, assignment: TopicAssignment, version: int) -> TopicAssignment:
        """Topics created by old tools have no id; give them one, as Kafka 2.8+ controllers do."""
        with_id = TopicAssignment(assignment.partitions, TopicZNode.new_topic_id(),
                                  assignment.adding_replicas, assignment.removing_replicas)
        try:
            await self.zk.fenced_multi(self.ctx.epoch_zk_version, lambda tx: tx.set_data(
                TopicZNode.path(topic), TopicZNode.encode(with_id), version))
        except ControllerMovedError:
            raise
        except Exception:
            log.warning("could not store a topic id for %s", topic, exc_info=True)
        return with_id

    async def _fetch_topic_deletions(self) -> tuple[set[str], set[str]]:
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

    # ------------------------------------------------------------------ brokers

    async def _process_broker_change(self) -> None:
        if not self.is_active:
            return
        ids = set(await self.zk.get_all_broker_ids(watch=self._on_broker_change))
        current = await self.zk.get_brokers(ids)
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
            await self.zk.exists(BrokerIdZNode.path(b), watch=self._broker_watcher(b))
        for b in bounced:
            await self.channel.remove_broker(b)
            self.ctx.remove_live_brokers([b])
        for b in dead_ids:
            await self.channel.remove_broker(b)
            self.ctx.remove_live_brokers([b])
        if new_ids:
            await self._on_broker_startup(new_ids)
        if bounced:
            await self._on_broker_failure(bounced)
            for b in bounced:
                self.ctx.add_live_brokers({b: current[b]})
                self.channel.add_broker(current[b][0])
            await self._on_broker_startup(bounced)
        if dead_ids:
            await self._on_broker_failure(dead_ids)

    async def _process_broker_modification(self, broker_id: int) -> None:
        if not self.is_active or broker_id not in self.ctx.live_brokers:
            return
        got = await self.zk.get_brokers([broker_id])
        await self.zk.exists(BrokerIdZNode.path(broker_id), watch=self._broker_watcher(broker_id))
        if broker_id in got and got[broker_id][0] != self.ctx.live_brokers[broker_id]:
            self.ctx.live_brokers[broker_id] = got[broker_id][0]
            await self.channel.remove_broker(broker_id)
            self.channel.add_broker(got[broker_id][0])
            await self.send_update_metadata_request(self.ctx.live_or_shutting_down_broker_ids, [])

    async def _on_broker_startup(self, new_ids: set[int]) -> None:
        log.info("New broker startup callback for %s", sorted(new_ids))
        self.ctx.shutting_down_broker_ids -= new_ids
        existing = self.ctx.live_or_shutting_down_broker_ids - new_ids
        await self.send_update_metadata_request(existing, [])
        await self.send_update_metadata_request(new_ids, self.ctx.partitions_with_leaders())
        replicas = self.ctx.replicas_on_brokers(new_ids)
        deleting = [r for r in replicas if self.deletion.is_topic_queued_up_for_deletion(r.topic)]
        await self.replica_sm.handle_state_changes(
            [r for r in replicas if not self.deletion.is_topic_queued_up_for_deletion(r.topic)], ReplicaState.ONLINE)
        await self.partition_sm.trigger_online_partition_state_change()
        for tp in sorted({r.topic_partition for r in replicas} & self.ctx.partitions_being_reassigned):
            await self.reassignment.maybe_complete(tp)
        if deleting:
            await self.deletion.resume_deletion_for_topics({r.topic for r in deleting})

    async def _on_broker_failure(self, dead_ids: set[int]) -> None:
        log.info("Broker failure callback for %s", sorted(dead_ids))
        self.ctx.shutting_down_broker_ids -= dead_ids
        await self.on_replicas_become_offline(self.ctx.replicas_on_brokers(dead_ids))

    async def on_replicas_become_offline(self, replicas: list[PartitionAndReplica]) -> None:
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
            await self.send_update_metadata_request(self.ctx.live_or_shutting_down_broker_ids, [])

    async def send_update_metadata_request(self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        self.batch.new_batch()
        self.batch.add_update_metadata_request_for_brokers(broker_ids, partitions)
        await self.batch.send_requests_to_brokers(self.ctx.epoch)

    # ------------------------------------------------------------------ topics

    async def _process_topic_change(self) -> None:
        if not self.is_active:
            return
        topics = await self.zk.get_all_topics(watch=self._on_topic_change)
        new_topics = topics - self.ctx.all_topics
        deleted = self.ctx.all_topics - topics
        self.ctx.all_topics = set(topics)
        for topic in deleted:
            self.ctx.remove_topic(topic)
            self.ctx.all_topics.discard(topic)
        if not new_topics:
            return
        await self._load_assignments(new_topics)
        self._muted_topics -= new_topics
        new_partitions = [tp for t in sorted(new_topics) for tp in self.ctx.partitions_for_topic(t)]
        log.info("New topics: %s, deleted topics: %s, new partition count: %d",
                 sorted(new_topics), sorted(deleted), len(new_partitions))
        await self._on_new_partition_creation(new_partitions)

    async def _process_partition_modifications(self, topic: str) -> None:
        if not self.is_active or topic in self._muted_topics:
            return
        entry = await self.zk.get_topic_assignment(topic, watch=self._topic_watcher(topic))
        if entry is None:
            return
        assignment, _ = entry
        existing = self.ctx.assignments.get(topic, {})
        added = {p: r for p, r in assignment.partitions.items() if p not in existing}
        if not added:
            return
        if self.deletion.is_topic_queued_up_for_deletion(topic):
            log.error("Skipping adding partitions %s for topic %s since it is currently being deleted",
                      sorted(added), topic)
            return
        for p, replicas in added.items():
            self.ctx.update_partition_full_replica_assignment(TopicPartition(topic, p), ReplicaAssignment(tuple(replicas)))
        log.info("New partitions to be added for topic %s: %s", topic, sorted(added))
        await self._on_new_partition_creation([TopicPartition(topic, p) for p in sorted(added)])

    async def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        replicas = self.ctx.replicas_for_partitions(partitions)
        await self.partition_sm.handle_state_changes(partitions, PartitionState.NEW)
        await self.replica_sm.handle_state_changes(replicas, ReplicaState.NEW)
        await self.partition_sm.handle_state_changes(partitions, PartitionState.ONLINE, ElectionType.OFFLINE)
        await self.replica_sm.handle_state_changes(replicas, ReplicaState.ONLINE)

    # ------------------------------------------------------------------ deletion

    async def _process_topic_deletion(self) -> None:
        if not self.is_active:
            return
        marked = await self.zk.get_topic_deletions(watch=self._on_topic_deletion)
        missing = marked - self.ctx.all_topics
        if missing:
            log.info("Deleting markers of topics that do not exist: %s", sorted(missing))
            await self.zk.delete_topic_deletion_markers(missing, self.ctx.epoch_zk_version)
        topics = marked - missing
        if not topics:
            return
        if not self.config["delete.topic.enable"]:
            log.info("Removing %s from /admin/delete_topics since delete.topic.enable is false", sorted(topics))
            await self.zk.delete_topic_deletion_markers(topics, self.ctx.epoch_zk_version)
            return
        new = topics - self.deletion.topics_to_be_deleted
        if new:
            log.info("Starting topic deletion for topics %s", sorted(new))
        reassigning = {tp.topic for tp in self.ctx.partitions_being_reassigned}
        self.deletion.mark_topic_ineligible_for_deletion(topics & reassigning, "partition reassignment in progress")
        await self.deletion.enqueue_topics_for_deletion(topics)

    async def _process_stop_replica_response(self, event: TopicDeletionStopReplicaResponseReceived) -> None:
        if not self.is_active:
            return
        if event.top_error:
            in_error = set(event.partition_errors)
        else:
            in_error = {tp for tp, err in event.partition_errors.items() if err}
        failed = [PartitionAndReplica(t, p, event.replica_id) for t, p in sorted(in_error)]
        done = [PartitionAndReplica(t, p, event.replica_id) for t, p in sorted(set(event.partition_errors) - in_error)]
        if failed:
            await self.deletion.fail_replica_deletion(failed)
        if done:
            await self.deletion.complete_replica_deletion(done)

    # DeletionClient ------------------------------------------------------------

    async def delete_topic(self, topic: str) -> None:
        await self.zk.delete_topic_znodes(topic, self.ctx.epoch_zk_version)

    async def delete_topic_deletions(self, topics: Iterable[str]) -> None:
        await self.zk.delete_topic_deletion_markers(topics, self.ctx.epoch_zk_version)

    def mute_partition_modifications(self, topic: str) -> None:
        self._muted_topics.add(topic)

    async def send_metadata_update(self, partitions: Iterable[TopicPartition]) -> None:
        await self.send_update_metadata_request(self.ctx.live_or_shutting_down_broker_ids, partitions)

    # ------------------------------------------------------------------ responses

    def _process_leader_and_isr_response(self, event: LeaderAndIsrResponseReceived) -> None:
        if event.top_error:
            log.warning("Broker %d refused a LeaderAndIsr request: error %s", event.broker_id,
                        ErrorCode(event.top_error).name)
        bad = {tp: err for tp, err in event.partition_errors.items() if err}
        if bad:
            log.info("Broker %d reported LeaderAndIsr errors for %d partitions: %s", event.broker_id, len(bad),
                     ", ".join(f"{t}-{p}:{ErrorCode(e).name}" for (t, p), e in sorted(bad.items())[:10]))

    # ------------------------------------------------------------------ controlled shutdown

    async def _process_controlled_shutdown(self, event: ControlledShutdown) -> None:
        """Move leadership off a broker that is shutting down; reply with the partitions it
        still leads (the broker retries until that set is empty)."""
        if not self.is_active:
            event.answer(ErrorCode.not_controller, [])
            return
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

    # ------------------------------------------------------------------ AlterPartition

    async def _process_alter_partition(self, event: AlterPartitionReceived) -> None:
        """A leader asks for a new ISR.  Accept only from the current leader, at the current
        leader epoch and partition (znode) version; the controller writes ZooKeeper and tells
        the replicas."""
        if not self.is_active:
            event.answer(ErrorCode.not_controller, {})
            return
        if event.broker_epoch != -1 and event.broker_epoch < self.ctx.broker_epochs.get(event.broker_id, -1):
            event.answer(ErrorCode.stale_broker_epoch, {})
            return
        # Topic ids are resolved here, in the event thread, against a fully loaded context.
        names = {topic_id_to_uuid(tid): name for name, tid in self.ctx.topic_ids.items()}
        ids = {name: tid for tid, name in names.items()}
        results: dict[tuple[Any, int], Any] = {}
        proposed = {}
        for (topic_id, partition), (leader_epoch, new_isr, partition_epoch) in event.changes.items():
            topic = names.get(topic_id)
            if topic is None:
                results[(topic_id, partition)] = ErrorCode.unknown_topic_id
                continue
            tp = TopicPartition(topic, partition)
            current = self.ctx.leadership.get(tp)
            if current is None:
                results[(topic_id, partition)] = ErrorCode.unknown_topic_or_partition
            elif current.leader != event.broker_id:
                results[(topic_id, partition)] = ErrorCode.not_leader_or_follower
            elif leader_epoch < current.leader_epoch:
                results[(topic_id, partition)] = ErrorCode.fenced_leader_epoch
            elif leader_epoch > current.leader_epoch:
                results[(topic_id, partition)] = ErrorCode.unknown_leader_epoch
            elif partition_epoch != current.zk_version:
                if tuple(new_isr) == current.isr:
                    results[(topic_id, partition)] = current  # a retry of a change already made
                else:
                    results[(topic_id, partition)] = ErrorCode.invalid_update_version
            elif any(b not in self.ctx.live_brokers for b in new_isr):
                results[(topic_id, partition)] = ErrorCode.ineligible_replica
            else:
                proposed[tp] = type(current)(current.leader, current.leader_epoch, tuple(new_isr),
                                             self.ctx.epoch, current.zk_version)
        if proposed:
            written = await self.zk.update_partition_states(proposed, self.ctx.epoch_zk_version)
            changed = []
            for tp, res in written.items():
                if isinstance(res, Exception):
                    results[(ids[tp.topic], tp.partition)] = ErrorCode.invalid_update_version
                    continue
                self.ctx.leadership[tp] = res
                results[(ids[tp.topic], tp.partition)] = res
                changed.append(tp)
                self.logger.info(f"Changed ISR of partition {tp} to [{','.join(map(str, res.isr))}] at the "
                                 f"request of leader {event.broker_id} (partition epoch {res.zk_version})")
            if changed:
                await self.send_update_metadata_request(self.ctx.live_or_shutting_down_broker_ids, changed)
            event.answer(ErrorCode.none, results)
            for tp in changed:
                if tp in self.ctx.partitions_being_reassigned:
                    await self.reassignment.maybe_complete(tp)
            return
        event.answer(ErrorCode.none, results)

    # ------------------------------------------------------------------ preferred leaders

    async def _process_preferred_election(self, event: PreferredReplicaLeaderElection) -> None:
        if not self.is_active:
            event.answer(ErrorCode.not_controller, {})
            return
        partitions: set[TopicPartition]
        from_zk = event.partitions is None
        if from_zk:
            got = await self.zk.get(PreferredReplicaElectionZNode.path, watch=self._on_preferred_election)
            if got is None:
                return
            partitions = {TopicPartition(t, p) for t, p in PreferredReplicaElectionZNode.decode(got[0])}
        else:
            partitions = {TopicPartition(t, p) for t, p in event.partitions}  # type: ignore[union-attr]
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

    def _schedule_auto_rebalance(self) -> None:
        interval = self.config["leader.imbalance.check.interval.seconds"]

        async def tick() -> None:
            while True:
                await asyncio.sleep(interval)
                self.event_manager.put(AutoPreferredReplicaLeaderElection())

        self._rebalance_task = tasks.start(tick(), "auto-leader-rebalance")

    async def _check_and_trigger_auto_leader_rebalance(self) -> None:
        if not self.is_active:
            return
        by_preferred: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in self.ctx.all_partitions():
            replicas = self.ctx.partition_replica_assignment(tp)
            if replicas and not self.deletion.is_topic_queued_up_for_deletion(tp.topic):
                by_preferred[replicas[0]].append(tp)
        threshold = self.config["leader.imbalance.per.broker.percentage"] / 100
        for broker_id, tps in by_preferred.items():
            not_preferred = [tp for tp in tps if tp in self.ctx.leadership and self.ctx.leadership[tp].leader != broker_id]
            if tps and len(not_preferred) / len(tps) > threshold:
                candidates = [tp for tp in not_preferred if self.ctx.is_replica_online(broker_id, tp)
                              and tp not in self.ctx.partitions_being_reassigned]
                if candidates:
                    log.info("Leader imbalance on broker %d (%d of %d not led by it): electing preferred leaders",
                             broker_id, len(not_preferred), len(tps))
                    await self.elect_preferred_leaders(candidates)


# Paths the controller watches, for readers of this module.
WATCHED_PATHS = (ControllerZNode.path, BrokerIdsZNode.path, TopicsZNode.path, DeleteTopicsZNode.path,
                 PreferredReplicaElectionZNode.path)
