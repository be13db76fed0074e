"""The hand-written FetchRequest (v4-v12) reader agrees with kio's decoding for every version,
and refuses truncations and lies about lengths with MalformedRequestError only."""

from __future__ import annotations

import random
import struct
from datetime import timedelta
from typing import Any

import pytest

from odradek.protocol.fetch_request import FetchPartitionView, FetchRequestView, parse_fetch_request
from odradek.protocol.framing import (
    MalformedRequestError,
    decode_request,
    decode_request_header,
    encode_request,
)
from odradek.protocol.messages import build, request_module

VERSIONS = range(4, 13)
_ALPHABET = "abcXYZ019._-éß日本語🦆"
_MS = timedelta(milliseconds=1)


def _text(rng: random.Random, max_size: int) -> str:
    return "".join(rng.choices(_ALPHABET, k=rng.randint(0, max_size)))


def _i32(rng: random.Random) -> int:
    return rng.choice([-1, 0, rng.randint(0, 1000), rng.randint(-(2**31), 2**31 - 1), 2**31 - 1, -(2**31)])


def _i64(rng: random.Random) -> int:
    return rng.choice([-1, 0, rng.randint(0, 2**40), rng.randint(-(2**63), 2**63 - 1), 2**63 - 1])


def _payload(version: int, rng: random.Random) -> Any:
    m = request_module(1, version)
    shape = rng.random()
    if shape < 0.05:  # counts that take two varint bytes
        n_topics, n_partitions = 1, 130
    elif shape < 0.1:
        n_topics, n_partitions = 135, 1
    else:
        n_topics, n_partitions = rng.randint(0, 4), -1
    topics = tuple(
        build(m.FetchTopic, topic=_text(rng, rng.choice([3, 20, 140])), partitions=tuple(
            build(m.FetchPartition, partition=_i32(rng), current_leader_epoch=_i32(rng), fetch_offset=_i64(rng),
                  last_fetched_epoch=_i32(rng), log_start_offset=_i64(rng), partition_max_bytes=_i32(rng))
            for _ in range(n_partitions if n_partitions >= 0 else rng.randint(0, 5))))
        for _ in range(n_topics))
    forgotten = tuple(
        build(m.ForgottenTopic, topic=_text(rng, 10), partitions=tuple(_i32(rng) for _ in range(rng.choice([0, 1, 4]))))
        for _ in range(rng.choice([0, 0, 1, 3]))) if hasattr(m, "ForgottenTopic") else ()
    return build(
        m.FetchRequest, replica_id=rng.choice([-1, 0, 2, _i32(rng)]), max_wait=rng.choice([0, 500, _i32(rng)]),
        min_bytes=_i32(rng), max_bytes=_i32(rng), isolation_level=rng.choice([0, 1, rng.randint(-128, 127)]),
        session_id=_i32(rng), session_epoch=_i32(rng), topics=topics, forgotten_topics_data=forgotten,
        rack_id=rng.choice(["", "rack-1", _text(rng, 8)]),
        cluster_id=rng.choice([None, "", "Ab3_cluster-id-xyz"]))


def _frame(payload: Any, correlation_id: int = 11) -> tuple[bytes, int]:
    frame = encode_request(payload, correlation_id, "client")[4:]
    return frame, decode_request_header(frame)[1]


def _as_view(payload: Any) -> FetchRequestView:
    """What parse_fetch_request should give, from the payload kio decoded."""
    return FetchRequestView(
        replica_id=payload.replica_id, max_wait_ms=payload.max_wait // _MS, min_bytes=payload.min_bytes,
        max_bytes=payload.max_bytes, isolation_level=payload.isolation_level,
        session_id=getattr(payload, "session_id", 0), session_epoch=getattr(payload, "session_epoch", -1),
        partitions=[FetchPartitionView(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes,
                                       getattr(p, "current_leader_epoch", -1), getattr(p, "log_start_offset", -1),
                                       getattr(p, "last_fetched_epoch", -1))
                    for t in payload.topics for p in t.partitions],
        forgotten_topics=[(f.topic, list(f.partitions)) for f in getattr(payload, "forgotten_topics_data", ())],
        rack_id=getattr(payload, "rack_id", ""), cluster_id=getattr(payload, "cluster_id", None))


@pytest.mark.parametrize("version", VERSIONS)
def test_agrees_with_kio(version: int) -> None:
    rng = random.Random(3000 + version)
    for _ in range(200):
        payload = _payload(version, rng)
        frame, offset = _frame(payload)
        _, decoded = decode_request(frame)
        assert decoded == payload
        assert parse_fetch_request(frame, offset, version) == _as_view(decoded)


