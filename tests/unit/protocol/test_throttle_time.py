"""The throttle time written into encoded responses (protocol/throttle_time.py), checked by
decoding the patched frames with kio."""

from __future__ import annotations

import datetime

from kio.schema.heartbeat.v4 import response as heartbeat_v4
from kio.schema.metadata.v1 import response as metadata_v1
from kio.schema.offset_commit.v3 import response as offset_commit_v3

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch_response import encode_fetch_response
from odradek.protocol.framing import decode_response, encode_response
from odradek.protocol.produce_response import ProducedPartition, encode_produce_response
from odradek.protocol.throttle_time import throttle_time_position, with_throttle_time


def test_the_first_field_of_a_classic_and_a_flexible_body() -> None:
    classic = encode_response(offset_commit_v3.OffsetCommitResponse(
        throttle_time=datetime.timedelta(0), topics=()), 5)
    patched = with_throttle_time(classic, ApiKey.OFFSET_COMMIT, 3, 250)
    assert decode_response(patched[4:], offset_commit_v3.OffsetCommitResponse)[1].throttle_time.total_seconds() == 0.25
    flexible = encode_response(heartbeat_v4.HeartbeatResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none), 6)
    patched = with_throttle_time(flexible, ApiKey.HEARTBEAT, 4, 1234)
    correlation_id, response = decode_response(patched[4:], heartbeat_v4.HeartbeatResponse)
    assert (correlation_id, response.throttle_time.total_seconds(), response.error_code) == (6, 1.234, ErrorCode.none)


def test_a_longer_throttle_already_there_stays() -> None:
    frame = encode_response(heartbeat_v4.HeartbeatResponse(
        throttle_time=datetime.timedelta(milliseconds=900), error_code=ErrorCode.none), 1)
    assert with_throttle_time(frame, ApiKey.HEARTBEAT, 4, 100) == frame


def test_produce_carries_it_last() -> None:
    partitions = [("t", [ProducedPartition(0, ErrorCode.none, 42)])]
    for version in (3, 8, 9):
        frame = encode_produce_response(7, version, partitions)
        assert with_throttle_time(frame, ApiKey.PRODUCE, version, 77) == \
            encode_produce_response(7, version, partitions, throttle_time_ms=77)


def test_fetch_chunks_get_it_in_the_chunk_that_holds_it() -> None:
    for version in (4, 11, 12):
        chunks = encode_fetch_response(9, version, ErrorCode.none, 0, [])
        patched = with_throttle_time(chunks, ApiKey.FETCH, version, 300)
        assert patched == encode_fetch_response(9, version, ErrorCode.none, 0, [], throttle_time_ms=300)


def test_responses_without_the_field_up_front_are_left_alone() -> None:
    assert throttle_time_position(ApiKey.API_VERSIONS, 3) is None
    assert throttle_time_position(ApiKey.METADATA, 1) is None
    assert throttle_time_position(ApiKey.LEADER_AND_ISR, 5) is None
    frame = encode_response(metadata_v1.MetadataResponse(brokers=(), controller_id=0, topics=()), 3)
    assert with_throttle_time(frame, ApiKey.METADATA, 1, 500) is frame
    assert with_throttle_time(None, ApiKey.PRODUCE, 9, 500) is None
