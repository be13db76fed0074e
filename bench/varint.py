"""Micro-benchmark: the shared varint codec (odradek.protocol.varint) against the copies it
replaced, side by side in one process, on realistic inputs.

* record batch: walk every record of a v2 batch (100 records with key, value and two
  headers) the way ``records.decode_batch`` does, reading each field's varlong;
* produce request: walk the compact lengths and counts of a Produce v9 request (4 topics
  of 8 partitions) the way the hand-written produce reader and the frame layer's structural
  walk do;
* compact lengths: encode the lengths and counts of a FetchResponse v12 / LeaderAndIsr v5.

The "old" readers are private copies of the fastest former copies: the frame layer's
unsigned varint reader (faster than the produce reader's and the offsets loader's) and the
record decoder's signed one (the only signed reader there was); the old writer is the
control-request writer's cached encoder. Prints ns per walk and the ratio old / new
(above 1 means the shared codec is faster).

    .venv/bin/python bench/varint.py [--rounds 7] [--seconds 0.05]
"""

from __future__ import annotations

import argparse
import statistics
import struct
import timeit
from collections.abc import Callable

from odradek.perf.harness import unwind_on_sigterm
from odradek.protocol.records import HEADER_SIZE, SimpleRecord, build_batch
from odradek.protocol.varint import encode_uvarint, read_uvarint, read_varlong

# --- the former copies, kept here only for the comparison --------------------------------


class _OldMalformed(Exception):
    pass


