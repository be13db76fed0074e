"""Produce v0-v2 on a FakeBroker: magic 0/1 message sets are stored as v2 batches (Kafka's
up-conversion), read back by a current consumer; a corrupt set fails its partition alone."""

from __future__ import annotations

import datetime
import struct
import zlib

from fake_broker import FakeBroker, FakeConnection, WithBroker
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.fetch.v12 import response as fetch_resp
from kio.static.primitive import i32

from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.framing import UnsupportedRequestError, decode_request
from odradek.protocol.records import NO_TIMESTAMP, Record, decode_batch, iter_batches


def message(value: bytes, *, magic: int, timestamp: int = 0) -> bytes:
    body = struct.pack(">bb", magic, 0) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value  # null key
    body = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(body)) + body


def produce_frame(version: int, sets: dict[int, bytes]) -> bytes:
    """A Produce request of ``version`` (0-2) to partitions of topic t, acks=1."""
    frame = struct.pack(">hhi", 0, version, 7) + struct.pack(">h", 1) + b"c"
    frame += struct.pack(">hi", 1, 1000) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
    frame += struct.pack(">i", len(sets))
    for partition, records in sets.items():
        frame += struct.pack(">ii", partition, len(records)) + records
    return frame


def read_response(frame: bytes, version: int) -> dict[int, tuple[int, int]]:
    """(error, base offset) per partition of a Produce v0-v2 response (size prefix included)."""
    pos = 4 + 4 + 4 + 2 + 1  # size, correlation id, topic count, "t"
    (count,) = struct.unpack_from(">i", frame, pos)
    pos += 4
    out = {}
    for _ in range(count):
        partition, error, base = struct.unpack_from(">ihq", frame, pos)
        pos += 14 + (8 if version >= 2 else 0)
        out[partition] = (error, base)
    assert len(frame) == pos + (4 if version >= 1 else 0)
    return out


async def fetch_all(b: FakeBroker, partition: int) -> bytes:
    request = fetch_req.FetchRequest(
        replica_id=i32(-1), max_wait=datetime.timedelta(0), min_bytes=i32(1), session_id=i32(0),
        session_epoch=i32(-1), forgotten_topics_data=(), rack_id="",
        topics=(fetch_req.FetchTopic(topic="t", partitions=(fetch_req.FetchPartition(
            partition=i32(partition), current_leader_epoch=i32(-1), fetch_offset=0,
            partition_max_bytes=i32(1 << 20)),)),))
    response = await b.call(request, fetch_resp.FetchResponse)
    return response.responses[0].partitions[0].records or b""


def records(data: bytes) -> list[Record]:
    return [r for pos, h in iter_batches(data) for r in decode_batch(data[pos:pos + h.size])[1]]


def test_legacy_message_sets_are_stored_as_v2_batches(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0, 1, 2])
        for version in (0, 1, 2):
            sets = {0: message(b"zero", magic=0), 1: message(b"one", magic=1, timestamp=1234),
                    2: message(b"bad", magic=1)[:-1] + b"!"}
            answer = b.send_frame(produce_frame(version, sets), FakeConnection())
            assert isinstance(answer, bytes)
            assert read_response(answer, version) == {
                0: (E.none, version), 1: (E.none, version), 2: (E.corrupt_message, -1)}
        zero = records(await fetch_all(b, 0))
        assert [(r.offset, r.value, r.timestamp) for r in zero] == [(i, b"zero", NO_TIMESTAMP) for i in range(3)]
        one = records(await fetch_all(b, 1))
        assert [(r.offset, r.value, r.timestamp) for r in one] == [(i, b"one", 1234) for i in range(3)]
        assert await fetch_all(b, 2) == b""
    with_broker(body)


def test_the_generic_decoder_still_refuses_what_only_the_hand_reader_reads() -> None:
    try:
        decode_request(produce_frame(2, {0: message(b"x", magic=1)}))
    except UnsupportedRequestError as e:
        assert (e.api_key, e.api_version) == (0, 2)
    else:
        raise AssertionError("decode_request read a Produce v2 body")
