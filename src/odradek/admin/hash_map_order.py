"""The order in which Java's ``java.util.HashMap`` and Scala 2.13's ``mutable.HashMap`` give
back their keys, so a tool can print collections in the order Kafka's Scala tools do.

Kafka's ``kafka-log-dirs.sh`` (2.8) prints log directories and partitions by iterating hash
maps; text-equal output (what the conformance matrix compares) needs the same order.  Both
maps put a key in bucket ``spread(hashCode) & (capacity - 1)`` with ``spread(h) = h ^ (h >>> 16)``
and iterate buckets in index order; within a bucket Java keeps insertion order and Scala
sorts by the spread hash.  Capacity is a power of two grown by doubling at a 0.75 load factor
(Java grows once the size exceeds the threshold, Scala before the insert that reaches it).
Buckets that Java turns into trees (eight colliding keys) are not modelled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from odradek.broker.group.hashing import java_string_hashcode

__all__ = ["java_hash_map_order", "java_topic_partition_hashcode", "scala_hash_map_order"]

K = TypeVar("K")
_MASK = 0xFFFFFFFF


def _spread(h: int) -> int:
    h &= _MASK
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def java_topic_partition_hashcode(topic: str, partition: int) -> int:
    """``TopicPartition.hashCode()``: ``31 * (31 + partition) + topic.hashCode()``, 32-bit."""
    h = (31 * (31 + partition) + java_string_hashcode(topic)) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def java_hash_map_order(keys: Iterable[K], hashcode: Callable[[K], int], initial_capacity: int = 16) -> list[K]:
    """Keys ``put`` in this order into ``new HashMap<>(initial_capacity)``, as it iterates them."""
    keys = list(dict.fromkeys(keys))
    capacity = 1
    while capacity < max(initial_capacity, 1):
        capacity *= 2
    threshold = int(capacity * 0.75)
    for size in range(1, len(keys) + 1):
        if size > threshold:
            capacity *= 2
            threshold = int(capacity * 0.75)
    position = {k: i for i, k in enumerate(keys)}
    return sorted(keys, key=lambda k: (_spread(hashcode(k)) & (capacity - 1), position[k]))


def scala_hash_map_order(keys: Iterable[K], hashcode: Callable[[K], int]) -> list[K]:
    """Keys added to a new Scala 2.13 ``mutable.HashMap`` (default capacity), as it iterates them."""
    keys = list(dict.fromkeys(keys))
    capacity = 16
    while len(keys) >= int(capacity * 0.75):
        capacity *= 2
    return sorted(keys, key=lambda k: (_spread(hashcode(k)) & (capacity - 1), _spread(hashcode(k))))