def _old_read_uvarint(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = 0
    for shift in range(0, 35, 7):
        if pos >= end:
            raise _OldMalformed("truncated")
        byte = view[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
    raise _OldMalformed("unsigned varint longer than 5 bytes")


def _old_read_uvarint64(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise _OldMalformed("truncated varint") from None
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise _OldMalformed("varint is too long")


def _old_read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    raw, pos = _old_read_uvarint64(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def _old_encode_groups(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_OLD_SMALL = [_old_encode_groups(i) for i in range(256)]


def _old_uvarint(n: int) -> bytes:
    return _OLD_SMALL[n] if n < 256 else _old_encode_groups(n)


# --- inputs ------------------------------------------------------------------------------


def record_payload() -> bytes:
    records = [SimpleRecord(b"v" * (100 + i), key=b"key-%d" % i, headers=(("h", b"x"), ("n", None)),
                            timestamp=1_700_000_000_000 + 5 * i) for i in range(100)]
    return build_batch(records, timestamp=1_700_000_000_000)[HEADER_SIZE:]


def _uv(n: int) -> bytes:
    return _old_encode_groups(n)


def produce_v9_body() -> bytes:
    """The body of a Produce v9 request: 4 topics x 8 partitions of 16 KiB batches."""
    out = bytearray(b"\x00")  # transactional id: null
    out += struct.pack(">hi", -1, 30_000) + _uv(4 + 1)
    for t in range(4):
        name = b"topic-%d" % t
        out += _uv(len(name) + 1) + name + _uv(8 + 1)
        for p in range(8):
            out += struct.pack(">i", p) + _uv(16_384 + 1) + bytes(16_384) + b"\x00"
        out += b"\x00"
    out += b"\x00"
    return bytes(out)


# --- walks, parameterised by the reader --------------------------------------------------


def walk_records_new(payload: bytes) -> int:
    end = len(payload)
    pos = 0
    total = 0
    while pos < end:
        length, pos = read_varlong(payload, pos, end)
        stop = pos + length
        pos += 1  # attributes
        ts, pos = read_varlong(payload, pos, end)
        delta, pos = read_varlong(payload, pos, end)
        for _ in range(2):  # key, value
            n, pos = read_varlong(payload, pos, end)
            pos += max(n, 0)
        count, pos = read_varlong(payload, pos, end)
        for _ in range(count):
            for _ in range(2):
                n, pos = read_varlong(payload, pos, end)
                pos += max(n, 0)
        assert pos == stop
        total += ts + delta
    return total


def walk_records_old(payload: bytes) -> int:
    end = len(payload)
    pos = 0
    total = 0
    while pos < end:
        length, pos = _old_read_varint(payload, pos)
        stop = pos + length
        pos += 1
        ts, pos = _old_read_varint(payload, pos)
        delta, pos = _old_read_varint(payload, pos)
        for _ in range(2):
            n, pos = _old_read_varint(payload, pos)
            pos += max(n, 0)
        count, pos = _old_read_varint(payload, pos)
        for _ in range(count):
            for _ in range(2):
                n, pos = _old_read_varint(payload, pos)
                pos += max(n, 0)
        assert pos == stop
        total += ts + delta
    return total


def _produce_walker(read: Callable[[memoryview, int, int], tuple[int, int]]) -> Callable[[memoryview], int]:
    def walk(view: memoryview) -> int:
        end = len(view)
        n, pos = read(view, 0, end)
        pos += max(n - 1, 0) + 6  # transactional id, acks, timeout
        topics, pos = read(view, pos, end)
        records = 0
        for _ in range(topics - 1):
            n, pos = read(view, pos, end)
            pos += n - 1
            partitions, pos = read(view, pos, end)
            for _ in range(partitions - 1):
                pos += 4
                n, pos = read(view, pos, end)
                pos += n - 1
                records += n - 1
                _, pos = read(view, pos, end)  # tagged fields: none
            _, pos = read(view, pos, end)
        _, pos = read(view, pos, end)
        assert pos == end
        return records

    return walk


walk_produce_new = _produce_walker(read_uvarint)
walk_produce_old = _produce_walker(_old_read_uvarint)


def lengths_new(values: list[int]) -> int:
    out = bytearray()
    for v in values:
        out += encode_uvarint(v)
    return len(out)


def lengths_old(values: list[int]) -> int:
    out = bytearray()
    for v in values:
        out += _old_uvarint(v)
    return len(out)


# --- driver ------------------------------------------------------------------------------


def best_ns(fn: Callable[[], object], number: int) -> float:
    """The best of three timings of ``number`` calls, in ns per call."""
    return min(timeit.repeat(fn, number=number, repeat=3)) / number * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.05, help="length of one timing")
    args = parser.parse_args()

    payload = record_payload()
    body = memoryview(produce_v9_body())
    # A FetchResponse v12 / LeaderAndIsr v5: counts, name lengths, ISR and replica arrays,
    # and a few record-set sizes (the only values above 255).
    lengths = [2, 11, 9] + [4, 4, 1] * 40 + [16_385, 1_048_577, 300]
    assert walk_records_new(payload) == walk_records_old(payload)
    assert walk_produce_new(body) == walk_produce_old(body)
    assert all(encode_uvarint(v) == _old_uvarint(v) for v in [*lengths, *range(70_000)])

    cases = [
        ("record batch (100 records, varlong)", lambda: walk_records_old(payload),
         lambda: walk_records_new(payload)),
        ("produce v9 request (uvarint)", lambda: walk_produce_old(body), lambda: walk_produce_new(body)),
        ("compact lengths (encode)", lambda: lengths_old(lengths), lambda: lengths_new(lengths)),
    ]
    print(f"{'input':<38} {'old ns':>10} {'new ns':>10} {'old/new':>8}")
    ratios = []
    for name, old, new in cases:
        # Interleave old and new, taking turns at going first, so that machine noise and
        # warm-up hit both alike.
        number = max(1, int(args.seconds * 1e9 / best_ns(old, 10)))
        pairs = []
        for r in range(args.rounds):
            if r % 2:
                new_ns = best_ns(new, number)
                pairs.append((best_ns(old, number), new_ns))
            else:
                pairs.append((best_ns(old, number), best_ns(new, number)))
        old_ns = min(p[0] for p in pairs)
        new_ns = min(p[1] for p in pairs)
        ratios.append(old_ns / new_ns)
        print(f"{name:<38} {old_ns:10.0f} {new_ns:10.0f} {old_ns / new_ns:8.2f}")
    print(f"geometric mean old/new: {statistics.geometric_mean(ratios):.2f}")


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
