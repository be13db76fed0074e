"""Rebuilding a ``__consumer_offsets`` partition's groups from its log (Kafka's
``GroupMetadataManager.doLoadGroupsAndOffsets``).

The partition is replayed in log order: the last record for a key wins and a tombstone
removes it.  A group's metadata record and its offsets have separate keys, so a group
tombstone leaves offsets alone (they have tombstones of their own).  Groups that only
have offsets (standalone consumers committing with generation -1, or groups whose
metadata record was removed) come back as Empty groups holding those offsets.

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
    next_offset: int = 0
    skipped: int = 0

    def apply(self, data: bytes) -> None:
        """Apply every whole batch in ``data`` (as read from the log)."""
        for pos, header in iter_batches(data):
            self.next_offset = header.next_offset
            if header.is_control:  # transaction markers: odradek writes none
                continue
            try:
                _, records = decode_batch(data[pos:pos + header.size])
            except KafkaError as e:
                log.error("Skipping a corrupt batch at offset %d of %s: %s", header.base_offset, self.name, e)
                self.skipped += 1
                continue
            for record in records:
                self._apply_record(header.base_offset, record.offset, record.key, record.value)

    def _apply_record(self, batch_offset: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            log.error("Skipping a record without a key at offset %d of %s", offset, self.name)
            self.skipped += 1
            return
        try:
            parsed = decode_key(key)
            if isinstance(parsed, OffsetCommitKey):
                committed = decode_offset_commit_value(value)
                if committed is None:
                    self.offsets.pop(parsed, None)
                else:
                    self.offsets[parsed] = OffsetAndMetadata(
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
        """Every group the partition holds, with its offsets."""
        by_group: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
        for key, om in self.offsets.items():
            by_group.setdefault(key.group, {})[(key.topic, key.partition)] = om
        result = []
        for group_id, record in self.groups.items():
            group = group_from_record(group_id, record)
            group.offsets = by_group.pop(group_id, {})
            result.append(group)
        for group_id, offsets in by_group.items():
            result.append(GroupMetadata(group_id, current_state_timestamp=now_ms, offsets=offsets))
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
