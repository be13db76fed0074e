"""The consumer protocol's group member metadata (Kafka's ConsumerProtocol), read: what a
consumer subscribes to (ConsumerProtocolSubscription) and what it was assigned
(ConsumerProtocolAssignment).  Both start with an int16 version and then, in every version, the
fields read here in the classic encoding; later fields are not needed."""

from __future__ import annotations

import struct

__all__ = ["consumer_assignment_partitions", "consumer_subscription_topics"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 2  # past the version

    def _unpack(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > len(self.data):
            raise ValueError("consumer protocol data ends early")
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(value)

    def i32(self) -> int:
        return self._unpack(_I32)

    def string(self) -> str:
        n = self._unpack(_I16)
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("consumer protocol string runs past the end")
        text = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return text


def consumer_subscription_topics(metadata: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription."""
    reader = _Reader(metadata)
    return [reader.string() for _ in range(max(reader.i32(), 0))]


def consumer_assignment_partitions(assignment: bytes) -> list[tuple[str, int]]:
    """The (topic, partition)s of a ConsumerProtocolAssignment (empty bytes: none)."""
    if not assignment:
        return []
    reader = _Reader(assignment)
    partitions = []
    for _ in range(max(reader.i32(), 0)):
        topic = reader.string()
        partitions += [(topic, reader.i32()) for _ in range(max(reader.i32(), 0))]
    return partitions
