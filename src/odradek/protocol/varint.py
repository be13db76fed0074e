"""Kafka's variable-length integers: the one reader and writer every codec in odradek uses.

Two encodings, as in Kafka's ``org.apache.kafka.common.utils.ByteUtils`` and the protocol
guide's primitive types:

* **unsigned varint** (``UNSIGNED_VARINT``): seven bits per byte, least significant group
  first, the high bit set on every byte but the last. Flexible message versions (KIP-482)
  use it for compact lengths and counts (n + 1, so 0 means null) and tagged fields. At most
  5 bytes, as ``ByteUtils.readUnsignedVarint`` allows.
* **varlong** (``VARLONG``): a signed 64-bit value zig-zag encoded (0, -1, 1, -2, ... map
  to 0, 1, 2, 3, ...) then written as an unsigned varint of at most 10 bytes. Record
  batch v2 (Kafka's ``DefaultRecord``) stores its record fields this way.

The readers take the input, a position and the end of the region they may read (a
structure inside a larger frame must not read past its own end), and return the value and
the position after it. One-byte values, nearly every length and count on the wire, take a
fast path with no loop. Bytes that are not a varint raise :class:`VarintError`; each codec
turns it into its own error (a malformed request, a corrupt record batch, ...).
"""

from __future__ import annotations

from typing import Final

__all__ = ["Buffer", "VarintError", "encode_uvarint", "encode_varlong", "read_uvarint", "read_varlong"]

UVARINT_MAX_BYTES: Final = 5
VARLONG_MAX_BYTES: Final = 10

_UINT64_MASK: Final = (1 << 64) - 1

Buffer = bytes | bytearray | memoryview


class VarintError(ValueError):
    """Bytes that are not a varint: cut off by the end of the region, or too long."""


def read_uvarint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` (at most 5 bytes, ending before ``end``) and the
    position after it."""
    if pos < end:
        byte = buf[pos]
        if byte < 0x80:
            return byte, pos + 1
        # The loop is written out here and in read_varlong rather than shared: through a
        # common helper, a two-byte value took about 1.6 times as long (bench/varint.py).
        value = byte & 0x7F
        shift = 7
        pos += 1
        while pos < end:
            byte = buf[pos]
            pos += 1
            if byte < 0x80:
                return value | (byte << shift), pos
            value |= (byte & 0x7F) << shift
            shift += 7
            if shift == 35:  # 7 * UVARINT_MAX_BYTES
                raise VarintError(f"varint is longer than {UVARINT_MAX_BYTES} bytes")
    raise VarintError("truncated varint")


def read_varlong(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """The zig-zag encoded signed varlong at ``pos`` (at most 10 bytes, ending before
    ``end``) and the position after it."""
    if pos < end:
        raw = buf[pos]
        if raw < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos + 1
        raw &= 0x7F
        shift = 7
        pos += 1
        while pos < end:
            byte = buf[pos]
            pos += 1
            if byte < 0x80:
                raw |= byte << shift
                return (raw >> 1) ^ -(raw & 1), pos
            raw |= (byte & 0x7F) << shift
            shift += 7
            if shift == 70:  # 7 * VARLONG_MAX_BYTES
                raise VarintError(f"varlong is longer than {VARLONG_MAX_BYTES} bytes")
    raise VarintError("truncated varint")


def _encode_groups(raw: int) -> bytes:
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


# Compact lengths and counts are nearly always small: their encodings are looked up.
_SMALL_UVARINTS: Final = tuple(_encode_groups(n) for n in range(256))


def encode_uvarint(value: int) -> bytes:
    """``value`` as an unsigned varint.

    ``value`` must not be negative; it is not checked here, as this is called for every
    compact length and count written (a length + 1, by construction never negative).
    """
    if value < 256:
        return _SMALL_UVARINTS[value]
    return _encode_groups(value)


def encode_varlong(value: int) -> bytes:
    """``value`` (-2**63 <= value < 2**63) zig-zag encoded as a varlong."""
    return _encode_groups(((value << 1) ^ (value >> 63)) & _UINT64_MASK)
