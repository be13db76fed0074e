"""The follower's hand-written Fetch v12 against kio: the request frame is byte for byte what
kio encodes for the request the fetcher used to build, and the response reader gives what
kio decodes, over seeded random inputs; truncated or forged responses are malformed."""

from __future__ import annotations

import datetime
import random
import struct
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.fetch.v12 import response as fetch_resp

from odradek.protocol.framing import (
    MalformedResponseError,
    decode_response,
    encode_request,
    encode_response,
)
from odradek.protocol.replica_fetch import (
    FetchPartitionSpec,
    encode_follower_fetch,
    parse_follower_fetch_response,
)

CASES = 300
I32 = (-(2**31), 2**31 - 1)
I64 = (-(2**63), 2**63 - 1)
ERROR_CODES = [e.value for e in ErrorCode]


def _name(rng: random.Random) -> str:
    alphabet = "abc.-_XYZ019" if rng.random() < 0.8 else "abcé€😀"
    return "".join(rng.choices(alphabet, k=rng.choice([1, 3, 12, 130, 300])))


def _i32(rng: random.Random) -> int:
    return rng.choice([-1, 0, 1, rng.randint(*I32), I32[0], I32[1]])


def _i64(rng: random.Random) -> int:
    return rng.choice([-1, 0, 1, rng.randint(*I64), I64[0], I64[1]])


