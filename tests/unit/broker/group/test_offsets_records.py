"""The __consumer_offsets record codecs against byte vectors built by hand from Kafka's
schemas (OffsetCommitKey/Value, GroupMetadataKey/Value), and round trips."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.broker.group.offsets_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)


def h(text: str) -> bytes:
    """Hex with spaces and ``|`` separators, as written below field by field."""
    return bytes.fromhex(text.replace("|", " "))


# OffsetCommitKey: version 1 | group "g" | topic "t" | partition 3
OFFSET_KEY = h("0001 | 0001 67 | 0001 74 | 00000003")
# OffsetCommitValue v3: offset 42 | leader epoch 5 | metadata "m" | commit timestamp 1000
OFFSET_VALUE_V3 = h("0003 | 000000000000002a | 00000005 | 0001 6d | 00000000000003e8")
# OffsetCommitValue v1: offset 42 | metadata "" | commit timestamp 1000 | expire timestamp 2000
OFFSET_VALUE_V1 = h("0001 | 000000000000002a | 0000 | 00000000000003e8 | 00000000000007d0")
# GroupMetadataKey: version 2 | group "g"
GROUP_KEY = h("0002 | 0001 67")
# GroupMetadataValue v3: protocol type "consumer" | generation 7 | protocol "range" | leader "m1"
# | current state timestamp 1234 | 1 member: member id "m1" | group instance id null
# | client id "c" | client host "/h" | rebalance timeout 300000 | session timeout 10000
# | subscription 01 | assignment 02 03
GROUP_VALUE_V3 = h(
    "0003 | 0008 636f6e73756d6572 | 00000007 | 0005 72616e6765 | 0002 6d31 | 00000000000004d2"
    "| 00000001 | 0002 6d31 | ffff | 0001 63 | 0002 2f68 | 000493e0 | 00002710 | 00000001 01 | 00000002 0203")

MEMBER = MemberMetadataRecord("m1", None, "c", "/h", 300000, 10000, b"\x01", b"\x02\x03")
GROUP = GroupMetadataValue("consumer", 7, "range", "m1", 1234, (MEMBER,))


def test_offset_commit_key_golden() -> None:
    assert encode_offset_commit_key(OffsetCommitKey("g", "t", 3)) == OFFSET_KEY
    assert decode_key(OFFSET_KEY) == OffsetCommitKey("g", "t", 3)
    # Key version 0, the older offset commit key, has the same layout.
    assert decode_key(b"\x00\x00" + OFFSET_KEY[2:]) == OffsetCommitKey("g", "t", 3)


def test_offset_commit_value_golden_v3_and_v1() -> None:
    assert encode_offset_commit_value(OffsetCommitValue(42, "m", 1000, leader_epoch=5)) == OFFSET_VALUE_V3
    assert decode_offset_commit_value(OFFSET_VALUE_V3) == OffsetCommitValue(42, "m", 1000, 5, -1)
    # A commit with a retention time of its own is written as v1, as Kafka does.
    assert encode_offset_commit_value(OffsetCommitValue(42, "", 1000, expire_timestamp=2000)) == OFFSET_VALUE_V1
    assert decode_offset_commit_value(OFFSET_VALUE_V1) == OffsetCommitValue(42, "", 1000, -1, 2000)


def test_offset_commit_value_v0_v2_and_flexible_v4() -> None:
    v0 = h("0000 | 0000000000000007 | 0002 6869 | 0000000000000009")
    assert decode_offset_commit_value(v0) == OffsetCommitValue(7, "hi", 9)
    v2 = h("0002 | 0000000000000007 | 0000 | 0000000000000009")
    assert decode_offset_commit_value(v2) == OffsetCommitValue(7, "", 9)
    # v4: compact string (length + 1 as an unsigned varint) and a tagged-field section,
    # here holding one unknown tag (0) of 3 bytes that must be skipped.
    v4 = h("0004 | 0000000000000007 | 00000002 | 03 6869 | 0000000000000009 | 01 00 03 aabbcc")
    assert decode_offset_commit_value(v4) == OffsetCommitValue(7, "hi", 9, 2)


def test_group_metadata_golden_v3() -> None:
    assert encode_group_metadata_key(GroupMetadataKey("g")) == GROUP_KEY
    assert decode_key(GROUP_KEY) == GroupMetadataKey("g")
    assert encode_group_metadata_value(GROUP) == GROUP_VALUE_V3
    assert decode_group_metadata_value(GROUP_VALUE_V3) == GROUP


def test_group_metadata_old_and_flexible_versions() -> None:
    # v0: no rebalance timeout (the session timeout stands in), no state timestamp, no
    # instance ids; an empty group with null protocol and leader.
    v0 = h("0000 | 0008 636f6e73756d6572 | 00000001 | 0005 72616e6765 | 0002 6d31 | 00000001"
           "| 0002 6d31 | 0001 63 | 0002 2f68 | 00002710 | 00000001 01 | 00000000")
    decoded = decode_group_metadata_value(v0)
    assert decoded == GroupMetadataValue("consumer", 1, "range", "m1", -1, (
        MemberMetadataRecord("m1", None, "c", "/h", 10000, 10000, b"\x01", b""),))
    empty_v2 = h("0002 | 0008 636f6e73756d6572 | 00000003 | ffff | ffff | 0000000000000005 | 00000000")
    assert decode_group_metadata_value(empty_v2) == GroupMetadataValue("consumer", 3, None, None, 5, ())
    # v4 (flexible): compact strings/bytes/arrays and tagged-field sections, a static member.
    v4 = h("0004 | 09 636f6e73756d6572 | 00000002 | 06 72616e6765 | 03 6d31 | 0000000000000005"
           "| 02 | 03 6d31 | 03 6931 | 02 63 | 03 2f68 | 000493e0 | 00002710 | 02 01 | 01 | 00 | 00")
    assert decode_group_metadata_value(v4) == GroupMetadataValue("consumer", 2, "range", "m1", 5, (
        MemberMetadataRecord("m1", "i1", "c", "/h", 300000, 10000, b"\x01", b""),))


def test_tombstones_and_unknown_keys() -> None:
    assert decode_offset_commit_value(None) is None
    assert decode_group_metadata_value(None) is None
    # KIP-848 record types (key versions 3+) are not ours to read.
    assert decode_key(h("0003 | 0001 67")) == UnknownKey(3)


@pytest.mark.parametrize(("decode", "data"), [
    (decode_offset_commit_value, OFFSET_VALUE_V3[:-1]),  # truncated
    (decode_group_metadata_value, GROUP_VALUE_V3[:40]),  # truncated inside the members
    (decode_offset_commit_value, h("0009 | 00")),  # unknown value version
    (decode_group_metadata_value, h("0007")),
    (decode_offset_commit_value, b"\x00"),  # not even a version
    (decode_group_metadata_value, h("0003 | ffff")),  # null protocol type
])
def test_malformed_values_are_refused(decode: Callable[[bytes], object], data: bytes) -> None:
    with pytest.raises(RecordFormatError):
        decode(data)


def test_malformed_keys_are_refused() -> None:
    with pytest.raises(RecordFormatError):
        decode_key(h("0001 | 0005 6162"))
    with pytest.raises(RecordFormatError):
        decode_key(h("0002 | ffff"))  # a null group


names = st.text(max_size=30)
members = st.builds(MemberMetadataRecord, names, st.none() | names, names, names, st.integers(0, 2**31 - 1),
                    st.integers(0, 2**31 - 1), st.binary(max_size=40), st.binary(max_size=40))


@given(st.builds(GroupMetadataValue, names, st.integers(-(2**31), 2**31 - 1), st.none() | names,
                 st.none() | names, st.integers(-1, 2**62), st.lists(members, max_size=4).map(tuple)))
def test_group_metadata_round_trip(value: GroupMetadataValue) -> None:
    assert decode_group_metadata_value(encode_group_metadata_value(value)) == value


@given(names, names, st.integers(0, 2**31 - 1), st.integers(-1, 2**62), names, st.integers(0, 2**62),
       st.integers(-1, 2**31 - 1), st.one_of(st.just(-1), st.integers(0, 2**62)))
def test_offset_commit_round_trip(group: str, topic: str, partition: int, offset: int, metadata: str,
                                  timestamp: int, epoch: int, expire: int) -> None:
    key = OffsetCommitKey(group, topic, partition)
    assert decode_key(encode_offset_commit_key(key)) == key
    value = OffsetCommitValue(offset, metadata, timestamp, epoch if expire < 0 else -1, expire)
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value
