"""ProduceRequest (v3-v9) read by hand: record batches come back as views into the frame.

The generic decoder copies every partition's records into a new ``bytes``; a large produce
request read into its own buffer (see the socket server) is instead appended straight from
that buffer, with its offsets rewritten in place.  Every length is bounds-checked: a request
that lies about its sizes is malformed, never a crash or an over-read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.protocol.framing import MalformedRequestError
from odradek.protocol.varint import VarintError, read_uvarint

__all__ = ["ProduceRequestView", "has_transactional_records", "parse_produce_request"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
# Record batch v2: magic at byte 16, attributes (int16) at 21; bit 4 marks a transactional batch.
_MAGIC_AT = 16
_ATTRIBUTES_LOW_BYTE_AT = 22
_TRANSACTIONAL_BIT = 0x10


@dataclass(slots=True)
class ProduceRequestView:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    # (topic, partition, records) in request order; records None when the client sent null
    partitions: list[tuple[str, int, memoryview | None]]


class _Reader:
    __slots__ = ("end", "pos", "view")

    def __init__(self, view: memoryview, pos: int) -> None:
        self.view = view
        self.pos = pos
        self.end = len(view)

    def need(self, n: int) -> int:
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise MalformedRequestError("produce request: truncated or bad length")
        self.pos = pos + n
        return pos

    def int16(self) -> int:
        return _I16.unpack_from(self.view, self.need(2))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.view, self.need(4))[0]

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.view, self.pos, self.end)
        except VarintError as e:
            raise MalformedRequestError(f"produce request: {e}") from None
        return value

    def string(self, flexible: bool, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if flexible else self.int16()
        if n < 0:
            if nullable and n == -1:
                return None
            raise MalformedRequestError("produce request: bad string length")
        start = self.need(n)
        try:
            return str(self.view[start:start + n], "utf-8")
        except UnicodeDecodeError:
            raise MalformedRequestError("produce request: string is not UTF-8") from None

    def count(self, flexible: bool) -> int:
        n = self.uvarint() - 1 if flexible else self.int32()
        # Every element takes at least one byte: a larger count is a lie.
        if n < 0 or n > self.end - self.pos:
            raise MalformedRequestError("produce request: bad array count")
        return n

    def records(self, flexible: bool) -> memoryview | None:
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < 0:
            if n == -1:
                return None
            raise MalformedRequestError("produce request: bad records length")
        start = self.need(n)
        return self.view[start:start + n]

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.need(self.uvarint())


def parse_produce_request(frame: bytes | bytearray | memoryview, offset: int, version: int) -> ProduceRequestView:
    """Parse the body of a Produce request that starts at ``offset`` of ``frame``."""
    if not 3 <= version <= 9:
        raise MalformedRequestError(f"produce request version {version} is not supported here")
    flexible = version >= 9
    r = _Reader(memoryview(frame), offset)
    transactional_id = r.string(flexible, nullable=True)
    acks = r.int16()
    timeout_ms = r.int32()
    partitions: list[tuple[str, int, memoryview | None]] = []
    for _ in range(r.count(flexible)):
        topic = r.string(flexible)
        assert topic is not None
        for _ in range(r.count(flexible)):
            index = r.int32()
            partitions.append((topic, index, r.records(flexible)))
            if flexible:
                r.skip_tagged_fields()
        if flexible:
            r.skip_tagged_fields()
    if flexible:
        r.skip_tagged_fields()
    return ProduceRequestView(transactional_id, acks, timeout_ms, partitions)


def has_transactional_records(partitions: list[tuple[str, int, memoryview | None]]) -> bool:
    """Whether the first batch of some partition is a transactional v2 batch (Kafka's
    RequestUtils.hasTransactionalRecords; a v3+ request carries one batch per partition).
    Reads two bytes per partition: the Produce fast path can afford it."""
    for _, _, records in partitions:
        if (records is not None and len(records) > _ATTRIBUTES_LOW_BYTE_AT and records[_MAGIC_AT] == 2
                and records[_ATTRIBUTES_LOW_BYTE_AT] & _TRANSACTIONAL_BIT):
            return True
    return False
