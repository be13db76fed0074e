"""Replaying a __consumer_offsets partition: last record wins, tombstones delete, groups
that only have offsets come back empty, unknown and unreadable records are skipped."""

from __future__ import annotations

from odradek.broker.group.group import GroupState
from odradek.broker.group.loader import replay
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
from odradek.protocol.records import CompressionType, SimpleRecord, build_batch


def offset(group: str, topic: str, partition: int, value: int | None) -> SimpleRecord:
    return SimpleRecord(
        key=encode_offset_commit_key(OffsetCommitKey(group, topic, partition)),
        value=None if value is None else encode_offset_commit_value(OffsetCommitValue(value, "", 5)))


def metadata(group: str, value: GroupMetadataValue | None) -> SimpleRecord:
    return SimpleRecord(key=encode_group_metadata_key(GroupMetadataKey(group)),
                        value=None if value is None else encode_group_metadata_value(value))


STABLE = GroupMetadataValue("consumer", 4, "range", "m2", 77, (
    MemberMetadataRecord("m1", None, "c1", "/h", 30000, 10000, b"s1", b"a1"),
    MemberMetadataRecord("m2", "i2", "c2", "/h", 30000, 10000, b"s2", b"a2")))


def batches(*groups: list[SimpleRecord], compression: CompressionType = CompressionType.NONE) -> list[bytes]:
    out, base = [], 0
    for records in groups:
        out.append(build_batch(records, base_offset=base, compression=compression))
        base += len(records)
    return out


def test_last_record_wins_and_tombstones_delete() -> None:
    state = replay(batches(
        [offset("g", "t", 0, 1), offset("g", "t", 1, 1), metadata("g", STABLE)],
        [offset("g", "t", 0, 2), offset("g", "t", 1, None)],
        [metadata("gone", STABLE), offset("gone", "t", 0, 9), metadata("gone", None)],
    ))
    assert state.next_offset == 8
    groups = {g.group_id: g for g in state.loaded_groups(now_ms=1)}
    g = groups["g"]
    assert (g.state, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id) == (
        GroupState.STABLE, 4, "consumer", "range", "m2")
    assert g.current_state_timestamp == 77
    assert [(m.member_id, m.group_instance_id, m.assignment) for m in g.members.values()] == [
        ("m1", None, b"a1"), ("m2", "i2", b"a2")]
    assert g.static_members == {"i2": "m2"}
    assert g.members["m1"].protocols == (("range", b"s1"),)
    assert {tp: om.offset for tp, om in g.offsets.items()} == {("t", 0): 2}
    assert g.offsets[("t", 0)].record_offset == 3  # the batch it came in
    # A group tombstone removes the group, not its offsets (they have tombstones of their own):
    # the offsets come back as an empty group.
    assert groups["gone"].state is GroupState.EMPTY and groups["gone"].protocol_type is None
    assert {tp: om.offset for tp, om in groups["gone"].offsets.items()} == {("t", 0): 9}
    assert state.removed_groups == {"gone"}


def test_empty_group_record_and_compressed_batches() -> None:
    empty = GroupMetadataValue("consumer", 2, None, None, 50, ())
    state = replay(batches([metadata("e", empty), offset("e", "t", 0, 3)], compression=CompressionType.GZIP))
    (group,) = state.loaded_groups(now_ms=1)
    assert (group.state, group.generation_id, group.leader_id) == (GroupState.EMPTY, 2, None)
    assert group.protocol_type == "consumer"
    assert group.offsets[("t", 0)].offset == 3


def test_unknown_and_unreadable_records_are_skipped() -> None:
    unknown = SimpleRecord(key=b"\x00\x05\x00\x01g", value=b"whatever")
    keyless = SimpleRecord(key=None, value=b"x")
    broken = SimpleRecord(key=encode_offset_commit_key(OffsetCommitKey("g", "t", 0)), value=b"\x00\x03\x00")
    state = replay(batches([unknown, keyless, broken, offset("g", "t", 1, 4)]))
    assert state.skipped == 2
    (group,) = state.loaded_groups(now_ms=1)
    assert {tp: om.offset for tp, om in group.offsets.items()} == {("t", 1): 4}
