"""GroupMetadataManager: the groups of the ``__consumer_offsets`` partitions this broker
leads, their loading and unloading, and their persistence (Kafka's class of that name).

A partition's groups are served only once the partition is *owned*: this broker leads it
and has replayed its log (until then requests for its groups get
COORDINATOR_LOAD_IN_PROGRESS; for a partition not led here, NOT_COORDINATOR).  Group
metadata and offset commits are appended with acks=-1 and applied to memory only once
the ISR has them, so whatever a client was told is committed survives the leader.
Transactional commits are written as their producer's transactional batch and wait in
the group for the transaction's marker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from odradek.broker.group.group import GroupMetadata, GroupState, OffsetAndMetadata
from odradek.broker.group.group_config import GroupConfig
from odradek.broker.group.hashing import partition_for_group
from odradek.broker.group.loader import PartitionReplay
from odradek.broker.group.offsets_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from odradek.broker.group.offsets_topic import OFFSETS_TOPIC, OffsetsTopic
from odradek.common import TopicPartition, now_ms
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, SimpleRecord, build_batch

log = logging.getLogger(__name__)

__all__ = ["GroupMetadataManager"]

# Append errors as a group metadata write reports them (Kafka's storeGroup mapping).
_STORE_GROUP_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.request_timed_out: ErrorCode.rebalance_in_progress,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}
# ... and as an offset commit reports them (Kafka's storeOffsets mapping).
_STORE_OFFSETS_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.invalid_fetch_size: ErrorCode.invalid_commit_offset_size,
}


class GroupMetadataManager:
    def __init__(self, config: GroupConfig, topic: OffsetsTopic, now_ms: Callable[[], int] = now_ms) -> None:
        self.config = config
        self.topic = topic
        self.now_ms = now_ms
        self.num_partitions = config.offsets_topic_num_partitions
        self.groups: dict[str, GroupMetadata] = {}
        self.owned: set[int] = set()
        self.loading: dict[int, asyncio.Task[None]] = {}
        # Transaction completions for partitions still loading, applied once loaded (Kafka
        # runs both on one scheduler thread, so a completion never overtakes a load).
        self._deferred_completions: dict[int, list[tuple[int, bool]]] = {}
        self._background: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ lookup

    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self.num_partitions)

    def is_group_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned

    def is_group_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading

    def is_loading(self) -> bool:
        return bool(self.loading)

    def validate_group_status(self, group_id: str | None, *, allow_empty_id: bool = False) -> ErrorCode | None:
        """Whether this broker serves ``group_id`` now (Kafka's order: a bad group id, then
        loading, then not ours).  OffsetCommit, OffsetFetch, DescribeGroups and
        DeleteGroups accept the empty group id, for compatibility with old clients."""
        if group_id is None or (not group_id and not allow_empty_id):
            return ErrorCode.invalid_group_id
        if self.is_group_loading(group_id):
            return ErrorCode.coordinator_load_in_progress
        if not self.is_group_local(group_id):
            return ErrorCode.not_coordinator
        return None

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        """Cache ``group`` unless one with its id is cached already; returns the cached one."""
        return self.groups.setdefault(group.group_id, group)

    def current_groups(self) -> list[GroupMetadata]:
        return list(self.groups.values())

    # ------------------------------------------------------------------ loading

    def schedule_load(self, partition: int, on_loaded: Callable[[GroupMetadata], None]) -> None:
        """This broker leads ``partition`` now: replay its log, then serve its groups.
        A partition already owned or loading is left alone (a new leader epoch with this
        broker still leader changes nothing this broker knows)."""
        if partition in self.owned or partition in self.loading:
            return
        log.info("Scheduling loading of offsets and group metadata from %s-%d", OFFSETS_TOPIC, partition)
        self.loading[partition] = asyncio.get_running_loop().create_task(
            self._load(partition, on_loaded), name=f"load-{OFFSETS_TOPIC}-{partition}")

    async def _load(self, partition: int, on_loaded: Callable[[GroupMetadata], None]) -> None:
        started = time.monotonic()
        name = f"{OFFSETS_TOPIC}-{partition}"
        replay = PartitionReplay(name)
        try:
            for chunk in self.topic.read(partition):
                replay.apply(chunk)
                await asyncio.sleep(0)  # let requests through between chunks
        except asyncio.CancelledError:
            raise
        except (KafkaError, OSError) as e:
            # Serving these groups from a partial replay could hand out stale offsets.
            log.error("Error loading offsets and group metadata from %s; its groups stay unavailable "
                      "until leadership moves: %s", name, e)
            self.loading.pop(partition, None)
            self._deferred_completions.pop(partition, None)
            return
        self.loading.pop(partition, None)
        self.owned.add(partition)
        groups = replay.loaded_groups(self.now_ms())
        for group in groups:
            if self.groups.setdefault(group.group_id, group) is not group:
                log.warning("Not loading group %s from %s: a group with that id is already cached",
                            group.group_id, name)
                continue
            on_loaded(group)
        for producer_id, commit in self._deferred_completions.pop(partition, []):
            self.complete_txn(producer_id, [partition], commit)
        log.info("Finished loading offsets and group metadata from %s in %d milliseconds: %d groups, "
                 "%d offsets, up to offset %d%s", name, (time.monotonic() - started) * 1000, len(groups),
                 len(replay.offsets), replay.next_offset,
                 f" ({replay.skipped} unreadable records skipped)" if replay.skipped else "")

    def unload(self, partition: int, on_unloaded: Callable[[GroupMetadata], None]) -> None:
        """This broker no longer leads ``partition``: forget its groups."""
        task = self.loading.pop(partition, None)
        if task is not None:
            task.cancel()
        self._deferred_completions.pop(partition, None)
        was_owned = partition in self.owned
        self.owned.discard(partition)
        removed = [g for gid, g in self.groups.items() if self.partition_for(gid) == partition]
        for group in removed:
            del self.groups[group.group_id]
            on_unloaded(group)
        if was_owned or task is not None:
            log.info("Unloaded %d groups of %s-%d", len(removed), OFFSETS_TOPIC, partition)

    def shutdown(self, on_unloaded: Callable[[GroupMetadata], None]) -> None:
        for partition in sorted(self.owned | set(self.loading)):
            self.unload(partition, on_unloaded)

    # ------------------------------------------------------------------ persistence

    async def store_group(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> ErrorCode:
        """Append the group's metadata record (members with ``assignment``), acks=-1."""
        partition = self.partition_for(group.group_id)
        if partition not in self.owned:
            return ErrorCode.not_coordinator
        protocol = group.protocol_name
        if group.members and protocol is None:
            raise ValueError(f"group {group.group_id} has members but no protocol")
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "", generation=group.generation_id, protocol=protocol,
            leader=group.leader_id, current_state_timestamp=group.current_state_timestamp,
            members=tuple(
                MemberMetadataRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                     m.rebalance_timeout_ms, m.session_timeout_ms,
                                     m.metadata(protocol) if protocol is not None else b"",
                                     assignment.get(m.member_id, b""))
                for m in group.members.values()))
        record = SimpleRecord(key=encode_group_metadata_key(GroupMetadataKey(group.group_id)),
                              value=encode_group_metadata_value(value))
        error, _ = await self.topic.append(partition, build_batch([record], timestamp=self.now_ms()),
                                           wait_for_replication=True)
        if error != ErrorCode.none:
            log.warning("Failed to write the metadata of group %s generation %d to %s-%d: %s",
                        group.group_id, group.generation_id, OFFSETS_TOPIC, partition, error.name)
        return _STORE_GROUP_ERRORS.get(error, error)

    def metadata_too_large(self, metadata: str) -> bool:
        return len(metadata) > self.config.offset_metadata_max_bytes

    async def store_offsets(self, group: GroupMetadata, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                            producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH
                            ) -> dict[TopicPartition, ErrorCode]:
        """Append the commits (acks=-1) and, once replicated, make them the group's offsets.

        With a ``producer_id`` (TxnOffsetCommit) the records go in one transactional batch of
        that producer and stay pending in the group until the transaction's marker
        (:meth:`GroupMetadata.complete_pending_txn_offset_commit`), as Kafka's storeOffsets."""
        valid = {tp: om for tp, om in offsets.items() if not self.metadata_too_large(om.metadata)}
        too_large = {tp: ErrorCode.offset_metadata_too_large for tp in offsets if tp not in valid}
        if not valid:
            return too_large
        partition = self.partition_for(group.group_id)
        if partition not in self.owned:
            return {**dict.fromkeys(valid, ErrorCode.not_coordinator), **too_large}
        records = [
            SimpleRecord(
                key=encode_offset_commit_key(OffsetCommitKey(group.group_id, topic, p)),
                value=encode_offset_commit_value(OffsetCommitValue(
                    om.offset, om.metadata, om.commit_timestamp, om.leader_epoch, om.expire_timestamp)))
            for (topic, p), om in valid.items()]
        transactional = producer_id != NO_PRODUCER_ID
        if transactional:
            group.prepare_txn_offset_commit(producer_id, dict(valid))
            # Kafka's coordinator builds the batch with base sequence 0 and the transactional bit.
            batch = build_batch(records, timestamp=self.now_ms(), producer_id=producer_id,
                                producer_epoch=producer_epoch, base_sequence=0, is_transactional=True)
        else:
            group.prepare_offset_commit(valid)
            batch = build_batch(records, timestamp=self.now_ms())
        error, base_offset = await self.topic.append(partition, batch, wait_for_replication=True,
                                                     transactional=transactional)
        if not group.is_(GroupState.DEAD):
            for tp, om in valid.items():
                if transactional and error == ErrorCode.none:
                    group.on_txn_offset_commit_append(producer_id, tp, replace(om, record_offset=base_offset))
                elif transactional:
                    group.fail_pending_txn_offset_commit(producer_id, tp)
                elif error == ErrorCode.none:
                    group.on_offset_commit_append(tp, replace(om, record_offset=base_offset))
                else:
                    group.fail_pending_offset_write(tp)
        if error != ErrorCode.none:
            log.debug("Offset commit of group %s failed: %s", group.group_id, error.name)
            error = _STORE_OFFSETS_ERRORS.get(error, error)
        return {**dict.fromkeys(valid, error), **too_large}

    def complete_txn(self, producer_id: int, partitions: Iterable[int], commit: bool) -> None:
        """A transaction marker of ``producer_id`` is written to these ``__consumer_offsets``
        partitions: complete its pending offsets in their groups (Kafka's handleTxnCompletion)."""
        wanted = set(partitions)
        for partition in wanted & self.loading.keys():
            self._deferred_completions.setdefault(partition, []).append((producer_id, commit))
        wanted -= self.loading.keys()
        for group in list(self.groups.values()):
            if group.is_(GroupState.DEAD) or producer_id not in group.pending_txn_offset_commits:
                continue
            if self.partition_for(group.group_id) in wanted:
                group.complete_pending_txn_offset_commit(producer_id, commit)

    def cleanup_group_metadata(self, groups: Iterable[GroupMetadata],
                               selector: Callable[[GroupMetadata], dict[TopicPartition, OffsetAndMetadata]]
                               ) -> int:
        """Remove the offsets ``selector`` picks from each group; a group left empty with no
        offsets dies.  Tombstones for what was removed are appended without waiting for
        replication (as Kafka does: a lost tombstone is written again next time).  Returns
        the number of offsets removed."""
        removed_total = 0
        tombstones: dict[int, list[SimpleRecord]] = {}
        for group in groups:
            removed = selector(group)
            removed_total += len(removed)
            if group.is_(GroupState.EMPTY) and not group.has_offsets():
                log.info("Group %s transitioned to Dead in generation %d", group.group_id, group.generation_id)
                group.transition_to(GroupState.DEAD, self.now_ms())
            partition = self.partition_for(group.group_id)
            records = tombstones.setdefault(partition, [])
            records.extend(SimpleRecord(key=encode_offset_commit_key(OffsetCommitKey(group.group_id, t, p)), value=None)
                           for t, p in removed)
            if group.is_(GroupState.DEAD) and self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
                if group.generation_id > 0:  # groups used only for offsets never wrote metadata
                    records.append(SimpleRecord(key=encode_group_metadata_key(GroupMetadataKey(group.group_id)),
                                                value=None))
        for partition, records in tombstones.items():
            if records and partition in self.owned:
                task = asyncio.get_running_loop().create_task(self._append_tombstones(partition, records))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
        return removed_total

    async def _append_tombstones(self, partition: int, records: list[SimpleRecord]) -> None:
        error, _ = await self.topic.append(partition, build_batch(records, timestamp=self.now_ms()),
                                           wait_for_replication=False)
        if error != ErrorCode.none:
            log.warning("Failed to write %d tombstones to %s-%d: %s", len(records), OFFSETS_TOPIC, partition,
                        error.name)
