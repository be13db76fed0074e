"""ListOffsets on a FakeBroker: the special timestamps each version defines, and Kafka 3's
refusal of the others."""

from __future__ import annotations

import pytest
from fake_broker import FakeBroker, WithBroker
from kio.schema.list_offsets.v6 import request as lo6_req
from kio.schema.list_offsets.v6 import response as lo6_resp
from kio.schema.list_offsets.v7 import request as lo7_req
from kio.schema.list_offsets.v7 import response as lo7_resp
from kio.static.primitive import i8, i32, i64

from odradek.protocol.errors import ErrorCode as E

VERSIONS = {6: (lo6_req, lo6_resp), 7: (lo7_req, lo7_resp)}


async def list_offset(b: FakeBroker, version: int, topic: str, timestamp: int) -> tuple[E, int]:
    req, resp = VERSIONS[version]
    answer = await b.call(req.ListOffsetsRequest(replica_id=i32(-1), isolation_level=i8(0), topics=(
        req.ListOffsetsTopic(name=topic, partitions=(
            req.ListOffsetsPartition(partition_index=i32(0), timestamp=i64(timestamp)),)),)), resp.ListOffsetsResponse)
    (p,) = answer.topics[0].partitions
    return p.error_code, p.offset


@pytest.mark.parametrize(("version", "timestamp", "expected"), [
    (7, -1, (E.none, 0)), (7, -2, (E.none, 0)), (7, -3, (E.none, -1)), (6, -3, (E.unsupported_version, -1)),
    (7, -4, (E.unsupported_version, -1)), (7, -100, (E.unsupported_version, -1))])
def test_negative_timestamps_the_version_does_not_define_are_unsupported(
        with_broker: WithBroker, version: int, timestamp: int, expected: tuple[E, int]) -> None:
    """Kafka 3.9 answers them UNSUPPORTED_VERSION, even for an unknown topic (the
    differential oracle's find); odradek searched the log for them."""
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        assert await list_offset(b, version, "t", timestamp) == expected
        if expected[0] == E.unsupported_version:
            assert await list_offset(b, version, "nope", timestamp) == expected

    with_broker(body)
