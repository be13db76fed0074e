"""The order in which Kafka's tools print what they collected in Java hash maps.

Kafka's admin client puts a response's entries into ``HashMap``s and its tools print them as
the map iterates: by bucket (the key's ``hashCode`` spread and masked to the table size), and
within a bucket in insertion order.  Printing "what Kafka's tool prints" means printing in that
order; these functions compute it from the keys' Java hash codes and the map's sizing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

__all__ = ["hash_map_order", "java_map_hash", "java_string_hash"]

T = TypeVar("T")
_MASK = 0xFFFFFFFF
_LOAD_FACTOR = 0.75


def java_string_hash(text: str | None) -> int:
    """``String.hashCode`` (over UTF-16 code units) as an unsigned 32-bit value; 0 for null."""
    if text is None:
        return 0
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & _MASK
    return h


def java_map_hash(entries: Iterable[tuple[str, str | None]]) -> int:
    """``Map<String, String>.hashCode``: the sum of each entry's key hash XOR value hash."""
    return sum(java_string_hash(k) ^ java_string_hash(v) for k, v in entries) & _MASK


def _table_size_for(capacity: int) -> int:
    size = 1
    while size < capacity:
        size <<= 1
    return size


def hash_map_order(items: Sequence[T], hashes: Sequence[int], initial_capacity: int | None = None) -> list[T]:
    """``items`` (in insertion order, with their keys' hash codes) as a ``HashMap`` built with
    ``new HashMap<>(initial_capacity)`` (None: ``new HashMap<>()``) iterates them."""
    capacity = 16 if initial_capacity is None else _table_size_for(max(initial_capacity, 1))
    threshold = int(capacity * _LOAD_FACTOR)
    for size in range(1, len(items) + 1):  # the table doubles whenever a put passes the threshold
        if size > threshold:
            capacity <<= 1
            threshold = int(capacity * _LOAD_FACTOR)
    buckets = [(h ^ (h >> 16)) & (capacity - 1) for h in hashes]
    return [items[i] for i in sorted(range(len(items)), key=lambda i: (buckets[i], i))]