def _kio_request(replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                 partitions: list[FetchPartitionSpec], session_id: int = 0, session_epoch: int = -1,
                 forgotten: list[tuple[str, int]] | None = None) -> fetch_req.FetchRequest:
    """The request as broker/fetcher.py built it with kio before the hand-written encoder
    (with the fetch session's id, epoch and forgotten partitions, grouped by topic)."""
    by_topic: dict[str, list[fetch_req.FetchPartition]] = {}
    for topic, partition, leader_epoch, offset, last_epoch, log_start, partition_max in partitions:
        by_topic.setdefault(topic, []).append(fetch_req.FetchPartition(
            partition=partition, current_leader_epoch=leader_epoch, fetch_offset=offset,
            last_fetched_epoch=last_epoch, log_start_offset=log_start, partition_max_bytes=partition_max))
    forgotten_by_topic: dict[str, list[int]] = {}
    for topic, partition in forgotten or ():
        forgotten_by_topic.setdefault(topic, []).append(partition)
    return fetch_req.FetchRequest(
        replica_id=replica_id, max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0, session_id=session_id,
        session_epoch=session_epoch,
        topics=tuple(fetch_req.FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        forgotten_topics_data=tuple(fetch_req.ForgottenTopic(topic=t, partitions=tuple(ps))
                                    for t, ps in forgotten_by_topic.items()),
        rack_id="")


@pytest.mark.parametrize("seed", range(4))
def test_request_frame_is_kios(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(CASES):
        topics = [_name(rng) for _ in range(rng.randint(1, 4))]
        partitions: list[FetchPartitionSpec] = [
            (rng.choice(topics), rng.randint(0, I32[1]), _i32(rng), _i64(rng), _i32(rng), _i64(rng), _i32(rng))
            for _ in range(rng.choice([0, 1, 2, 5, 40]))]
        correlation_id = rng.randint(0, I32[1])
        client_id = rng.choice([None, "", "replica-fetcher-1", _name(rng)])
        # max wait is a timedelta in kio: whole milliseconds, not negative
        args = (rng.randint(0, I32[1]), rng.randint(0, I32[1]), _i32(rng), _i32(rng))
        expected = encode_request(_kio_request(*args, partitions), correlation_id, client_id)
        assert encode_follower_fetch(correlation_id, client_id, *args, partitions) == expected
        # With a fetch session: its id and epoch, and partitions to forget.
        session = (rng.randint(0, I32[1]), rng.choice([-1, 0, 1, rng.randint(1, I32[1]), I32[1]]))
        forgotten = [(rng.choice([*topics, _name(rng)]), rng.randint(0, I32[1]))
                     for _ in range(rng.choice([0, 1, 2, 7, 40]))]
        expected = encode_request(_kio_request(*args, partitions, *session, forgotten), correlation_id, client_id)
        assert encode_follower_fetch(correlation_id, client_id, *args, partitions, *session, forgotten) == expected


def _kio_partition(rng: random.Random) -> fetch_resp.PartitionData:
    tagged = {}
    if rng.random() < 0.3:
        tagged["diverging_epoch"] = fetch_resp.EpochEndOffset(epoch=_i32(rng), end_offset=_i64(rng))
    if rng.random() < 0.3:
        tagged["current_leader"] = fetch_resp.LeaderIdAndEpoch(leader_id=_i32(rng), leader_epoch=_i32(rng))
    if rng.random() < 0.3:
        tagged["snapshot_id"] = fetch_resp.SnapshotId(end_offset=_i64(rng), epoch=_i32(rng))
    aborted = None if rng.random() < 0.5 else tuple(
        fetch_resp.AbortedTransaction(producer_id=_i64(rng), first_offset=_i64(rng))
        for _ in range(rng.randint(0, 3)))
    records = rng.choice([None, b"", rng.randbytes(rng.choice([1, 61, 200, 5000]))])
    return fetch_resp.PartitionData(
        partition_index=_i32(rng), error_code=ErrorCode(rng.choice(ERROR_CODES)), high_watermark=_i64(rng),
        last_stable_offset=_i64(rng), log_start_offset=_i64(rng), aborted_transactions=aborted,
        preferred_read_replica=_i32(rng), records=records, **tagged)


def _kio_response(rng: random.Random) -> fetch_resp.FetchResponse:
    return fetch_resp.FetchResponse(
        throttle_time=datetime.timedelta(milliseconds=rng.randint(0, I32[1])),
        error_code=ErrorCode(rng.choice(ERROR_CODES)), session_id=_i32(rng),
        responses=tuple(fetch_resp.FetchableTopicResponse(
            topic=_name(rng), partitions=tuple(_kio_partition(rng) for _ in range(rng.choice([0, 1, 3]))))
            for _ in range(rng.choice([0, 1, 2, 4]))))


def _frame(response: fetch_resp.FetchResponse, correlation_id: int = 7) -> bytes:
    return encode_response(response, correlation_id)[4:]  # as the connection reads it


@pytest.mark.parametrize("seed", range(4))
def test_response_reader_agrees_with_kio(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(CASES):
        frame = _frame(_kio_response(rng), rng.randint(0, I32[1]))
        _, decoded = decode_response(frame, fetch_resp.FetchResponse)
        throttle_ms, error_code, session_id, partitions = parse_follower_fetch_response(frame)
        assert (throttle_ms, error_code, session_id) == (
            decoded.throttle_time // datetime.timedelta(milliseconds=1), decoded.error_code, decoded.session_id)
        expected = [(t.topic, p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                     p.log_start_offset, p.records) for t in decoded.responses for p in t.partitions]
        assert [(p.topic, p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                 p.log_start_offset, None if p.records is None else bytes(p.records)) for p in partitions] == expected


def test_records_are_views_into_the_frame() -> None:
    frame = _frame(fetch_resp.FetchResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, session_id=0,
        responses=(fetch_resp.FetchableTopicResponse(topic="t", partitions=(fetch_resp.PartitionData(
            partition_index=0, error_code=ErrorCode.none, high_watermark=5, aborted_transactions=None,
            records=b"abcdef"),)),)))
    records = parse_follower_fetch_response(frame)[3][0].records
    assert isinstance(records, memoryview) and records.obj is frame and bytes(records) == b"abcdef"


@pytest.mark.parametrize("seed", range(3))
def test_every_truncation_is_malformed(seed: int) -> None:
    rng = random.Random(100 + seed)
    response = _kio_response(rng)
    while not any(t.partitions for t in response.responses):
        response = _kio_response(rng)
    frame = _frame(response)
    for cut in range(len(frame)):
        with pytest.raises(MalformedResponseError):
            parse_follower_fetch_response(frame[:cut])


def _one_partition_frame(records: bytes) -> bytes:
    return _frame(fetch_resp.FetchResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, session_id=0,
        responses=(fetch_resp.FetchableTopicResponse(topic="t", partitions=(fetch_resp.PartitionData(
            partition_index=0, error_code=ErrorCode.none, high_watermark=5,
            aborted_transactions=(fetch_resp.AbortedTransaction(producer_id=1, first_offset=2),),
            records=records),)),)))


# Offsets in _one_partition_frame: correlation id (4), header tags (1), throttle, error,
# session (10), topic count (1), "t" (2), partition count (1), partition head (30).
_ABORTED_COUNT_AT = 4 + 1 + 10 + 1 + 2 + 1 + 30
_RECORDS_LENGTH_AT = _ABORTED_COUNT_AT + 1 + 17 + 4


@pytest.mark.parametrize(("at", "forged"), [
    (4 + 1 + 10, b"\xff\xff\xff\xff\x0f"),  # topic count 2**32 - 2
    (4 + 1 + 10, b"\x7f"),  # 126 topics
    (4 + 1 + 10 + 1, b"\x00"),  # null topic name
    (4 + 1 + 10 + 1 + 2, b"\x7f"),  # 126 partitions
    (_ABORTED_COUNT_AT, b"\x05"),  # four aborted transactions in the room of one
    (_RECORDS_LENGTH_AT, b"\x7f"),  # 126 bytes of records
    (_RECORDS_LENGTH_AT, b"\xff\xff\xff\xff\xff"),  # a varint of six bytes
    (4, b"\x01\x00\x7f"),  # a header tagged field longer than the frame
], ids=["huge-topic-count", "topic-count", "null-topic", "partition-count", "aborted-count", "records-length",
        "long-varint", "header-tag-size"])
def test_forged_counts_and_lengths_are_malformed(at: int, forged: bytes) -> None:
    frame = _one_partition_frame(b"0123456789")
    assert frame[_RECORDS_LENGTH_AT] == 11 and frame[_ABORTED_COUNT_AT] == 2
    bad = frame[:at] + forged + frame[at + 1:]
    with pytest.raises(MalformedResponseError):
        parse_follower_fetch_response(bad)


def test_invalid_utf8_topic_is_malformed() -> None:
    frame = bytearray(_one_partition_frame(b""))
    frame[4 + 1 + 10 + 1 + 1] = 0xFF  # the name's only byte
    with pytest.raises(MalformedResponseError, match="UTF-8"):
        parse_follower_fetch_response(bytes(frame))


def test_unknown_tagged_fields_are_skipped() -> None:
    """Kafka skips tags it does not know; so does the reader (kio's would refuse them)."""
    frame = _one_partition_frame(b"xyz")
    # The partition's tagged fields follow its records: one unknown tag 9 with 3 bytes.
    at = _RECORDS_LENGTH_AT + 1 + 3
    assert frame[at] == 0
    extended = frame[:at] + b"\x01\x09\x03abc" + frame[at + 1:]
    partitions = parse_follower_fetch_response(extended)[3]
    assert partitions[0].records is not None and bytes(partitions[0].records) == b"xyz"
    assert struct.unpack_from(">i", extended)[0] == 7


def test_a_diverging_epoch_is_seen() -> None:
    """The leader's DivergingEpoch (tag 0) marks the partition; other tags do not."""
    def partition(**tagged: Any) -> fetch_resp.PartitionData:
        return fetch_resp.PartitionData(
            partition_index=0, error_code=ErrorCode.none, high_watermark=5, last_stable_offset=5, log_start_offset=0,
            aborted_transactions=None, preferred_read_replica=-1, records=b"", **tagged)
    frame = _frame(fetch_resp.FetchResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, session_id=0,
        responses=(fetch_resp.FetchableTopicResponse(topic="t", partitions=(
            partition(diverging_epoch=fetch_resp.EpochEndOffset(epoch=3, end_offset=42)),
            partition(current_leader=fetch_resp.LeaderIdAndEpoch(leader_id=1, leader_epoch=4)))),)))
    assert [p.diverged for p in parse_follower_fetch_response(frame)[3]] == [True, False]
