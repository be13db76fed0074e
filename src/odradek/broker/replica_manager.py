"""ReplicaManager: the partitions this broker leads or follows, and their data path.

Control: ``become_leader_or_follower`` applies LeaderAndIsr as decided per partition by
:mod:`~odradek.broker.leader_and_isr` (make leaders, then followers); ``stop_replicas``
stops (and maybe deletes) replicas.  Data: leaders append produced batches
(``append_records``, with acks 0/1/-1, waiting in a :class:`DelayedProduce`), serve fetches
from consumers (up to the high watermark) and followers (up to the log end offset,
recording each follower's position; waiting in a :class:`DelayedFetch`), keep the high
watermark at the smallest log end offset in the ISR and ask the controller to shrink or
expand the ISR.

Log directories: a partition whose log directory failed is offline here
(:meth:`handle_log_dir_failure`, Kafka's HostedPartition.Offline): requests for it answer
KAFKA_STORAGE_ERROR until a restart finds the directory healthy.  Moves between directories
(AlterReplicaLogDirs) are :class:`ReplicaAlterLogDirsManager`'s.

Transactions: client transactional batches that would start a transaction are first
verified with the transaction coordinator (KIP-890, ``append_records_async``); markers and
transactional offset commits are appended with origin COORDINATOR; read_committed fetches
and ListOffsets stop at the last stable offset, with the aborted transactions of the range.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from odradek import tasks
from odradek.broker.alter_partition import AlterPartitionManager
from odradek.broker.delayed_delete_records import DelayedDeleteRecords, DeleteRecordsPartitionResult
from odradek.broker.delayed_fetch import (
    READ_COMMITTED,
    DelayedFetch,
    FetchPartitionRequest,
    FetchPartitionResult,
)
from odradek.broker.delayed_produce import DelayedProduce, ProducePartitionResult
from odradek.broker.describe_log_dirs import LogDirDescription, describe_log_dirs
from odradek.broker.fetcher import ReplicaFetcherManager
from odradek.broker.leader_and_isr import (
    Transition,
    classify,
    describe_state,
    leader_and_isr_response,
    stale_request_error,
)
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.metrics.topic_stats import BrokerTopicStats
from odradek.broker.partition import Partition
from odradek.broker.purgatory import Purgatory
from odradek.broker.replica_alter_log_dirs import ReplicaAlterLogDirsManager
from odradek.broker.replica_selector import ReplicaView, replica_selector
from odradek.broker.replication_quota import ReplicationQuotaManager
from odradek.common import INTERNAL_TOPICS, TopicPartition, now_ms
from odradek.log.log_info import AppendOrigin
from odradek.log.producer_state import NO_GUARD_CHECK
from odradek.protocol import control
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.produce_request import validate_records
from odradek.protocol.records import RecordBatchHeader, parse_header
from odradek.state_change_log import StateChangeLogger
from odradek.zk.zk_data import uuid_to_topic_id

if TYPE_CHECKING:
    from odradek.config import KafkaConfig
    from odradek.log.log import Log
    from odradek.log.log_manager import CheckpointWrite, LogManager
    from odradek.security.client import ClientSecurity

log = logging.getLogger(__name__)

__all__ = ["PartitionVerifier", "ReplicaManager", "TimeSlice", "transactional_header"]

# StopReplica leader epochs that bypass the stale-epoch check: unknown, and "topic deleted".
_NO_EPOCH = -1
_EPOCH_DURING_DELETE = -2
# Append errors answered without the log start offset (Kafka's ReplicaManager.appendToLocalLog
# catches these before the partition is known good); every other one carries it.
_NO_LOG_START_OFFSET = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower,
                                  ErrorCode.message_too_large, ErrorCode.record_list_too_large,
                                  ErrorCode.corrupt_message, ErrorCode.kafka_storage_error})


class TimeSlice:
    """Says when a long piece of work has held the event loop for a time slice."""

    SLICE_S = 0.01

    def __init__(self) -> None:
        self._since = time.monotonic()

    async def pause_if_due(self) -> None:
        """Let the event loop run if this slice is used up."""
        now = time.monotonic()
        if now - self._since >= self.SLICE_S:
            self._since = now
            await asyncio.sleep(0)


class PartitionVerifier(Protocol):
    """KIP-890 part 1 (Kafka 3.6's AddPartitionsToTxnManager): asks the transaction coordinator
    whether partitions are in a producer's ongoing transaction, before a transactional batch
    starts one there (transaction/verifier.py's TxnVerifier)."""

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Sequence[TopicPartition]) -> Mapping[TopicPartition, ErrorCode]:
        """Each partition's error as a Produce response reports it (coordinator trouble as the
        retriable NOT_ENOUGH_REPLICAS, a fenced producer as INVALID_PRODUCER_EPOCH); NONE for
        a partition in the transaction."""
        ...


def transactional_header(records: bytes | bytearray | memoryview | None) -> RecordBatchHeader | None:
    """The header of the first batch of ``records`` if it is a transactional data batch (v3+
    Produce requests carry one batch); None otherwise, malformed input included (the
    append reports that)."""
    if not records:
        return None
    try:
        header = parse_header(records)
    except KafkaError:
        return None
    return header if header.is_transactional and not header.is_control else None


class ReplicaManager:
    def __init__(self, broker_id: int, config: KafkaConfig, metadata_cache: MetadataCache,
                 log_manager: LogManager, broker_epoch: Callable[[], int],
                 topic_log_config: Callable[[str, Mapping[str, str]], Any] | None = None, *,
                 inter_broker_security: ClientSecurity | None = None,
                 txn_verifier: PartitionVerifier | None = None) -> None:
        self.broker_id = broker_id
        self.config = config
        self.metadata_cache = metadata_cache
        self.log_manager = log_manager
        self._broker_epoch = broker_epoch
        self._topic_log_config = topic_log_config or (lambda _t, overrides: config.log_config(overrides))
        self.controller_epoch = 0
        # Held while a control request (LeaderAndIsr, StopReplica, UpdateMetadata) is applied,
        # as Kafka's replicaStateChangeLock: a LeaderAndIsr that yields the loop half-way
        # must not interleave with the next control request.
        self.state_change_lock = asyncio.Lock()
        self.partitions: dict[TopicPartition, Partition] = {}
        # Partitions whose log directory failed (Kafka's HostedPartition.Offline).
        self.offline_partitions: set[TopicPartition] = set()
        self.logger = StateChangeLogger(broker_id)
        self.produce_purgatory = Purgatory()
        self.fetch_purgatory = Purgatory()
        self.delete_records_purgatory = Purgatory()
        self._fetch_wakeups: set[TopicPartition] = set()  # see wake_fetches
        self._fetch_wakeup_scheduled = False
        # KIP-392.  The key is read raw until config.py knows it (it warns about it meanwhile).
        self.replica_selector = replica_selector(config.originals.get("replica.selector.class"))
        # Replication throttles (KIP-73): what this broker sends as a leader, and fetches as a follower.
        windows = (config["replication.quota.window.num"], config["replication.quota.window.size.seconds"])
        self.leader_quota = ReplicationQuotaManager(broker_id, "leader.replication.throttled.replicas", *windows)
        self.follower_quota = ReplicationQuotaManager(broker_id, "follower.replication.throttled.replicas", *windows)
        # Moves between log directories (KIP-113) share one rate, whatever the throttled replicas.
        self.alter_log_dirs_quota = ReplicationQuotaManager(broker_id, "", *windows)
        self.update_replication_throttles(config)
        # Consumers fetch from followers only when a leader's selector sends them there; then a
        # follower's high watermark moving must wake the fetches waiting on it.
        # BytesIn/Out, MessagesIn, ... per topic (plain ints; the metrics collector reads them).
        self.topic_stats = BrokerTopicStats()
        self.fetchers = ReplicaFetcherManager(broker_id, config, metadata_cache, self.logger.info,
                                              security=inter_broker_security, topic_stats=self.topic_stats,
                                              on_high_watermark=self.wake_fetches if self.replica_selector else None,
                                              quota=self.follower_quota)
        self.alter_partition = AlterPartitionManager(broker_id, broker_epoch, metadata_cache,
                                                     config.inter_broker_listener_name, self._on_isr_applied,
                                                     security=inter_broker_security)
        self._tasks: list[asyncio.Task[None]] = []
        # Hooks for components that follow leadership (the group coordinator loads and unloads
        # the groups of __consumer_offsets partitions this broker leads).
        self.on_become_leader: list[Callable[[list[Partition]], None]] = []
        self.on_become_follower: list[Callable[[list[Partition]], None]] = []
        self.on_stop_replica: list[Callable[[list[tuple[Partition | None, TopicPartition, bool]]], None]] = []
        # None: transactional batches are appended unverified (transaction.partition.verification.enable=false).
        self.txn_verifier = txn_verifier
        self.alter_log_dirs = ReplicaAlterLogDirsManager(log_manager, self.partitions, self.offline_partitions,
                                                         metadata_cache, self.alter_log_dirs_quota)

    def update_replication_throttles(self, config: KafkaConfig) -> None:
        """The throttle rates of a (new, dynamic) broker config."""
        self.leader_quota.update_bound(config["leader.replication.throttled.rate"])
        self.follower_quota.update_bound(config["follower.replication.throttled.rate"])
        self.alter_log_dirs_quota.update_bound(config["replica.alter.log.dirs.io.max.bytes.per.second"])

    def update_throttled_replicas(self, topic: str, overrides: Mapping[str, str]) -> None:
        """A topic's config was applied: which of its replicas here are throttled."""
        self.leader_quota.update_topic(topic, overrides)
        self.follower_quota.update_topic(topic, overrides)

    # ------------------------------------------------------------------ lifecycle

    def startup(self) -> None:
        self.alter_partition.start()
        self._tasks.append(tasks.start(self._isr_expiration_loop(), "isr-expiration"))
        self._tasks.append(tasks.start(self._maintenance_loop(), "log-maintenance"))

    async def shutdown(self) -> None:
        for task in self._tasks:
            await tasks.cancel_and_wait(task)
        self._tasks.clear()
        await self.fetchers.shutdown()
        await self.alter_log_dirs.shutdown()
        await self.alter_partition.stop()

    async def _maintenance_loop(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            try:
                checkpoints = self.log_manager.tick_without_checkpoint_writes()
                created = self.log_manager.take_created_logs()
                # Their fsyncs wait in a worker thread, not in the event loop.
                if checkpoints:
                    await asyncio.to_thread(self.log_manager.write_checkpoints, checkpoints)
                if created:
                    await asyncio.to_thread(self.log_manager.flush_created_logs, created)
            except Exception:
                log.exception("log maintenance failed")

    async def _isr_expiration_loop(self) -> None:
        lag_ms = self.config["replica.lag.time.max.ms"]
        while True:
            await asyncio.sleep(lag_ms / 2000)
            self.maybe_shrink_isrs(now_ms())

    # ------------------------------------------------------------------ queries

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get(TopicPartition(topic, partition))

    def partition_or_error(self, tp: TopicPartition, current_leader_epoch: int = -1, *,
                           followers_too: bool = False) -> Partition | ErrorCode:
        """Kafka's getPartitionOrError with the leader-epoch check: the partition (with its
        log) if this broker leads it, or hosts it with ``followers_too``, at
        ``current_leader_epoch`` (-1: any; KIP-320); else the error to answer with.  Callers
        test ``isinstance(result, Partition)``: an isinstance check against the ErrorCode enum
        costs several times more, and produce and fetch make one per partition."""
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            if tp in self.offline_partitions:
                return ErrorCode.kafka_storage_error
            known = self.metadata_cache.partition(tp.topic, tp.partition) is not None
            return ErrorCode.not_leader_or_follower if known else ErrorCode.unknown_topic_or_partition
        if not p.is_leader and not followers_too:
            return ErrorCode.not_leader_or_follower
        if current_leader_epoch >= 0 and current_leader_epoch != p.leader_epoch:
            return ErrorCode.fenced_leader_epoch if current_leader_epoch < p.leader_epoch \
                else ErrorCode.unknown_leader_epoch
        return p

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self.partitions.values() if p.is_leader]

    def topics_without_logs(self, request: control.LeaderAndIsrRequest) -> set[str]:
        """Topics of a LeaderAndIsr request that need a log created here (their config is
        then read from ZooKeeper before the request is applied)."""
        return {ts.topic_name for ts in request.topic_states for ps in ts.partition_states
                if self.log_manager.get_log(ts.topic_name, ps.partition_index) is None}

    # ------------------------------------------------------------------ LeaderAndIsr

    async def become_leader_or_follower(self, correlation_id: int, request: control.LeaderAndIsrRequest,
                                        topic_configs: Mapping[str, Mapping[str, str]] | None = None
                                        ) -> control.LeaderAndIsrResponse:
        """Kafka's becomeLeaderOrFollower: refuse a stale controller or broker epoch,
        classify each partition (:func:`~odradek.broker.leader_and_isr.classify`), open the
        logs of those that change, then make leaders, then followers.  The event loop runs every :class:`TimeSlice`:
        thousands of partitions (creating their logs, recording leader epochs) would otherwise
        stall this broker's requests and the controller that shares its loop for seconds.
        Callers hold :attr:`state_change_lock` so control requests apply one at a time."""
        pace = TimeSlice()
        ctrl = f"controller {request.controller_id} epoch {request.controller_epoch}"
        stale = stale_request_error(request.controller_epoch, request.broker_epoch, self.controller_epoch,
                                    self._broker_epoch())
        if stale != ErrorCode.none:
            if stale == ErrorCode.stale_controller_epoch:
                self.logger.warn(f"Ignoring LeaderAndIsr request from {ctrl} with correlation id {correlation_id}: "
                                 f"the controller epoch is older than the current {self.controller_epoch}")
            else:
                self.logger.warn(f"Ignoring LeaderAndIsr request from {ctrl}: broker epoch {request.broker_epoch} "
                                 f"is older than the current {self._broker_epoch()}")
            return leader_and_isr_response(stale, {(ts.topic_id, ps.partition_index): stale
                                                   for ts in request.topic_states
                                                   for ps in ts.partition_states})
        self.controller_epoch = request.controller_epoch
        errors: dict[tuple[Any, int], ErrorCode] = {}
        accepted: list[tuple[Partition, control.LeaderAndIsrPartitionState]] = []
        for ts in request.topic_states:
            for ps in ts.partition_states:
                tp = TopicPartition(ts.topic_name, ps.partition_index)
                self.logger.info(f"Received LeaderAndIsr request {describe_state(ps)} correlation id "
                                 f"{correlation_id} from {ctrl} for partition {tp}")
                if tp in self.offline_partitions:
                    self.logger.warn(f"Ignoring LeaderAndIsr request from {ctrl} with correlation id {correlation_id} "
                                     f"for partition {tp} as the local replica for the partition is in an offline "
                                     "log directory")
                    errors[(ts.topic_id, ps.partition_index)] = ErrorCode.kafka_storage_error
                    continue
                partition = self.partitions.get(tp)
                decision = classify(self.broker_id, ts.topic_id, ps, partition)
                errors[(ts.topic_id, ps.partition_index)] = decision.error
                if decision.transition is Transition.NOT_A_REPLICA:
                    self.logger.warn(f"Ignoring LeaderAndIsr request for partition {tp}: this broker is not "
                                     f"in the assigned replicas [{','.join(map(str, ps.replicas))}]")
                    continue
                if partition is None:
                    partition = self.partitions[tp] = Partition(tp.topic, tp.partition, self.broker_id,
                                                                topic_id=ts.topic_id)
                if decision.transition.applies:
                    accepted.append((partition, ps))
                elif decision.transition is Transition.STALE_LEADER_EPOCH:
                    self.logger.warn(f"Ignoring LeaderAndIsr request for partition {tp}: its leader epoch "
                                     f"{ps.leader_epoch} is smaller than the current {partition.leader_epoch}")
                else:
                    self.logger.info(f"Ignoring LeaderAndIsr request for partition {tp}: its leader epoch "
                                     f"{ps.leader_epoch} matches the current one")
        for partition, ps in accepted:
            try:
                self._ensure_log(partition, topic_configs or {}, ps.is_new)
            except KafkaError as e:
                self.logger.error(f"Could not open the log of partition {partition.name}: {e}")
                errors[(partition.topic_id, partition.partition)] = e.code
            await pace.pause_if_due()
        accepted = [(p, s) for p, s in accepted if p.log is not None]
        leaders = [(p, s) for p, s in accepted if s.leader == self.broker_id]
        followers = [(p, s) for p, s in accepted if s.leader != self.broker_id]
        if leaders:
            await self._make_leaders(leaders, ctrl, correlation_id, pace)
        if followers:
            await self._make_followers(followers, ctrl, correlation_id, pace)
        return leader_and_isr_response(ErrorCode.none, errors)

    def _ensure_log(self, partition: Partition, topic_configs: Mapping[str, Mapping[str, str]], is_new: bool) -> None:
        if partition.log is not None:
            return
        existing = self.log_manager.get_log(partition.topic, partition.partition)
        if existing is not None:
            partition.log = existing
            return
        config = self._topic_log_config(partition.topic, topic_configs.get(partition.topic, {}))
        partition.log = self.log_manager.get_or_create_log(
            partition.topic, partition.partition, config, uuid_to_topic_id(partition.topic_id), is_new=is_new)

    async def _make_leaders(self, items: list[tuple[Partition, control.LeaderAndIsrPartitionState]],
                            ctrl: str, correlation_id: int, pace: TimeSlice) -> None:
        now = now_ms()
        self.fetchers.remove_partitions(TopicPartition(p.topic, p.partition) for p, _ in items)
        for partition, ps in items:
            partition.make_leader(ps, now)
            partition.maybe_increment_high_watermark()
            self.logger.info(f"Completed become-leader transition for partition {partition.name} with leader "
                             f"epoch {ps.leader_epoch}, ISR [{','.join(map(str, ps.isr))}] (from {ctrl}, "
                             f"correlation id {correlation_id})")
            self._complete_delayed_requests(TopicPartition(partition.topic, partition.partition))
            await pace.pause_if_due()
        self.alter_log_dirs.resume([p for p, _ in items])
        for hook in self.on_become_leader:
            hook([p for p, _ in items])

    async def _make_followers(self, items: list[tuple[Partition, control.LeaderAndIsrPartitionState]],
                              ctrl: str, correlation_id: int, pace: TimeSlice) -> None:
        self.fetchers.remove_partitions(TopicPartition(p.topic, p.partition) for p, _ in items)
        to_fetch = []
        for partition, ps in items:
            partition.make_follower(ps)
            if ps.leader >= 0 and ps.leader in self.metadata_cache.alive_brokers:
                to_fetch.append(partition)
            elif ps.leader >= 0:
                # The controller sends UpdateMetadata first, so this is rare; fetching starts
                # when an UpdateMetadata shows the leader alive.
                self.logger.warn(f"Leader {ps.leader} of partition {partition.name} is not alive in the metadata "
                                 "cache; following it once it is")
            leader = ps.leader if ps.leader >= 0 else "none"
            self.logger.info(f"Completed become-follower transition for partition {partition.name} with new "
                             f"leader {leader} and leader epoch {ps.leader_epoch} (from {ctrl}, "
                             f"correlation id {correlation_id})")
            self._complete_delayed_requests(TopicPartition(partition.topic, partition.partition))
            await pace.pause_if_due()
        self.fetchers.add_partitions(to_fetch)
        self.alter_log_dirs.resume([p for p, _ in items])
        for hook in self.on_become_follower:
            hook([p for p, _ in items])

    # ------------------------------------------------------------------ StopReplica

    def stop_replicas(self, correlation_id: int, request: control.StopReplicaRequest) -> control.StopReplicaResponse:
        """StopReplica, its checkpoint files written before it returns."""
        response, checkpoints = self.stop_replicas_then_checkpoint(correlation_id, request)
        self.log_manager.write_checkpoints(checkpoints)
        return response

    def stop_replicas_then_checkpoint(self, correlation_id: int, request: control.StopReplicaRequest
                                      ) -> tuple[control.StopReplicaResponse, list[CheckpointWrite]]:
        """StopReplica, and the checkpoint files of the directories it deleted logs in, to be
        written before the answer goes (a topic recreated under the same name must not find
        these offsets): the handler writes them off the event loop, whose fsyncs would hold up
        the controller during a deletion of many topics."""
        ctrl = f"controller {request.controller_id} epoch {request.controller_epoch}"
        entries = [(ts.topic_name, ps) for ts in request.topic_states for ps in ts.partition_states]
        stale = stale_request_error(request.controller_epoch, request.broker_epoch, self.controller_epoch,
                                    self._broker_epoch())
        if stale != ErrorCode.none:
            if stale == ErrorCode.stale_controller_epoch:
                self.logger.warn(f"Ignoring StopReplica request from {ctrl}: stale controller epoch")
            # As Kafka: the error alone, no partition errors.
            return control.StopReplicaResponse(error_code=stale, partition_errors=()), []
        self.controller_epoch = request.controller_epoch
        errors = []
        stopped: list[tuple[Partition | None, TopicPartition, bool]] = []
        deleted_in: set[Path] = set()  # log directories whose checkpoints are rewritten once, at the end
        for topic, ps in entries:
            tp = TopicPartition(topic, ps.partition_index)
            partition = self.partitions.get(tp)
            err = ErrorCode.none
            if tp in self.offline_partitions:
                self.logger.warn(f"Ignoring StopReplica request (delete={str(ps.delete_partition).lower()}) from "
                                 f"{ctrl} for partition {tp} as the local replica for the partition is in an "
                                 "offline log directory")
                err = ErrorCode.kafka_storage_error
            elif (partition is not None and ps.leader_epoch not in (_NO_EPOCH, _EPOCH_DURING_DELETE)
                    and ps.leader_epoch < partition.leader_epoch):
                self.logger.warn(f"Ignoring StopReplica request for partition {tp}: leader epoch "
                                 f"{ps.leader_epoch} is smaller than the current {partition.leader_epoch}")
                err = ErrorCode.fenced_leader_epoch
            else:
                self.logger.info(f"Handling StopReplica request for partition {tp} (delete="
                                 f"{str(ps.delete_partition).lower()}) correlation id {correlation_id} from {ctrl}")
                self.fetchers.remove_partitions([tp])
                if ps.delete_partition:
                    self.partitions.pop(tp, None)
                    self.alter_log_dirs.stop(tp)
                    try:
                        self.log_manager.remove_future_log(tp.topic, tp.partition)
                        path = self.log_manager.async_delete(tp.topic, tp.partition, checkpoint=False)
                        if path is not None:
                            deleted_in.add(path.parent)
                            self.logger.info(f"Renamed the log of partition {tp} to {path.name} for deletion")
                    except KafkaError as e:
                        err = e.code
                elif partition is not None:
                    # No longer replicating: neither leader nor fetching.
                    partition.leader_id = None if partition.is_leader else partition.leader_id
                stopped.append((partition, tp, ps.delete_partition))
                self._complete_delayed_requests(tp)
            errors.append(control.StopReplicaPartitionError(
                topic_name=topic, partition_index=ps.partition_index, error_code=err))
        checkpoints = self.log_manager.dir_checkpoints(deleted_in)
        for hook in self.on_stop_replica:
            hook(stopped)
        # Kafka's removeMetrics: a topic deleted here, with no partition left, takes its meters along.
        deleted = {tp.topic for _p, tp, delete in stopped if delete} - {tp.topic for tp in self.partitions}
        for topic in deleted:
            self.topic_stats.remove(topic)
        return control.StopReplicaResponse(error_code=ErrorCode.none, partition_errors=tuple(errors)), checkpoints

    # ------------------------------------------------------------------ log directories

    def handle_log_dir_failure(self, log_dir: Path) -> list[TopicPartition]:
        """Stop serving the partitions of a failed directory (Kafka's
        ReplicaManager.handleLogDirFailure; the caller holds :attr:`state_change_lock`): their
        fetchers and moves stop, they become offline here (KAFKA_STORAGE_ERROR from now on),
        what waits on them completes, the coordinators unload them, and the log manager
        drops the directory.  Returns the partitions taken offline."""
        offline = [tp for tp, p in self.partitions.items() if p.log is not None and p.log.dir.parent == log_dir]
        self.fetchers.remove_partitions(offline)
        for tp, future in self.log_manager.future_logs().items():
            if tp in offline or future.dir.parent == log_dir:
                self.alter_log_dirs.stop(tp)
        stopped: list[tuple[Partition | None, TopicPartition, bool]] = []
        for tp in offline:
            partition = self.partitions.pop(tp)
            self.offline_partitions.add(tp)
            stopped.append((partition, tp, False))
        self.log_manager.handle_log_dir_failure(log_dir)
        for tp in offline:
            self._complete_delayed_requests(tp)
        for hook in self.on_stop_replica:
            hook(stopped)
        self.logger.warn(f"Broker {self.broker_id} stopped fetcher for partitions "
                         f"{','.join(map(str, sorted(offline)))} and stopped moving logs for partitions in the "
                         f"failed log directory {log_dir}")
        return offline

    def describe_log_dirs(self, partitions: Set[TopicPartition] | None) -> list[LogDirDescription]:
        """DescribeLogDirs: every configured directory with the replicas of ``partitions``
        (None: all) in it."""
        return describe_log_dirs(self.log_manager, self.partitions, partitions)

    # ------------------------------------------------------------------ UpdateMetadata

    def maybe_update_metadata_cache(self, correlation_id: int, request: control.UpdateMetadataRequest) -> ErrorCode:
        stale = stale_request_error(request.controller_epoch, request.broker_epoch, self.controller_epoch,
                                    self._broker_epoch())
        if stale == ErrorCode.stale_controller_epoch:
            self.logger.warn(f"Ignoring UpdateMetadata request from controller {request.controller_id} with "
                             f"correlation id {correlation_id}: stale controller epoch {request.controller_epoch}")
        if stale != ErrorCode.none:
            return stale
        self.controller_epoch = request.controller_epoch
        deleted = self.metadata_cache.update(request)
        self._start_waiting_followers()
        n = sum(len(ts.partition_states) for ts in request.topic_states)
        self.logger.info(f"Cached metadata for {n} partitions and {len(request.live_brokers)} live brokers from "
                         f"controller {request.controller_id} epoch {request.controller_epoch} with correlation id "
                         f"{correlation_id}" + (f"; deleted {len(deleted)} partitions" if deleted else ""))
        return ErrorCode.none

    def _start_waiting_followers(self) -> None:
        """Followers whose leader was not known alive start fetching once it is."""
        alive = self.metadata_cache.alive_brokers
        waiting = [p for tp, p in self.partitions.items()
                   if not p.is_leader and p.leader_id is not None and p.leader_id >= 0
                   and p.leader_id in alive and not self.fetchers.is_fetching(tp)]
        if waiting:
            self.fetchers.add_partitions(waiting)

    # ------------------------------------------------------------------ produce

    def append_records(self, acks: int, timeout_ms: int, entries: Iterable[tuple[str, int, bytes | None]], *,
                       origin: AppendOrigin = AppendOrigin.CLIENT, internal_topics_allowed: bool = False,
                       verification_guards: Mapping[TopicPartition, object] | None = None
                       ) -> tuple[dict[TopicPartition, ProducePartitionResult], DelayedProduce | None]:
        """Append to the leaders here.  With acks=-1 a DelayedProduce is returned when some
        partition's high watermark has not reached its batch yet (await its future).

        ``origin`` is Kafka's AppendOrigin (COORDINATOR: transaction markers and transactional
        offset commits); only the coordinators, ``internal_topics_allowed``, may write to
        ``__consumer_offsets`` and ``__transaction_state`` (INVALID_TOPIC_EXCEPTION for anyone
        else).  This never awaits: client transactional batches that need KIP-890
        verification go through :meth:`append_records_async`, which passes the
        ``verification_guards`` it created; without them, and with a verifier configured, a
        client batch cannot start a transaction."""
        # Without guards: no check at all, or (a verifier is configured) no transaction start.
        default_guard = NO_GUARD_CHECK if self.txn_verifier is None or origin is not AppendOrigin.CLIENT else None
        results: dict[TopicPartition, ProducePartitionResult] = {}
        for topic, partition_id, records in entries:
            tp = TopicPartition(topic, partition_id)
            guard = default_guard if verification_guards is None else verification_guards.get(tp)
            if tp.topic in INTERNAL_TOPICS and not internal_topics_allowed:
                results[tp] = ProducePartitionResult(ErrorCode.invalid_topic_exception,
                                                     message=f"Cannot append to internal topic {tp.topic}")
                continue
            results[tp] = self._append_to_leader(tp, records, acks, origin, guard)
        if acks != -1:
            return results, None
        delayed = DelayedProduce(self.partitions, timeout_ms, results, self.offline_partitions)
        if not delayed.pending or self.produce_purgatory.try_complete_else_watch(delayed, delayed.pending):
            delayed.force_complete()
            return results, None
        return results, delayed

    async def append_records_async(self, acks: int, timeout_ms: int,
                                   entries: Iterable[tuple[str, int, bytes | None]], *,
                                   transactional_id: str | None,
                                   origin: AppendOrigin = AppendOrigin.CLIENT
                                   ) -> tuple[dict[TopicPartition, ProducePartitionResult], DelayedProduce | None]:
        """:meth:`append_records` after KIP-890 verification: for each partition where a client
        transactional batch would start a transaction (none ongoing for its producer and
        epoch), a verification guard is created, then the transaction coordinator is asked
        whether the partition is in the transaction.  A partition that fails is answered
        with the error and nothing is appended to it (Kafka 3.6's ReplicaManager.appendRecords
        with AddPartitionsToTxnManager)."""
        entries = list(entries)
        verifier = self.txn_verifier
        if verifier is None or origin is not AppendOrigin.CLIENT or transactional_id is None:
            return self.append_records(acks, timeout_ms, entries, origin=origin)
        guards: dict[TopicPartition, object] = {}
        to_verify: dict[tuple[int, int], list[TopicPartition]] = {}
        for topic, partition_id, records in entries:
            header = transactional_header(records)
            if header is None:
                continue
            tp = TopicPartition(topic, partition_id)
            p = self.partition_or_error(tp)
            if not isinstance(p, Partition):
                continue  # the append answers with the error
            assert p.log is not None
            if p.log.has_ongoing_transaction(header.producer_id, header.producer_epoch):
                continue
            guards[tp] = p.log.producer_state.create_verification_guard(header.producer_id)
            to_verify.setdefault((header.producer_id, header.producer_epoch), []).append(tp)
        failed: dict[TopicPartition, ProducePartitionResult] = {}
        for (producer_id, producer_epoch), tps in to_verify.items():
            try:
                answer = await verifier.verify(transactional_id, producer_id, producer_epoch, tps)
            except Exception as e:  # the coordinator could not be asked: the producer retries
                log.warning("Could not verify partitions %s of transactional id %s: %s", tps, transactional_id, e)
                answer = {tp: ErrorCode.not_enough_replicas for tp in tps}
            for tp in tps:
                error = ErrorCode(answer.get(tp, ErrorCode.none))
                if error != ErrorCode.none:
                    failed[tp] = ProducePartitionResult(
                        error, message=f"partition {tp.topic}-{tp.partition} could not be verified to be in "
                                       f"the transaction of {transactional_id!r}")
        if failed:
            entries = [e for e in entries if (e[0], e[1]) not in failed]
        results, delayed = self.append_records(acks, timeout_ms, entries, origin=origin, verification_guards=guards)
        # Shared with the DelayedProduce, which only waits on partitions that were appended.
        results.update(failed)
        return results, delayed

    def _append_to_leader(self, tp: TopicPartition, records: bytes | None, acks: int,
                          origin: AppendOrigin = AppendOrigin.CLIENT, guard: object = NO_GUARD_CHECK
                          ) -> ProducePartitionResult:
        partition = self.partition_or_error(tp)
        if not isinstance(partition, Partition):
            return ProducePartitionResult(partition)
        counters = self.topic_stats.topic(tp.topic)
        counters.total_produce_requests += 1
        if origin is AppendOrigin.CLIENT:
            try:
                end = validate_records(records)
            except KafkaError as e:
                counters.failed_produce_requests += 1
                counters.bytes_rejected += len(records or b"")
                return ProducePartitionResult(e.code, message=str(e))
            assert records is not None
            if end < len(records):
                records = memoryview(records)[:end]
        elif not records:
            return ProducePartitionResult(ErrorCode.corrupt_message, message="no record batches")
        lg = partition.log
        if acks == -1 and len(partition.isr) < partition.min_insync_replicas():
            counters.failed_produce_requests += 1
            return ProducePartitionResult(
                ErrorCode.not_enough_replicas, log_start_offset=lg.log_start_offset,
                message=f"the ISR of {partition.name} has {len(partition.isr)} replicas, fewer than "
                        f"min.insync.replicas={partition.min_insync_replicas()}")
        try:
            info = lg.append_as_leader(records, partition.leader_epoch, origin=origin, verification_guard=guard)
        except KafkaError as e:
            counters.failed_produce_requests += 1
            counters.bytes_rejected += len(records)
            return ProducePartitionResult(
                e.code, log_start_offset=-1 if e.code in _NO_LOG_START_OFFSET else lg.log_start_offset,
                message=str(e), record_errors=tuple(getattr(e, "record_errors", ())))
        if not info.duplicate:
            counters.bytes_in += info.valid_bytes
            counters.messages_in += info.num_records
            # Followers waiting for data; read_committed fetches when a marker moved the LSO.
            self.wake_fetches(tp)
            if partition.maybe_increment_high_watermark():
                self._complete_delayed_requests(tp)
        return ProducePartitionResult(ErrorCode.none, info.first_offset, info.log_append_time,
                                      lg.log_start_offset, None, info.last_offset + 1)

    # ------------------------------------------------------------------ fetch

    def fetch_messages(self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                       requests: list[FetchPartitionRequest], isolation_level: int = 0,
                       client_rack: str | None = None) -> dict[TopicPartition, FetchPartitionResult] | DelayedFetch:
        """Read from the leaders here (and, for a consumer that sent ``client_rack``, Fetch
        v11+, from the followers); a DelayedFetch (await its future) when fewer than
        ``min_bytes`` are available and the fetch may wait."""
        results = self.read_from_local_log(replica_id, max_bytes, requests, isolation_level, client_rack)
        if max_wait_ms <= 0 or not requests:
            return results
        total = 0
        for r in results.values():
            if r.error != ErrorCode.none or r.diverging_epoch is not None:
                return results  # the fetcher is to act on it now
            total += r.size
        if total >= min_bytes:
            return results
        if client_rack is not None and self.replica_selector is not None and any(
                r.preferred_read_replica >= 0 for r in results.values()):
            return results  # the consumer is to go elsewhere: tell it now
        delayed = DelayedFetch(self.partitions, max_wait_ms, replica_id, min_bytes, requests,
                               lambda: self.read_from_local_log(replica_id, max_bytes, requests, isolation_level,
                                                                client_rack),
                               isolation_level, fetch_only_from_leader=client_rack is None,
                               held_back=self._held_back(replica_id))
        # Completed at once or not, its future holds the answer.
        self.fetch_purgatory.try_complete_else_watch(delayed, [TopicPartition(r.topic, r.partition) for r in requests])
        return delayed

    def read_from_local_log(self, replica_id: int, max_bytes: int, requests: list[FetchPartitionRequest],
                            isolation_level: int = 0, client_rack: str | None = None
                            ) -> dict[TopicPartition, FetchPartitionResult]:
        """Read each partition: consumers up to the high watermark (read_committed: the last
        stable offset, with the aborted transactions of the range), followers (``replica_id``
        >= 0) up to the log end offset, recording the follower's position.  A consumer that
        sent ``client_rack`` (Fetch v11+) may read from a follower, and a leader with a
        replica selector may send it to another replica instead (Kafka's readFromLocalLog)."""
        results: dict[TopicPartition, FetchPartitionResult] = {}
        remaining = max_bytes
        first_with_data = True
        now = now_ms()
        follower = replica_id >= 0
        committed = isolation_level == READ_COMMITTED and not follower
        partition_or_error = self.partition_or_error
        followers_too = client_rack is not None
        selecting = followers_too and self.replica_selector is not None
        # The one check an unthrottled fetch pays.
        quota = self.leader_quota if follower and self.leader_quota.active else None
        for r in requests:
            tp = TopicPartition(r.topic, r.partition)
            p = partition_or_error(tp, r.current_leader_epoch, followers_too=followers_too)
            if not isinstance(p, Partition):
                results[tp] = FetchPartitionResult(p)
                continue
            lg = p.log
            if follower and replica_id not in p.replicas:
                results[tp] = FetchPartitionResult(ErrorCode.not_leader_or_follower)
                continue
            lso = lg.last_stable_offset
            if follower and r.last_fetched_epoch >= 0 and (
                    r.last_fetched_epoch != lg.latest_epoch or r.fetch_offset > lg.log_end_offset):
                diverging = _diverging_epoch(lg, r.last_fetched_epoch, r.fetch_offset)
                if diverging is not None:
                    # Kafka's Partition.fetchRecords: no records, and the follower's position
                    # is not recorded until it has truncated.
                    results[tp] = FetchPartitionResult(ErrorCode.none, lg.high_watermark, lg.log_start_offset, (),
                                                       lso, diverging_epoch=diverging)
                    continue
            if selecting and p.is_leader:
                preferred = self.preferred_read_replica(p, client_rack or "", r.fetch_offset, now)
                if preferred >= 0:
                    results[tp] = FetchPartitionResult(ErrorCode.none, lg.high_watermark, lg.log_start_offset, (),
                                                       lso, preferred_read_replica=preferred)
                    continue
            if follower and r.fetch_offset == lg.log_end_offset:
                # A caught-up follower (most partitions, most of the time): nothing to read.
                self._record_follower_fetch(p, tp, replica_id, r.fetch_offset, r.log_start_offset, now)
                results[tp] = FetchPartitionResult(ErrorCode.none, lg.high_watermark, lg.log_start_offset, (), lso)
                continue
            bound = None if follower else lso if committed else lg.high_watermark
            limit = min(r.max_bytes, remaining) if remaining > 0 else 0
            throttled = quota is not None and quota.is_throttled(r.topic, r.partition)
            if throttled and quota is not None and replica_id not in p.isr:
                # Kafka's shouldLeaderThrottle, and the bytes bounded by what the rate allows
                # (but the first batch whole: a replica must get past a batch bigger than that).
                limit = min(limit, quota.allowance())
                if limit <= 0:
                    self._record_follower_fetch(p, tp, replica_id, r.fetch_offset, r.log_start_offset, now)
                    results[tp] = FetchPartitionResult(ErrorCode.none, lg.high_watermark, lg.log_start_offset, (),
                                                       lso)
                    continue
            try:
                data = lg.read(r.fetch_offset, limit, bound, first_with_data)
            except KafkaError as e:
                # Kafka's createLogReadResult(e): an error carries no offsets (-1 each).
                self.topic_stats.topic(r.topic).failed_fetch_requests += 1
                results[tp] = FetchPartitionResult(e.code)
                continue
            size = data.size
            aborted = None
            if committed and size:
                # Kafka's Log.addAbortedTransactions: the aborted transactions overlapping the
                # data read, bounded by the end of the segment it came from (the LSO when the
                # read went past the segment holding the fetch offset).
                upper = lso
                segment = lg.segment_for(r.fetch_offset)
                if segment is not None and segment.log_path == data.regions[0].path:
                    upper = min(upper, lg.segment_end(segment))
                aborted = tuple((a.producer_id, a.first_offset)
                                for a in lg.collect_aborted_transactions(r.fetch_offset, upper))
            if size:
                first_with_data = False
                remaining -= size
            if follower:
                self._record_follower_fetch(p, tp, replica_id, r.fetch_offset, r.log_start_offset, now)
                if throttled and quota is not None:
                    quota.record(size)
            results[tp] = FetchPartitionResult(ErrorCode.none, lg.high_watermark, lg.log_start_offset, data.regions,
                                               lso, aborted)
        return results

    def _held_back(self, replica_id: int) -> Callable[[Partition], bool] | None:
        """For a waiting follower fetch while throttles are on: whether a partition's bytes are
        held back now (they must not complete the wait; Kafka's DelayedFetch skips them)."""
        quota = self.leader_quota
        if replica_id < 0 or not quota.active:
            return None
        return lambda p: (quota.is_throttled(p.topic, p.partition) and replica_id not in p.isr
                          and quota.is_quota_exceeded())

    def preferred_read_replica(self, p: Partition, client_rack: str, fetch_offset: int, now: int) -> int:
        """The replica this leader's selector prefers for a consumer of ``client_rack`` reading
        at ``fetch_offset``, or -1 for this leader (Kafka's findPreferredReadReplica): the
        candidates are the live replicas whose log reaches the offset."""
        assert self.replica_selector is not None and p.log is not None
        alive = self.metadata_cache.alive_brokers
        here = alive.get(self.broker_id)
        leader = ReplicaView(self.broker_id, here.rack if here is not None else None, p.log.log_end_offset, 0)
        candidates = [leader]
        for broker_id, remote in p.remote.items():
            broker = alive.get(broker_id)
            if broker is not None and remote.log_end_offset >= fetch_offset:
                candidates.append(ReplicaView(broker_id, broker.rack, remote.log_end_offset,
                                              now - remote.last_caught_up_time_ms))
        chosen = self.replica_selector(client_rack, leader, candidates)
        return -1 if chosen is leader else chosen.broker_id

    def _record_follower_fetch(self, p: Partition, tp: TopicPartition, replica_id: int, fetch_offset: int,
                               log_start_offset: int, now: int) -> None:
        """A follower's position: maybe a new high watermark or low watermark, maybe a replica
        back in the ISR."""
        if p.update_follower_fetch_state(replica_id, fetch_offset, now, log_start_offset):
            self._complete_delayed_requests(tp)
        if p.isr_expansion_candidate(replica_id):
            new_isr = (*p.isr, replica_id)
            if self.alter_partition.submit(p, new_isr):
                self.logger.info(f"Expanding ISR of partition {p.name} from "
                                 f"[{','.join(map(str, p.isr))}] to [{','.join(map(str, new_isr))}]")

    # ------------------------------------------------------------------ offsets

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int, current_leader_epoch: int,
                             replica_id: int, isolation_level: int = 0) -> tuple[ErrorCode, int, int, int]:
        """ListOffsets: (error, timestamp, offset, leader epoch).  The debugging replica id
        (-2) may ask a follower.  Consumers see up to the high watermark, read_committed ones
        up to the last stable offset (Kafka's Partition.fetchOffsetForTimestamp)."""
        p = self.partition_or_error(TopicPartition(topic, partition), current_leader_epoch,
                                    followers_too=replica_id == -2)
        if not isinstance(p, Partition):
            return p, -1, -1, -1
        assert p.log is not None
        if replica_id >= 0:
            bound = None
        elif isolation_level == READ_COMMITTED:
            bound = p.log.last_stable_offset
        else:
            bound = p.log.high_watermark
        found = p.log.offset_for_timestamp(timestamp, bound)
        if found is None:
            return ErrorCode.none, -1, -1, -1
        epoch = found.leader_epoch if found.leader_epoch is not None else -1
        return ErrorCode.none, found.timestamp, found.offset, epoch

    def active_producers(self, topic: str, partition: int) -> ErrorCode | list[Any]:
        """DescribeProducers: the producer state entries of a partition hosted here, led or
        followed (Kafka's ReplicaManager.activeProducerState: kafka-transactions find-hanging
        asks each replica), or the error to answer with."""
        p = self.partition_or_error(TopicPartition(topic, partition), followers_too=True)
        if not isinstance(p, Partition):
            return p
        assert p.log is not None
        return list(p.log.producer_state.producers.values())

    def end_offset_for_epoch(self, topic: str, partition: int, current_leader_epoch: int, leader_epoch: int
                             ) -> tuple[ErrorCode, int, int]:
        """OffsetForLeaderEpoch on the leader: (error, epoch, end offset)."""
        p = self.partition_or_error(TopicPartition(topic, partition), current_leader_epoch)
        if not isinstance(p, Partition):
            return p, -1, -1
        assert p.log is not None
        epoch, end = p.log.end_offset_for_epoch(leader_epoch)
        return ErrorCode.none, epoch, end

    def delete_records(self, timeout_ms: int, offsets: Mapping[TopicPartition, int]
                       ) -> tuple[dict[TopicPartition, DeleteRecordsPartitionResult], DelayedDeleteRecords | None]:
        """DeleteRecords (Kafka's ReplicaManager.deleteRecords): move each led partition's log
        start offset to its offset (-1: the high watermark; none past it), then, unless every
        partition's low watermark is there already, a DelayedDeleteRecords is returned (await
        its future) that completes once they are, or after ``timeout_ms``."""
        results = {tp: self._delete_records_on_leader(tp, offset) for tp, offset in offsets.items()}
        delayed = DelayedDeleteRecords(self.partitions, timeout_ms, results, self._alive_broker_ids,
                                       self.offline_partitions)
        if not delayed.pending or self.delete_records_purgatory.try_complete_else_watch(delayed, delayed.pending):
            delayed.force_complete()
            return results, None
        return results, delayed

    def _alive_broker_ids(self) -> Mapping[int, object]:
        return self.metadata_cache.alive_brokers

    def _delete_records_on_leader(self, tp: TopicPartition, offset: int) -> DeleteRecordsPartitionResult:
        """Kafka's Partition.deleteRecordsOnLeader: the leader's own log start moves now."""
        p = self.partition_or_error(tp)
        if not isinstance(p, Partition):
            return DeleteRecordsPartitionResult(p)
        assert p.log is not None
        hw = p.log.high_watermark
        target = hw if offset == -1 else offset
        if target < 0 or target > hw:
            return DeleteRecordsPartitionResult(ErrorCode.offset_out_of_range)
        p.log.maybe_increment_log_start_offset(target)
        return DeleteRecordsPartitionResult(ErrorCode.none, p.low_watermark(self.metadata_cache.alive_brokers), target)

    # ------------------------------------------------------------------ ISR

    def maybe_shrink_isrs(self, now_ms: int) -> None:
        lag_ms = self.config["replica.lag.time.max.ms"]
        for p in self.leader_partitions():
            stale = p.out_of_sync_replicas(now_ms, lag_ms)
            if not stale:
                continue
            new_isr = tuple(r for r in p.isr if r not in stale)
            if not new_isr:
                continue
            if self.alter_partition.submit(p, new_isr):
                self.logger.info(f"Shrinking ISR of partition {p.name} from [{','.join(map(str, p.isr))}] to "
                                 f"[{','.join(map(str, new_isr))}]: replicas {stale} have not caught up for "
                                 f"{lag_ms} ms")

    def _on_isr_applied(self, partition: Partition) -> None:
        if partition.maybe_increment_high_watermark():
            self._complete_delayed_requests(TopicPartition(partition.topic, partition.partition))
        else:
            # ISR size matters to acks=-1 (NOT_ENOUGH_REPLICAS_AFTER_APPEND) even without a new HW.
            self.produce_purgatory.check_and_complete(TopicPartition(partition.topic, partition.partition))

    def _complete_delayed_requests(self, tp: TopicPartition) -> None:
        """The high watermark, a replica's log start offset or the leadership of ``tp`` changed:
        try what waits on it (Kafka's tryCompleteDelayedRequests)."""
        self.produce_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)
        self.wake_fetches(tp)

    def wake_fetches(self, tp: TopicPartition) -> None:
        """Try the fetches waiting on ``tp`` once this turn of the event loop is over, with
        every other partition that changed in it: the requests read from the sockets in one
        turn (a producer's pipelined batches, the followers' acknowledgements) then reach a
        waiting follower or consumer as one response instead of one each."""
        self._fetch_wakeups.add(tp)
        if not self._fetch_wakeup_scheduled:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop (tools and tests that drive the manager directly)
                self._wake_waiting_fetches()
                return
            self._fetch_wakeup_scheduled = True
            loop.call_soon(self._wake_waiting_fetches)

    def _wake_waiting_fetches(self) -> None:
        self._fetch_wakeup_scheduled = False
        woken, self._fetch_wakeups = self._fetch_wakeups, set()
        self.fetch_purgatory.check_and_complete_all(woken)


def _diverging_epoch(lg: Log, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
    """KIP-595's check of a follower's Fetch v12+ (Kafka does it when the fetch names its last
    fetched epoch): where that epoch ends in this log, ``(epoch, end offset)``, when it ends
    below the fetch offset or is not known here (the follower must truncate there); None
    when the follower's log agrees with this one."""
    epoch, end = lg.end_offset_for_epoch(last_fetched_epoch)
    if epoch < last_fetched_epoch or end < fetch_offset:
        return epoch, end
    return None