@pytest.mark.parametrize("version", VERSIONS)
def test_values_per_version(version: int) -> None:
    m = request_module(1, version)
    payload = build(
        m.FetchRequest, replica_id=2, max_wait=1001, min_bytes=1, max_bytes=52428800, isolation_level=1,
        session_id=0, session_epoch=-1, rack_id="r1", cluster_id="cid", topics=(
            build(m.FetchTopic, topic="tø", partitions=(
                build(m.FetchPartition, partition=3, current_leader_epoch=7, fetch_offset=100, last_fetched_epoch=6,
                      log_start_offset=5, partition_max_bytes=1048576),)),),
        forgotten_topics_data=(build(m.ForgottenTopic, topic="old", partitions=(1, 2)),)
        if hasattr(m, "ForgottenTopic") else ())
    frame, offset = _frame(payload)
    view = parse_fetch_request(frame, offset, version)
    assert (view.replica_id, view.max_wait_ms, view.min_bytes, view.max_bytes, view.isolation_level) == (
        2, 1001, 1, 52428800, 1)
    assert view.partitions == [FetchPartitionView(
        "tø", 3, 100, 1048576, 7 if version >= 9 else -1, 5 if version >= 5 else -1, 6 if version >= 12 else -1)]
    assert view.forgotten_topics == ([("old", [1, 2])] if version >= 7 else [])
    assert view.rack_id == ("r1" if version >= 11 else "")
    assert view.cluster_id == ("cid" if version >= 12 else None)


@pytest.mark.parametrize("version", VERSIONS)
def test_frame_types_and_trailing_bytes(version: int) -> None:
    payload = _payload(version, random.Random(version))
    frame, offset = _frame(payload)
    expected = parse_fetch_request(frame, offset, version)
    assert parse_fetch_request(bytearray(frame), offset, version) == expected
    assert parse_fetch_request(memoryview(frame), offset, version) == expected
    assert parse_fetch_request(frame + b"\x00\xff" * 5, offset, version) == expected


