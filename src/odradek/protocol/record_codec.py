"""The primitive encodings of the records Kafka keeps in its internal topics
(``__consumer_offsets``, ``__transaction_state``): each key and value is a version (int16)
followed by the fields of a generated message, in the classic encoding (int16-length strings,
int32-length bytes, int32-count arrays) or, for flexible versions, the compact one (unsigned
varint of length + 1, a tagged-field section after each struct).

Writers write the classic encoding, which is what Kafka 2.8 writes; readers read both. A
reader raises the error class its caller names (a subclass of :class:`RecordFormatError`), so
each record family reports its own kind of bad bytes.
"""

from __future__ import annotations

import struct

from odradek.protocol.varint import VarintError, read_uvarint

__all__ = ["RecordFormatError", "SchemaReader", "SchemaWriter"]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """Bytes that are not a valid key or value of an internal topic's record."""


class SchemaWriter:
    """A record key or value in the classic encoding, starting with its int16 version."""

    def __init__(self, version: int, error: type[RecordFormatError] = RecordFormatError) -> None:
        self.out = bytearray(_I16.pack(version))
        self._error = error

    def i8(self, v: int) -> None:
        self.out += _I8.pack(v)

    def i16(self, v: int) -> None:
        self.out += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.out += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.out += _I64.pack(v)

    def string(self, v: str | None) -> None:
        """An int16-length string; None is written as length -1."""
        if v is None:
            self.out += _I16.pack(-1)
            return
        data = v.encode("utf-8")
        if len(data) > 0x7FFF:
            raise self._error(f"string of {len(data)} bytes is too long")
        self.out += _I16.pack(len(data)) + data

    def bytes_(self, v: bytes) -> None:
        self.out += _I32.pack(len(v)) + v

    def finish(self) -> bytes:
        return bytes(self.out)


class SchemaReader:
    """Reads either encoding: ``flexible`` selects compact lengths and tagged-field sections,
    which are skipped."""

    def __init__(self, data: bytes, flexible: bool = False,
                 error: type[RecordFormatError] = RecordFormatError) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible
        self._error = error

    def version(self, highest: int, first_flexible: int, what: str) -> int:
        """Read the leading int16 version of a key or value, which must lie in
        ``[0, highest]``; from ``first_flexible`` on, the rest is in the flexible encoding."""
        version = self.i16()
        if not 0 <= version <= highest:
            raise self._error(f"unknown {what} version {version}")
        self.flexible = version >= first_flexible
        return version

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise self._error(f"record is truncated at byte {self.pos} (needed {n} more of {len(self.data)})")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def i8(self) -> int:
        return _I8.unpack(self._take(1))[0]

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.data, self.pos, len(self.data))
        except VarintError as e:
            raise self._error(f"{e} at byte {self.pos}") from None
        return value

    def _short_length(self) -> int:
        return self.uvarint() - 1 if self.flexible else self.i16()

    def _length(self) -> int:
        return self.uvarint() - 1 if self.flexible else self.i32()

    def nullable_string(self) -> str | None:
        n = self._short_length()
        if n < 0:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise self._error(f"invalid UTF-8 in a string: {e}") from None

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise self._error(f"unexpected null string at byte {self.pos}")
        return s

    def bytes_(self) -> bytes:
        n = self._length()
        if n < 0:
            raise self._error("unexpected null bytes")
        return self._take(n)

    def array_length(self, *, nullable: bool = False) -> int:
        """The element count; -1 for a null array when ``nullable``, else an error."""
        n = self._length()
        if n == -1 and nullable:
            return -1
        if n < 0:
            raise self._error("unexpected null array" if n == -1 else f"invalid array length {n} at byte {self.pos}")
        # Every element takes at least one byte: a larger count is corrupt, not a reason to loop.
        if n > len(self.data) - self.pos:
            raise self._error(f"record is truncated: an array of {n} elements at byte {self.pos} "
                              f"cannot fit in the {len(self.data) - self.pos} bytes left")
        return n

    def tagged_fields(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()  # tag
                self._take(self.uvarint())
