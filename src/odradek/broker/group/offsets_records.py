"""The records of ``__consumer_offsets``, byte-compatible with Kafka's GroupMetadataManager.

Every record has a key and (except tombstones) a value; both begin with an int16 version.
The key's version says what the record is:

* 0 or 1: an offset commit; key ``(group, topic, partition)``, value OffsetCommitValue
  (v0: offset, metadata, commit timestamp; v1 adds an expire timestamp; v2 drops it again;
  v3 adds the committed leader epoch; v4 is v3 in the flexible encoding);
* 2: a group's metadata; key ``group``, value GroupMetadataValue (v0: protocol type,
  generation, protocol, leader, members; v1 adds each member's rebalance timeout; v2 the
  current state timestamp; v3 each member's group instance id; v4 is v3, flexible).

A null value is a tombstone: the offset, or the whole group, is gone.  Kafka writes offset
commit key v1, value v3 (v1 when the commit carries a retention time), and group metadata
value v3; so does this module.  Newer key versions (KIP-848 record types) are reported as
:class:`UnknownKey` and skipped by the loader.

Sans-IO: bytes in, dataclasses out, and back.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.record_codec import RecordFormatError, SchemaReader, SchemaWriter

__all__ = [
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadataRecord",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "RecordFormatError",
    "UnknownKey",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
# Both value kinds are read up to v4, the first (and only) flexible version.
_HIGHEST_VALUE_VERSION = 4
_FIRST_FLEXIBLE_VALUE_VERSION = 4


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    version: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1  # only in value v1: a retention time the commit asked for


@dataclass(frozen=True, slots=True)
class MemberMetadataRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadataRecord, ...]


# ----------------------------------------------------------------------------- writing


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    w = SchemaWriter(OFFSET_COMMIT_KEY_VERSION)
    w.string(key.group)
    w.string(key.topic)
    w.i32(key.partition)
    return w.finish()


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    w = SchemaWriter(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return w.finish()


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """Value v3, or v1 when the commit has an expire timestamp (as Kafka chooses)."""
    if value.expire_timestamp >= 0:
        w = SchemaWriter(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY)
        w.i64(value.offset)
        w.string(value.metadata)
        w.i64(value.commit_timestamp)
        w.i64(value.expire_timestamp)
        return w.finish()
    w = SchemaWriter(OFFSET_COMMIT_VALUE_VERSION)
    w.i64(value.offset)
    w.i32(value.leader_epoch)
    w.string(value.metadata)
    w.i64(value.commit_timestamp)
    return w.finish()


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    """Value v3."""
    w = SchemaWriter(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.i64(value.current_state_timestamp)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout_ms)
        w.i32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.finish()


# ----------------------------------------------------------------------------- reading


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    r = SchemaReader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.i32())
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(r.string())
    return UnknownKey(version)


def decode_offset_commit_value(data: bytes | None) -> OffsetCommitValue | None:
    """None for a tombstone."""
    if data is None:
        return None
    r = SchemaReader(data)
    version = r.version(_HIGHEST_VALUE_VERSION, _FIRST_FLEXIBLE_VALUE_VERSION, "offset commit value")
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.i64()
    expire_timestamp = r.i64() if version == 1 else -1
    r.tagged_fields()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def decode_group_metadata_value(data: bytes | None) -> GroupMetadataValue | None:
    """None for a tombstone."""
    if data is None:
        return None
    r = SchemaReader(data)
    version = r.version(_HIGHEST_VALUE_VERSION, _FIRST_FLEXIBLE_VALUE_VERSION, "group metadata value")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_timestamp = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_length()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.tagged_fields()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout  # v0 had one timeout for both
        members.append(MemberMetadataRecord(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                            session_timeout, subscription, assignment))
    r.tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_timestamp, tuple(members))
