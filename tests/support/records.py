"""Records for the client compatibility tests, and the checks on what came back.

Every client test follows one pattern: build ``n`` keyed records with headers and explicit
timestamps (:func:`make_records`), produce them with the client under test, collect what the
client's delivery reports acknowledge (partition, offset), read everything back with that
client's consumer from explicit offsets, and compare with :func:`assert_read_back`.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Headers", "Rec", "assert_acknowledged", "assert_read_back", "make_records"]

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class Rec:
    """A record as a client produced it (before ``offset`` is known) or read it back."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int


def make_records(n: int, *, seed: int, with_null_header_values: bool = True,
                 text_only: bool = False) -> list[Rec]:
    """``n`` keyed records (keys repeat, so one key's records share a partition) with
    headers and explicit, not always increasing, timestamps; values mix short text, binary,
    empty, a tombstone (None) and compressible values of a few KiB.  ``partition`` and
    ``offset`` are -1: the producer decides the one and the broker the other.

    ``text_only`` keeps keys, values and headers printable, without tabs, commas, '=' or
    newlines (for kcat's line-oriented input and output)."""
    rnd = random.Random(seed)
    base_ts = int(time.time() * 1000) - 3_600_000  # an hour ago: well inside retention
    records = []
    for i in range(n):
        key = f"key-{i % 23:02d}".encode()
        kind = i % 7
        if text_only:
            value: bytes | None = (f"value {i} " + "lorem ipsum " * (i % 5 * 40)).encode()
        elif kind == 0:
            value = rnd.randbytes(rnd.randrange(1, 300))
        elif kind == 1:
            value = b""
        elif kind == 2:
            value = f"compressible {i} ".encode() * rnd.randrange(50, 400)
        elif kind == 3 and i % 21 == 3:
            value = None  # a tombstone
        else:
            value = f"value-{i}-{rnd.random()}".encode()
        headers: list[tuple[str, bytes | None]] = [("seq", str(i).encode())]
        if not text_only:
            headers += [("dup", b"first"), ("dup", b"second"), ("bin", rnd.randbytes(8))]
            if i % 3 == 0:
                headers.append(("empty", b""))
            if with_null_header_values and i % 5 == 0:
                headers.append(("null", None))
        else:
            headers.append(("src", f"kcat{i % 3}".encode()))
        timestamp = base_ts + i * 10 + (5 if i % 4 == 0 else 0) - (3 if i % 6 == 0 else 0)
        records.append(Rec(-1, -1, key, value, tuple(headers), timestamp))
    return records


def _by_partition(records: Iterable[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = defaultdict(list)
    for r in records:
        out[r.partition].append(r)
    return dict(out)


def assert_acknowledged(sent: Sequence[Rec], acked: Sequence[Rec], partitions: int) -> None:
    """``acked[i]`` is the delivery report for ``sent[i]``: same content, a real partition
    and offset; one key always maps to one partition; within a partition, offsets rise in
    send order without gaps (a fresh topic: starting at 0)."""
    assert len(acked) == len(sent)
    key_partition: dict[bytes | None, int] = {}
    for s, a in zip(sent, acked, strict=True):
        assert 0 <= a.partition < partitions and a.offset >= 0, a
        assert (a.key, a.value, a.headers, a.timestamp) == (s.key, s.value, s.headers, s.timestamp)
        assert key_partition.setdefault(a.key, a.partition) == a.partition, f"key {a.key!r} in two partitions"
    for partition, recs in _by_partition(acked).items():
        offsets = [r.offset for r in recs]
        assert offsets == list(range(len(recs))), f"partition {partition}: acknowledged offsets {offsets}"


def assert_read_back(acked: Sequence[Rec], consumed: Sequence[Rec]) -> None:
    """What was read is exactly what was acknowledged: per partition, the same records in
    the same order at the same offsets, keys, values, headers and timestamps equal."""
    want = _by_partition(acked)
    got = _by_partition(consumed)
    assert sorted(got) == sorted(want), f"partitions read {sorted(got)}, produced to {sorted(want)}"
    for partition in want:
        w, g = want[partition], got[partition]
        assert [r.offset for r in g] == [r.offset for r in w], f"partition {partition}: offsets differ"
        for a, b in zip(w, g, strict=True):
            assert a == b, f"partition {partition} offset {a.offset}: produced {a}, read {b}"
