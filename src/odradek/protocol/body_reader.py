"""A bounds-checked reader of request bodies, shared by the hand-written request readers
(``produce_request``, ``fetch_request``).

Every length is checked against the end of the body: a request that lies about its sizes is
malformed (MalformedRequestError, with ``what`` naming the request), never an IndexError,
a struct.error or an over-read.  ``flexible`` versions use compact strings and arrays.
"""

from __future__ import annotations

import struct

from odradek.protocol.framing import MalformedRequestError
from odradek.protocol.varint import VarintError, read_uvarint

__all__ = ["BodyReader"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class BodyReader:
    __slots__ = ("end", "flexible", "pos", "view", "what")

    def __init__(self, view: memoryview, pos: int, end: int, flexible: bool, what: str) -> None:
        self.view = view
        self.pos = pos
        self.end = end
        self.flexible = flexible
        self.what = what

    def malformed(self, why: str) -> MalformedRequestError:
        return MalformedRequestError(f"{self.what}: {why}")

    def need(self, n: int) -> int:
        """Consume ``n`` bytes; returns where they start."""
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise self.malformed("truncated or bad length")
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
            raise self.malformed(str(e)) from None
        return value

    def string(self, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        if n < 0:
            if nullable and n == -1:
                return None
            raise self.malformed("bad string length")
        start = self.need(n)
        try:
            return str(self.view[start:start + n], "utf-8")
        except UnicodeDecodeError:
            raise self.malformed("string is not UTF-8") from None

    def count(self, item_size: int = 1) -> int:
        """An array's item count; ``item_size`` is the least number of bytes an item takes
        (a larger count than the rest of the body can hold is a lie)."""
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0 or n * item_size > self.end - self.pos:
            raise self.malformed("bad array count")
        return n

    def nullable_bytes(self) -> memoryview | None:
        """A (compact) nullable bytes field, as a view into the body."""
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            if n == -1:
                return None
            raise self.malformed("bad bytes length")
        start = self.need(n)
        return self.view[start:start + n]

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.need(self.uvarint())