def _cuts(start: int, end: int, window: int = 400) -> list[int]:
    """Where to cut a frame's body: everywhere, but in a long one (an array of 130 topics
    or partitions) only within ``window`` bytes of either end and at every 31st byte between,
    since the middle repeats the layout of elements already cut at every byte near the start."""
    if end - start <= 2 * window:
        return list(range(start, end))
    return [*range(start, start + window), *range(start + window, end - window, 31), *range(end - window, end)]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_is_malformed(version: int) -> None:
    m = request_module(1, version)
    payload = build(
        m.FetchRequest, replica_id=-1, max_wait=500, min_bytes=1, max_bytes=1000, isolation_level=0,
        session_id=0, session_epoch=-1, rack_id="rack", cluster_id="cluster", topics=(
            build(m.FetchTopic, topic="topic", partitions=tuple(
                build(m.FetchPartition, partition=i, fetch_offset=10, partition_max_bytes=100) for i in range(2))),
            build(m.FetchTopic, topic="t2", partitions=()),),
        forgotten_topics_data=(build(m.ForgottenTopic, topic="gone", partitions=(4,)),)
        if hasattr(m, "ForgottenTopic") else ())
    frames = [_frame(payload)]
    rng = random.Random(4000 + version)
    frames += [_frame(_payload(version, rng)) for _ in range(5)]
    for frame, offset in frames:
        parse_fetch_request(frame, offset, version)
        for end in _cuts(offset, len(frame)):
            with pytest.raises(MalformedRequestError):
                parse_fetch_request(frame[:end], offset, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_mutations_parse_or_are_malformed(version: int) -> None:
    rng = random.Random(5000 + version)
    for _ in range(150):
        frame, offset = _frame(_payload(version, rng))
        if len(frame) == offset:
            continue
        mutated = bytearray(frame)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(offset, len(frame))] = rng.choice([0x00, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        try:
            parse_fetch_request(bytes(mutated), offset, version)
        except MalformedRequestError:
            pass


# --- hand-made lies --------------------------------------------------------------------

_HEAD_V4 = struct.pack(">iiiib", -1, 500, 1, 1000, 0)
_HEAD_V7 = _HEAD_V4 + struct.pack(">ii", 0, -1)
_I16 = struct.Struct(">h").pack
_I32 = struct.Struct(">i").pack
_PARTITION_V4 = struct.pack(">iqi", 0, 0, 100)


def _header(version: int) -> bytes:
    frame, offset = _frame(build(request_module(1, version).FetchRequest, max_wait=0, min_bytes=0, topics=(),
                                 forgotten_topics_data=()))
    return frame[:offset]


@pytest.mark.parametrize("body", [
    _HEAD_V4 + _I32(-1),  # null topics
    _HEAD_V4 + _I32(-2),
    _HEAD_V4 + _I32(2**31 - 1),
    _HEAD_V4 + _I32(1) + _I16(-1),  # null topic name
    _HEAD_V4 + _I32(1) + _I16(-2) + b"abc",
    _HEAD_V4 + _I32(1) + _I16(32767) + b"abc",
    _HEAD_V4 + _I32(1) + _I16(2) + b"\xff\xfe" + _I32(0),  # not UTF-8
    _HEAD_V4 + _I32(1) + _I16(1) + b"t" + _I32(-1),
    _HEAD_V4 + _I32(1) + _I16(1) + b"t" + _I32(2) + _PARTITION_V4,  # one partition short
    _HEAD_V4 + _I32(1) + _I16(1) + b"t" + _I32(2**31 - 1) + _PARTITION_V4,
    _HEAD_V4[:-1],
])
def test_legacy_lies_v4(body: bytes) -> None:
    header = _header(4)
    with pytest.raises(MalformedRequestError):
        parse_fetch_request(header + body, len(header), 4)


@pytest.mark.parametrize("body", [
    _HEAD_V7 + _I32(0) + _I32(-1),  # null forgotten topics
    _HEAD_V7 + _I32(0) + _I32(1) + _I16(1) + b"t" + _I32(-1),
    _HEAD_V7 + _I32(0) + _I32(1) + _I16(1) + b"t" + _I32(3) + _I32(0) + _I32(1),  # one partition short
    _HEAD_V7 + _I32(0) + _I32(1) + _I16(1) + b"t" + _I32(2**30) + _I32(0),
    _HEAD_V7 + _I32(0) + _I32(0) + _I16(-1),  # null rack id
    _HEAD_V7 + _I32(0) + _I32(0) + _I16(5) + b"r",
])
def test_legacy_lies_v11(body: bytes) -> None:
    header = _header(11)
    with pytest.raises(MalformedRequestError):
        parse_fetch_request(header + body, len(header), 11)


@pytest.mark.parametrize("body", [
    _HEAD_V7 + b"\x00",  # null topics
    _HEAD_V7 + b"\xff\xff\xff\xff\x0f",  # count 2**32 - 2
    _HEAD_V7 + b"\xff\xff\xff\xff\xff\x01",  # varint longer than 5 bytes
    _HEAD_V7 + b"\x80",  # truncated varint
    _HEAD_V7 + b"\x02\x00",  # null topic name
    _HEAD_V7 + b"\x02\xff\xff\x03t",  # topic length way past the end
    _HEAD_V7 + b"\x02\x02t\x00",  # null partitions
    _HEAD_V7 + b"\x02\x02t\x90\x01" + bytes(40),  # 143 partitions in 40 bytes
    _HEAD_V7 + b"\x02\x02t\x02" + bytes(32) + b"\x01\x00\x05ab",  # partition tagged field too long
    _HEAD_V7 + b"\x02\x02t\x02" + bytes(32) + b"\x00\x01\x00\xff\xff\xff\xff\x0f",  # topic tagged field too long
    _HEAD_V7 + b"\x01\x02\x02g\x00",  # null forgotten partitions
    _HEAD_V7 + b"\x01\x02\x02g\x05" + bytes(8),  # 4 forgotten partitions in 8 bytes
    _HEAD_V7 + b"\x01\x01\x00",  # null rack id
    _HEAD_V7 + b"\x01\x01\x01\x01\x00\x03\x01\x00\x00",  # a 1-byte cluster id in a 3-byte tagged field
    _HEAD_V7 + b"\x01\x01\x01\x01\x00\x02\x03a",  # cluster id longer than its tagged field
    _HEAD_V7 + b"\x01\x01\x01\x01\x00\x00",  # empty tagged field where a cluster id must be
])
def test_compact_lies_v12(body: bytes) -> None:
    header = _header(12)
    with pytest.raises(MalformedRequestError):
        parse_fetch_request(header + body, len(header), 12)


def test_unknown_tagged_fields_are_skipped() -> None:
    header = _header(12)
    partition = struct.pack(">iiqiqi", 1, 2, 3, 4, 5, 6)
    body = (_HEAD_V7 + b"\x02\x02t\x02" + partition + b"\x01\x07\x02zz"  # partition: tag 7, 2 bytes
            + b"\x02\x09\x00\x0a\x01q"  # topic: tags 9 (empty) and 10
            + b"\x02\x02g\x02" + _I32(8) + b"\x01\x03\x00"  # forgotten topic: tag 3
            + b"\x03r1"  # rack id
            + b"\x02\x05\x01x\x00\x03\x03id")  # request: tag 5, then the cluster id
    view = parse_fetch_request(header + body, len(header), 12)
    assert view.partitions == [FetchPartitionView("t", 1, 3, 6, 2, 5, 4)]
    assert view.forgotten_topics == [("g", [8])]
    assert (view.rack_id, view.cluster_id) == ("r1", "id")


@pytest.mark.parametrize("version", [3, 13])
def test_unsupported_versions(version: int) -> None:
    with pytest.raises(MalformedRequestError, match="not supported"):
        parse_fetch_request(b"", 0, version)
