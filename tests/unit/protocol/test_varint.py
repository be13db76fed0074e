"""Kafka's unsigned varints and zig-zag varlongs: golden bytes, boundaries, round trips and
input that is not a varint."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol.varint import (
    Buffer,
    VarintError,
    encode_uvarint,
    encode_varlong,
    read_uvarint,
    read_varlong,
)

Reader = Callable[[Buffer, int, int], tuple[int, int]]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

UVARINTS = [
    (0, b"\x00"),
    (1, b"\x01"),
    (127, b"\x7f"),
    (128, b"\x80\x01"),
    (255, b"\xff\x01"),
    (256, b"\x80\x02"),
    (300, b"\xac\x02"),
    (16_383, b"\xff\x7f"),
    (16_384, b"\x80\x80\x01"),
    (2**31 - 1, b"\xff\xff\xff\xff\x07"),
    (2**32 - 1, b"\xff\xff\xff\xff\x0f"),  # a compact count of 2**32 - 2: still 5 bytes
]

VARLONGS = [
    (0, b"\x00"),
    (-1, b"\x01"),
    (1, b"\x02"),
    (-2, b"\x03"),
    (63, b"\x7e"),
    (-64, b"\x7f"),
    (64, b"\x80\x01"),
    (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
    (-(2**31), b"\xff\xff\xff\xff\x0f"),
    (INT64_MAX, b"\xfe" + b"\xff" * 8 + b"\x01"),
    (INT64_MIN, b"\xff" * 9 + b"\x01"),
]


@pytest.mark.parametrize(("value", "encoded"), UVARINTS)
def test_uvarint_golden_bytes(value: int, encoded: bytes) -> None:
    assert encode_uvarint(value) == encoded
    # Read from the middle of a larger buffer, whatever follows it.
    buf = b"\xaa" + encoded + b"\x80\x80"
    assert read_uvarint(buf, 1, len(buf)) == (value, 1 + len(encoded))
    assert read_uvarint(memoryview(buf), 1, 1 + len(encoded)) == (value, 1 + len(encoded))


@pytest.mark.parametrize(("value", "encoded"), VARLONGS)
def test_varlong_golden_bytes(value: int, encoded: bytes) -> None:
    assert encode_varlong(value) == encoded
    buf = bytearray(b"\x01\x02" + encoded + b"\xff")
    assert read_varlong(buf, 2, len(buf)) == (value, 2 + len(encoded))
    assert read_varlong(memoryview(buf), 2, 2 + len(encoded)) == (value, 2 + len(encoded))


@given(st.integers(min_value=0, max_value=2**35 - 1))
def test_uvarint_round_trip(value: int) -> None:
    encoded = encode_uvarint(value)
    assert len(encoded) <= 5
    assert read_uvarint(encoded, 0, len(encoded)) == (value, len(encoded))


@given(st.integers(min_value=INT64_MIN, max_value=INT64_MAX))
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert len(encoded) <= 10
    assert read_varlong(encoded, 0, len(encoded)) == (value, len(encoded))


@given(st.lists(st.integers(min_value=INT64_MIN, max_value=INT64_MAX), max_size=20))
def test_a_run_of_varlongs_reads_back_in_order(values: list[int]) -> None:
    buf = b"".join(encode_varlong(v) for v in values)
    pos, out = 0, []
    while pos < len(buf):
        value, pos = read_varlong(buf, pos, len(buf))
        out.append(value)
    assert out == values


@pytest.mark.parametrize("read", [read_uvarint, read_varlong])
@pytest.mark.parametrize("buf", [b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80"])
def test_truncated_input_raises(read: Reader, buf: bytes) -> None:
    with pytest.raises(VarintError, match="truncated"):
        read(buf, 0, len(buf))


@pytest.mark.parametrize("read", [read_uvarint, read_varlong])
def test_the_end_bound_is_respected_even_with_bytes_beyond_it(read: Reader) -> None:
    buf = b"\xac\x02"  # 300 (or 150), but the region ends after the first byte
    with pytest.raises(VarintError, match="truncated"):
        read(buf, 0, 1)
    with pytest.raises(VarintError, match="truncated"):
        read(buf, 2, 2)  # at the end of the region: nothing to read


def test_an_unsigned_varint_longer_than_5_bytes_raises() -> None:
    buf = b"\x80" * 5 + b"\x01"
    with pytest.raises(VarintError, match="longer than 5 bytes"):
        read_uvarint(buf, 0, len(buf))


def test_a_varlong_longer_than_10_bytes_raises() -> None:
    buf = b"\x80" * 10 + b"\x01"
    with pytest.raises(VarintError, match="longer than 10 bytes"):
        read_varlong(buf, 0, len(buf))


def test_varint_error_is_a_value_error() -> None:
    """Codecs that already treat a ValueError as corrupt input (decompression) keep doing so."""
    assert issubclass(VarintError, ValueError)
