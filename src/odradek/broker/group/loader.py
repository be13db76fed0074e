"""Rebuilding a ``__consumer_offsets`` partition's groups from its log (Kafka's
``GroupMetadataManager.doLoadGroupsAndOffsets``).

The partition is replayed in log order: the last record for a key wins and a tombstone
removes it.  A group's metadata record and its offsets have separate keys, so a group
tombstone leaves offsets alone (they have tombstones of their own).  Groups that only
have offsets (standalone consumers committing with generation -1, or groups whose
metadata record was removed) come back as Empty groups holding those offsets.

Transactional batches (TxnOffsetCommit) hold their offsets pending per producer id; the
producer's COMMIT marker applies them (unless a later commit of the partition is loaded
already), ABORT drops them, and those without a marker yet stay pending in their groups.

:class:`PartitionReplay` is sans-IO: feed it record batches as bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.broker.group.group import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from odradek.broker.group.offsets_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    RecordFormatError,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from odradek.protocol.control_records import ControlRecordType, decode_end_txn_marker
from odradek.protocol.errors import KafkaError
from odradek.protocol.records import decode_batch, iter_batches

log = logging.getLogger(__name__)

__all__ = ["PartitionReplay", "group_from_record", "replay"]


@dataclass
class PartitionReplay:
    """The state of one partition's records, replayed batch by batch."""

    name: str = "__consumer_offsets"
    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    removed_groups: set[str] = field(default_factory=set)
    offsets: dict[OffsetCommitKey, OffsetAndMetadata] = field(default_factory=dict)
    # Transactional offset commits (TxnOffsetCommit) by producer id, until their marker.
    pending: dict[int, dict[OffsetCommitKey, OffsetAndMetadata]] = field(default_factory=dict)
    next_offset: int = 0
    skipped: int = 0

    def apply(self, data: bytes) -> None:
        """Apply every whole batch in ``data`` (as read from the log)."""
        for pos, header in iter_batches(data):
            self.next_offset = header.next_offset
            if header.is_control:
                self._apply_marker(header.producer_id, data[pos:pos + header.size])
                continue
            try:
                _, records = decode_batch(data[pos:pos + header.size])
            except KafkaError as e:
                log.error("Skipping a corrupt batch at offset %d of %s: %s", header.base_offset, self.name, e)
                self.skipped += 1
                continue
            into = self.pending.setdefault(header.producer_id, {}) if header.is_transactional else self.offsets
            for record in records:
                self._apply_record(header.base_offset, record.offset, record.key, record.value, into)

    def _apply_marker(self, producer_id: int, batch: bytes) -> None:
        """A transaction marker (Kafka's loadGroupsAndOffsets): COMMIT makes the producer's
        pending offsets committed, each unless a later commit of the partition is loaded
        already; any other control record drops them."""
        try:
            marker, _ = decode_end_txn_marker(batch)
        except KafkaError as e:
            log.warning("Control batch of producer %d in %s is not a readable transaction marker (%s); "
                        "dropping the producer's pending offsets", producer_id, self.name, e)
            marker = ControlRecordType.ABORT
        pending = self.pending.pop(producer_id, {})
        if marker is not ControlRecordType.COMMIT:
            return
        for key, om in pending.items():
            current = self.offsets.get(key)
            if current is None or current.record_offset is None or current.record_offset < (om.record_offset or 0):
                self.offsets[key] = om

    def _apply_record(self, batch_offset: int, offset: int, key: bytes | None, value: bytes | None,
                      offsets: dict[OffsetCommitKey, OffsetAndMetadata]) -> None:
        if key is None:
            log.error("Skipping a record without a key at offset %d of %s", offset, self.name)
            self.skipped += 1
            return
        try:
            parsed = decode_key(key)
            if isinstance(parsed, OffsetCommitKey):
                committed = decode_offset_commit_value(value)
                if committed is None:
                    offsets.pop(parsed, None)
                else:
                    offsets[parsed] = OffsetAndMetadata(
                        committed.offset, committed.leader_epoch, committed.metadata, committed.commit_timestamp,
                        committed.expire_timestamp, batch_offset)
            elif isinstance(parsed, GroupMetadataKey):
                metadata = decode_group_metadata_value(value)
                if metadata is None:
                    self.groups.pop(parsed.group, None)
                    self.removed_groups.add(parsed.group)
                else:
                    self.removed_groups.discard(parsed.group)
                    self.groups[parsed.group] = metadata
            elif isinstance(parsed, UnknownKey):
                log.warning("Unknown record key version %d at offset %d of %s; ignoring it",
                            parsed.version, offset, self.name)
        except RecordFormatError as e:
            log.error("Skipping an unreadable record at offset %d of %s: %s", offset, self.name, e)
            self.skipped += 1

    def loaded_groups(self, now_ms: int) -> list[GroupMetadata]:
        """Every group the partition holds, with its offsets and the transactional offsets
        still awaiting their markers (these stay pending, as in Kafka)."""
        by_group: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
        for key, om in self.offsets.items():
            by_group.setdefault(key.group, {})[(key.topic, key.partition)] = om
        pending_by_group: dict[str, dict[int, dict[tuple[str, int], OffsetAndMetadata]]] = {}
        for producer_id, pending in self.pending.items():
            for key, om in pending.items():
                pending_by_group.setdefault(key.group, {}).setdefault(producer_id, {})[(key.topic, key.partition)] = om
        result = []
        for group_id, record in self.groups.items():
            group = group_from_record(group_id, record)
            group.offsets = by_group.pop(group_id, {})
            group.pending_txn_offset_commits = pending_by_group.pop(group_id, {})
            result.append(group)
        for group_id in dict.fromkeys([*by_group, *pending_by_group]):
            result.append(GroupMetadata(group_id, current_state_timestamp=now_ms, offsets=by_group.get(group_id, {}),
                                        pending_txn_offset_commits=pending_by_group.get(group_id, {})))
        return result


def group_from_record(group_id: str, record: GroupMetadataValue) -> GroupMetadata:
    """A group as its metadata record describes it: Stable with its members and their
    assignments, or Empty without members."""
    group = GroupMetadata(
        group_id,
        state=GroupState.STABLE if record.members else GroupState.EMPTY,
        current_state_timestamp=record.current_state_timestamp,  # -1 in records before v2
        protocol_type=record.protocol_type or None,
        protocol_name=record.protocol,
        generation_id=record.generation,
    )
    for m in record.members:
        member = MemberMetadata(
            m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.session_timeout_ms, record.protocol_type, ((record.protocol or "", m.subscription),),
            assignment=m.assignment)
        group.add(member, None)
    group.protocol_type = record.protocol_type or None
    group.leader_id = record.leader if record.leader in group.members else next(iter(group.members), None)
    return group


def replay(batches: Iterable[bytes], name: str = "__consumer_offsets") -> PartitionReplay:
    """Replay whole chunks of batches (for tests and tools)."""
    state = PartitionReplay(name)
    for data in batches:
        state.apply(data)
    return state
