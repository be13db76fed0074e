"""Which ``__consumer_offsets`` partition holds a group: Kafka's
``Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`` (and the same rule places a
transactional id in ``__transaction_state``).

Java's ``String.hashCode`` runs over UTF-16 code units (a character outside the BMP counts as
its two surrogates) with 32-bit wrap-around, and Kafka's ``Utils.abs`` maps
``Integer.MIN_VALUE`` to 0 rather than leaving it negative.  Getting this exactly right is
what lets a group keep its partition when a cluster moves between odradek and Kafka.
"""

from __future__ import annotations

__all__ = ["java_string_hashcode", "kafka_abs", "partition_for_group"]

_INT_MIN = -(2**31)


def java_string_hashcode(s: str) -> int:
    """``s.hashCode()`` as Java computes it (a signed 32-bit int)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Integer.MIN_VALUE`` becomes 0."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for_group(group_id: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hashcode(group_id)) % num_partitions
