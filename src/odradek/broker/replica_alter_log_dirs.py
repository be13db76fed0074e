"""Moving a replica to another log directory while it keeps serving (AlterReplicaLogDirs,
KIP-113): Kafka's ``ReplicaManager.alterReplicaLogDirs``, ``ReplicaAlterLogDirsManager`` and
``ReplicaAlterLogDirsThread``.

The move creates a ``-future`` log in the destination directory and copies the partition's
current log into it, whole batches with their offsets, while the current log keeps taking
appends (as leader or follower) and serving reads.  :func:`copy_step` is one step of that copy,
on two logs and nothing else: the future log is first made a prefix of the current one
(truncated by leader epoch where the current log was truncated meanwhile, restarted at the
current log's start when retention passed it), then up to a chunk is appended (less when
``replica.alter.log.dirs.io.max.bytes.per.second`` allows less; the first batch whole).  When the
future log ends where the current one does, the copy task swaps it in at once, without
yielding the event loop between that check and the swap, so no append falls in between.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping, MutableMapping, Set
from pathlib import Path
from typing import TYPE_CHECKING

from odradek import tasks
from odradek.broker.partition import Partition
from odradek.broker.replication_quota import ReplicationQuotaManager
from odradek.common import TopicPartition
from odradek.log.log import UnexpectedAppendOffsetError
from odradek.log.log_dirs import future_dir_name
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import parse_header

if TYPE_CHECKING:
    from odradek.broker.metadata_cache import MetadataCache
    from odradek.log.log import Log
    from odradek.log.log_manager import LogManager

log = logging.getLogger(__name__)

__all__ = ["ReplicaAlterLogDirsManager", "copy_step"]

CHUNK_BYTES = 1 << 20  # copied per step, between two turns of the event loop
_MAX_NAME_LENGTH = 255  # a file name's limit; Kafka refuses a move whose -future name exceeds it
_UNDEFINED_EPOCH = -1
_MAX_TRUNCATIONS = 16  # each drops an epoch; a copy that needs more is made anew
_IDLE_S = 0.01


def copy_step(current: Log, future: Log, max_bytes: int = CHUNK_BYTES) -> bool:
    """Bring ``future`` one step closer to ``current``; True once it ends where ``current``
    does (then nothing was appended to ``current`` since, if the caller did not yield)."""
    for _ in range(_MAX_TRUNCATIONS):
        target = _divergence(current, future)
        if target is None:
            break
        if target < 0 or target >= future.log_end_offset:
            _restart(current, future)  # no common point the epochs show: copy anew
            break
        future.truncate_to(target)
    else:
        _restart(current, future)
    if future.log_end_offset < current.log_start_offset:
        _restart(current, future)
    if future.log_end_offset < current.log_end_offset:
        data = current.read(future.log_end_offset, max_bytes).read_bytes()
        if data:
            try:
                future.append_as_follower(data)
            except UnexpectedAppendOffsetError:
                _restart(current, future)  # the current log changed under the read: copy anew
                return False
            future.flush()
    future.update_high_watermark(min(current.high_watermark, future.log_end_offset))
    return future.log_end_offset == current.log_end_offset


def _divergence(current: Log, future: Log) -> int | None:
    """Where ``future`` must be truncated to be a prefix of ``current`` (None: it is one; -1:
    nowhere, start again).  The epochs decide, as a follower's truncation does (KIP-101,
    KIP-279): the current log may have been truncated, and refilled by a new leader, since
    the copy was made."""
    epoch = future.latest_epoch
    if epoch is None:
        return current.log_end_offset if future.log_end_offset > current.log_end_offset else None
    current_epoch, current_end = current.end_offset_for_epoch(epoch)
    if current_epoch == _UNDEFINED_EPOCH:
        return -1
    if current_epoch == epoch:
        return None if current_end >= future.log_end_offset else current_end
    # The current log lacks our latest epoch: keep what both hold of the epoch below it.
    return min(current_end, future.end_offset_for_epoch(current_epoch)[1])


def _restart(current: Log, future: Log) -> None:
    """Empty ``future`` and start it at the first batch ``current`` still holds."""
    found = current.read(current.log_start_offset, 1)
    start = parse_header(found.regions[0].read()).base_offset if found.regions else current.log_start_offset
    future.truncate_fully_and_start_at(start)


class ReplicaAlterLogDirsManager:
    """The moves of this broker's replicas between its log directories: AlterReplicaLogDirs'
    decisions, and one copy task per partition being moved."""

    def __init__(self, log_manager: LogManager, partitions: Mapping[TopicPartition, Partition],
                 offline_partitions: Set[TopicPartition], metadata_cache: MetadataCache,
                 quota: ReplicationQuotaManager) -> None:
        self.log_manager = log_manager
        self.partitions = partitions
        self.offline_partitions = offline_partitions
        self.metadata_cache = metadata_cache
        # replica.alter.log.dirs.io.max.bytes.per.second: every move on this broker shares it
        # (Kafka's alterLogDirs quota, which ReplicaAlterLogDirsThread records and checks).
        self.quota = quota
        self._copies: MutableMapping[TopicPartition, asyncio.Task[None]] = {}

    def alter_replica_log_dirs(self, partition_dirs: Mapping[TopicPartition, str]) -> dict[TopicPartition, ErrorCode]:
        """Kafka's ReplicaManager.alterReplicaLogDirs: move each replica to its directory.
        The caller holds the replica manager's state-change lock."""
        return {tp: self._alter(tp, path) for tp, path in partition_dirs.items()}

    def _alter(self, tp: TopicPartition, path: str) -> ErrorCode:
        if len(future_dir_name(tp.topic, tp.partition)) > _MAX_NAME_LENGTH:
            return ErrorCode.invalid_topic_exception
        log_dir = Path(path).resolve() if os.path.isabs(path) else None
        if log_dir is None or log_dir not in self.log_manager.dirs:
            log.warning("Unable to alter the log dir of %s: log dir %s is not found in the config", tp, path)
            return ErrorCode.log_dir_not_found
        if not self.log_manager.is_log_dir_online(log_dir) or tp in self.offline_partitions:
            return ErrorCode.kafka_storage_error
        partition = self.partitions.get(tp)
        future = self.log_manager.future_log(*tp)
        if future is not None and future.dir.parent != log_dir:
            self.stop(tp)  # a new destination replaces the move in progress
            self.log_manager.remove_future_log(*tp)
        # For a partition whose log is not here yet: where LeaderAndIsr will create it.
        self.log_manager.dirs.preferred[tp] = log_dir
        if partition is None or partition.log is None:
            known = self.metadata_cache.partition(tp.topic, tp.partition) is not None
            # Kafka keeps REPLICA_NOT_AVAILABLE here (not NOT_LEADER_OR_FOLLOWER) for compatibility.
            return ErrorCode.replica_not_available if known else ErrorCode.unknown_topic_or_partition
        if partition.log.dir.parent == log_dir:
            return ErrorCode.none
        if self.log_manager.offline_log_dirs:
            return ErrorCode.kafka_storage_error  # a future log might be made twice (Kafka's rule)
        try:
            self.log_manager.get_or_create_future_log(tp.topic, tp.partition, log_dir)
        except KafkaError as e:
            return e.code
        self.start(tp)
        return ErrorCode.none

    # ------------------------------------------------------------------ copy tasks

    def start(self, tp: TopicPartition) -> None:
        """Copy ``tp``'s log into its future log (if not already copying)."""
        if tp not in self._copies:
            self._copies[tp] = tasks.start(self._copy(tp), f"alter-log-dir-{tp}")

    def resume(self, partitions: list[Partition]) -> None:
        """After LeaderAndIsr: resume the moves of these partitions (a restart interrupted them)."""
        for p in partitions:
            tp = TopicPartition(p.topic, p.partition)
            if self.log_manager.future_log(*tp) is not None:
                self.start(tp)

    def stop(self, tp: TopicPartition) -> None:
        task = self._copies.pop(tp, None)
        if task is not None:
            task.cancel()

    def is_moving(self, tp: TopicPartition) -> bool:
        return tp in self._copies

    async def shutdown(self) -> None:
        copies, self._copies = self._copies, {}
        for task in copies.values():
            await tasks.cancel_and_wait(task)

    async def _copy(self, tp: TopicPartition) -> None:
        try:
            while True:
                partition = self.partitions.get(tp)
                future = self.log_manager.future_log(*tp)
                if partition is None or partition.log is None or future is None:
                    return
                allowance = self.quota.allowance()
                if allowance <= 0:
                    await asyncio.sleep(min(self.quota.delay_s(), 1.0))
                    continue
                before, size = future.log_end_offset, future.size
                try:
                    caught_up = copy_step(partition.log, future, min(CHUNK_BYTES, allowance))
                    self.quota.record(max(future.size - size, 0))
                    if caught_up:
                        self._swap(partition)
                        return
                except KafkaError as e:
                    # A failed directory is handled by the failure handler (it stops this move).
                    log.warning("Moving the log of %s to %s: %s; retrying", tp, future.dir.parent, e)
                    await asyncio.sleep(1)
                # Next step in the next turn of the loop; a step that found nothing waits a little.
                await asyncio.sleep(0 if future.log_end_offset != before else _IDLE_S)
        finally:
            if self._copies.get(tp) is asyncio.current_task():
                del self._copies[tp]

    def _swap(self, partition: Partition) -> None:
        """The future log has caught up: it becomes the partition's log (Kafka's
        maybeReplaceCurrentWithFutureReplica)."""
        assert partition.log is not None
        current = partition.log
        future = self.log_manager.future_log(partition.topic, partition.partition)
        assert future is not None
        future.update_high_watermark(current.high_watermark)
        if current.log_start_offset > future.log_start_offset:
            future.maybe_increment_log_start_offset(current.log_start_offset)
        latest = future.latest_epoch
        for entry in current.leader_epoch_cache.entries:
            if latest is None or entry.epoch > latest:
                future.assign_epoch_start_offset(entry.epoch, entry.start_offset)  # an epoch without data yet
        partition.log = self.log_manager.replace_current_with_future_log(partition.topic, partition.partition)
