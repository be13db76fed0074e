"""Which __consumer_offsets partition holds a group: Java's String.hashCode and Kafka's
Utils.abs, checked against values computed by a JVM (jshell, OpenJDK 17)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.broker.group.hashing import java_string_hashcode, kafka_abs, partition_for_group

# (group id, "id".hashCode(), Utils.abs(hashCode) % 50) as Java computes them.
JAVA = [
    ("test-group", 627841412, 12),
    ("", 0, 0),
    ("a", 97, 47),
    ("my-group", -1906497762, 12),
    ("consumer-group-1", 147483020, 20),
    ("grüppe", -1233264812, 12),  # Latin-1 range
    ("组-\x01", 31187768, 18),  # CJK and a control character
    ("😀-emoji", -1200436388, 38),  # outside the BMP: two UTF-16 code units
    ("polygenelubricants", -2147483648, 0),  # Integer.MIN_VALUE: Utils.abs gives 0
]


@pytest.mark.parametrize(("group", "hashcode", "partition"), JAVA)
def test_matches_java(group: str, hashcode: int, partition: int) -> None:
    assert java_string_hashcode(group) == hashcode
    assert partition_for_group(group, 50) == partition


def test_kafka_abs() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5
    assert kafka_abs(7) == 7


@given(st.text(), st.integers(1, 200))
def test_partition_is_in_range_and_hash_is_an_int32(group: str, partitions: int) -> None:
    h = java_string_hashcode(group)
    assert -(2**31) <= h < 2**31
    assert 0 <= partition_for_group(group, partitions) < partitions
