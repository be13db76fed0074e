"""Frames and headers: golden bytes, header version selection, and hostile input."""

from __future__ import annotations

import datetime
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsRequestV0
from kio.schema.api_versions.v3.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.metadata.v8.request import MetadataRequest as MetadataRequestV8
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from odradek.protocol import control as c
from odradek.protocol import framing
from odradek.protocol.framing import (
    FrameBuffer,
    InvalidFrameSizeError,
    MalformedRequestError,
    MalformedResponseError,
    ProtocolError,
    RequestHeaderInfo,
    UnsupportedRequestError,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    request_header_version,
    response_header_version,
)

METADATA_V12 = MetadataRequest(
    topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False
)
LEADER_AND_ISR = c.LeaderAndIsrRequest(
    controller_id=1,
    controller_epoch=5,
    topic_states=(
        c.LeaderAndIsrTopicState(
            topic_name="foo",
            topic_id=None,
            partition_states=(
                c.LeaderAndIsrPartitionState(
                    partition_index=0,
                    controller_epoch=5,
                    leader=1,
                    leader_epoch=0,
                    isr=(1,),
                    zk_version=0,
                    replicas=(1,),
                ),
            ),
        ),
    ),
    live_leaders=(c.LeaderAndIsrLiveLeader(broker_id=1, host_name="h", port=9092),),
)
PRODUCE_V9 = ProduceRequest(
    transactional_id=None,
    acks=-1,
    timeout=datetime.timedelta(seconds=30),
    topic_data=(
        TopicProduceData(name="t", partition_data=(PartitionProduceData(index=0, records=b"x"),)),
    ),
)


def unframed(frame: bytes) -> bytes:
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    return frame[4:]


# --- header versions ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_key", "api_version", "expected"),
    [
        (3, 8, 1),  # Metadata v9 is the first flexible version
        (3, 9, 2),
        (0, 8, 1),  # Produce v9 likewise
        (0, 9, 2),
        (18, 2, 1),  # ApiVersions requests follow the rule: v3+ is flexible
        (18, 3, 2),
        (4, 5, 2),  # control APIs
        (5, 3, 2),
        (6, 7, 2),
        (7, 3, 2),
        (7, 0, 0),  # ControlledShutdown v0 had no client id
    ],
)
def test_request_header_version(api_key: int, api_version: int, expected: int) -> None:
    assert request_header_version(api_key, api_version) == expected


@pytest.mark.parametrize(
    ("api_key", "api_version", "expected"),
    [
        (3, 8, 0),
        (3, 9, 1),
        (0, 9, 1),
        (18, 3, 0),  # ApiVersions responses always use header v0
        (18, 4, 0),
        (18, 99, 0),  # even at versions nobody knows yet
        (4, 5, 1),
        (7, 3, 1),
    ],
)
def test_response_header_version(api_key: int, api_version: int, expected: int) -> None:
    assert response_header_version(api_key, api_version) == expected


@pytest.mark.parametrize(("api_key", "api_version"), [(4, 4), (6, 6), (3, 99), (999, 0)])
def test_header_version_of_unknown_api_raises(api_key: int, api_version: int) -> None:
    with pytest.raises(UnsupportedRequestError):
        request_header_version(api_key, api_version)


def test_header_versions_agree_with_every_kio_schema() -> None:
    for api_key, name in api_key_map.items():
        for version in schema_name_map[name]:
            request = load_request_schema(api_key, version)
            response = load_response_schema(api_key, version)
            assert request_header_version(api_key, version) == request.__header_schema__.__version__
            assert (
                response_header_version(api_key, version) == response.__header_schema__.__version__
            )
            # The structural walk knows the layout of every kio field type (private, but a
            # field type it lacked would make that API undecodable).
            framing._plan(request)
            framing._plan(response)


# --- encoding: golden frames -------------------------------------------------------------


def test_encode_flexible_request_uses_header_v2() -> None:
    assert encode_request(METADATA_V12, 7, "cli") == bytes.fromhex(
        "00000012"  # size 18
        "0003 000c 00000007"  # api key 3, version 12, correlation id 7
        "0003 636c69"  # client id "cli": int16 length even in header v2
        "00"  # header tagged fields
        "00 01 00 00"  # topics null, allow auto creation, no authorized ops, tagged fields
    )


def test_encode_non_flexible_request_uses_header_v1() -> None:
    assert encode_request(ApiVersionsRequestV0(), 1, None) == bytes.fromhex(
        "0000000a 0012 0000 00000001 ffff"  # no tagged fields anywhere, null client id
    )


def test_encode_control_request() -> None:
    request = c.ControlledShutdownRequest(broker_id=3, broker_epoch=99)
    assert encode_request(request, 1, "b3") == bytes.fromhex(
        "0000001a"  # size 26
        "0007 0003 00000001 0002 6233 00"  # header v2
        "00000003 0000000000000063 00"  # broker id, broker epoch, tagged fields
    )


def test_encode_api_versions_response_uses_header_v0() -> None:
    response = ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=(ApiVersion(api_key=18, min_version=0, max_version=4),),
        throttle_time=datetime.timedelta(0),
    )
    assert encode_response(response, 5) == bytes.fromhex(
        "00000013"  # size 19
        "00000005"  # correlation id, and no tagged fields although v3 is flexible
        "0000"  # error code
        "02 0012 0000 0004 00"  # api keys: ApiVersions 0-4
        "00000000"  # throttle time
        "00"  # tagged fields
    )


def test_encode_flexible_response_uses_header_v1() -> None:
    response = c.UpdateMetadataResponse(error_code=ErrorCode.none)
    assert encode_response(response, 9) == bytes.fromhex("00000008 00000009 00 0000 00")


# --- decoding requests -------------------------------------------------------------------

METADATA_V8 = MetadataRequestV8(
    topics=None,
    allow_auto_topic_creation=False,
    include_cluster_authorized_operations=False,
    include_topic_authorized_operations=False,
)
REQUESTS = [
    (METADATA_V12, "cli"),
    (METADATA_V8, None),
    (PRODUCE_V9, "producer"),
    (ApiVersionsRequestV0(), "x"),
    (LEADER_AND_ISR, "controller-1"),
    (c.ControlledShutdownRequest(broker_id=2), None),
]


@pytest.mark.parametrize(("payload", "client_id"), REQUESTS, ids=lambda v: type(v).__name__)
def test_request_round_trip(payload: object, client_id: str | None) -> None:
    frame = unframed(encode_request(payload, 42, client_id))
    header, decoded = decode_request(frame)
    assert decoded == payload
    assert header == RequestHeaderInfo(
        api_key=type(payload).__api_key__,
        api_version=type(payload).__version__,
        correlation_id=42,
        client_id=client_id,
        header_version=2 if type(payload).__flexible__ else 1,
    )


@pytest.mark.parametrize(("payload", "client_id"), REQUESTS, ids=lambda v: type(v).__name__)
def test_a_frame_in_a_writable_buffer_decodes_the_same(payload: object, client_id: str | None) -> None:
    """The server reads a frame larger than its scratch buffer into its own bytearray (a
    restarted broker's first UpdateMetadata for 10,000 partitions is one)."""
    frame = unframed(encode_request(payload, 42, client_id))
    assert decode_request(bytearray(frame))[1] == payload
    assert decode_request(memoryview(bytearray(frame)))[1] == payload


@pytest.mark.parametrize(("payload", "client_id"), REQUESTS, ids=lambda v: type(v).__name__)
def test_every_truncation_is_malformed(payload: object, client_id: str | None) -> None:
    frame = unframed(encode_request(payload, 42, client_id))
    for cut in range(len(frame)):
        with pytest.raises(MalformedRequestError):
            decode_request(frame[:cut])


def test_trailing_bytes_are_ignored_as_kafka_does() -> None:
    """librdkafka 2.x sends a few extra bytes after its Metadata v12 body; Kafka ignores them."""
    frame = unframed(encode_request(LEADER_AND_ISR, 1, None))
    header, payload = decode_request(frame + b"\1\0\0")
    assert header.correlation_id == 1
    assert payload == LEADER_AND_ISR


def test_header_tagged_fields_are_skipped() -> None:
    header = bytes.fromhex("0003 000c 00000007 ffff01 05 02 abcd")  # one unknown tag, 2 bytes
    header_info, offset = decode_request_header(header + b"\0\1\0\0")
    assert (header_info.correlation_id, header_info.client_id, offset) == (7, None, len(header))


def test_negative_client_id_length_is_malformed() -> None:
    with pytest.raises(MalformedRequestError, match="client id length -2"):
        decode_request_header(bytes.fromhex("0003 000c 00000007 fffe 00"))


def test_client_id_longer_than_frame_is_malformed() -> None:
    with pytest.raises(MalformedRequestError):
        decode_request_header(bytes.fromhex("0003 000c 00000007 0010 6162 00"))


def test_client_id_is_decoded_leniently_like_kafka() -> None:
    header, _ = decode_request_header(bytes.fromhex("0003 000c 00000007 0002 61ff 00"))
    assert header.client_id == "a\ufffd"


@pytest.mark.parametrize(
    ("frame", "api_key", "api_version"),
    [
        ("270f 0000 0000002a 0001 63", 9999, 0),  # unknown api key
        ("0003 0063 0000002a 0001 63 00", 3, 99),  # Metadata v99
        ("0012 0063 0000002a 0001 63 00", 18, 99),  # ApiVersions from a newer client
        ("0004 0004 0000002a 0001 63 00", 4, 4),  # LeaderAndIsr: we speak v5 only
    ],
)
def test_unsupported_request_keeps_its_header(frame: str, api_key: int, api_version: int) -> None:
    with pytest.raises(UnsupportedRequestError) as raised:
        decode_request(bytes.fromhex(frame))
    error = raised.value
    assert (error.api_key, error.api_version, error.correlation_id) == (api_key, api_version, 42)
    assert error.header is not None
    assert error.header.client_id == "c"


def test_controlled_shutdown_v0_header_has_no_client_id() -> None:
    with pytest.raises(UnsupportedRequestError) as raised:
        decode_request(bytes.fromhex("0007 0000 0000002a 00000003"))
    assert raised.value.header == RequestHeaderInfo(7, 0, 42, None, 0)


def _leader_and_isr_body_with(live_leaders_count: str) -> bytes:
    # Header v2, then a LeaderAndIsr v5 body with no topics and a forged live leaders count.
    return bytes.fromhex(
        "0004 0005 00000001 ffff 00"
        "00000001 00000005 ffffffffffffffff 00 01" + live_leaders_count + "00"
    )


def test_forged_array_count_is_refused_before_kio_sees_it() -> None:
    # kio's native reader would try to allocate 2**32 slots and abort the process.
    with pytest.raises(MalformedRequestError, match="live_leaders of 4294967293 items"):
        decode_request(_leader_and_isr_body_with("feffffff0f"))


def test_a_count_varint_longer_than_5_bytes_is_malformed() -> None:
    with pytest.raises(MalformedRequestError, match="longer than 5 bytes"):
        decode_request(_leader_and_isr_body_with("8080808080"))


def test_a_varint_cut_by_the_end_of_the_frame_is_malformed() -> None:
    with pytest.raises(MalformedRequestError, match="truncated varint"):
        decode_request(_leader_and_isr_body_with("ff")[:-1])


def test_forged_legacy_array_count_is_refused() -> None:
    frame = bytes.fromhex("0003 0008 00000001 ffff7fffffff 00 00 00")
    with pytest.raises(MalformedRequestError, match="topics of 2147483647 items"):
        decode_request(frame)


def test_null_for_non_nullable_array_is_malformed() -> None:
    with pytest.raises(MalformedRequestError, match="invalid count -1 for array live_leaders"):
        decode_request(_leader_and_isr_body_with("00"))


def test_invalid_utf8_in_body_is_malformed() -> None:
    frame = bytes.fromhex(
        "0003 000c 00000001 ffff 00"  # Metadata v12 request header
        "02"  # one topic
        "00000000000000000000000000000000 02ff 00"  # zero topic id, name 0xff, tags
        "01 00 00"  # allow auto creation, no authorized operations, tags
    )
    with pytest.raises(MalformedRequestError, match="InvalidUnicode"):
        decode_request(frame)


def test_unknown_tagged_fields_in_a_body_are_skipped() -> None:
    """As Kafka skips them (KIP-482; the differential oracle's find): cut out before kio
    reads the body, at the top level and in a nested struct, bytes after the body ignored."""
    frame = unframed(encode_request(METADATA_V12, 1, None))
    _, payload = decode_request(frame[:-1] + bytes.fromhex("02 09 01 00 0b 02 aa bb") + b"after")
    assert payload == METADATA_V12
    nested = bytes.fromhex(
        "0003 000c 00000001 ffff 00"  # Metadata v12 request header
        "02"  # one topic
        "00000000000000000000000000000000 02 74 01 07 00"  # zero id, name "t", tag 7 of no bytes
        "01 00 00"  # allow auto creation, no authorized operations, tags
    )
    _, payload = decode_request(nested)
    assert [t.name for t in payload.topics] == ["t"]


@given(st.binary(max_size=64))
def test_garbage_raises_only_protocol_errors(data: bytes) -> None:
    try:
        decode_request(data)
    except ProtocolError:
        pass


VALID_FRAMES = [unframed(encode_request(payload, 1, cid)) for payload, cid in REQUESTS]


@given(
    st.sampled_from(VALID_FRAMES),
    st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_corrupted_frames_raise_only_protocol_errors(
    frame: bytes, edits: list[tuple[int, int]]
) -> None:
    corrupted = bytearray(frame)
    for position, value in edits:
        corrupted[position % len(corrupted)] = value
    try:
        decode_request(bytes(corrupted))
    except ProtocolError:
        pass


# --- decoding responses ------------------------------------------------------------------

RESPONSES = [
    c.LeaderAndIsrResponse(error_code=ErrorCode.none, topics=()),
    c.StopReplicaResponse(error_code=ErrorCode.stale_controller_epoch, partition_errors=()),
    c.UpdateMetadataResponse(error_code=ErrorCode.none),
    c.ControlledShutdownResponse(
        error_code=ErrorCode.none,
        remaining_partitions=(c.RemainingPartition(topic_name="t", partition_index=1),),
    ),
    ApiVersionsResponse(
        error_code=ErrorCode.none, api_keys=(), throttle_time=datetime.timedelta(0)
    ),
    MetadataResponse(throttle_time=datetime.timedelta(0), brokers=(), controller_id=1, topics=()),
]


@pytest.mark.parametrize("payload", RESPONSES, ids=lambda v: type(v).__name__)
def test_response_round_trip(payload: object) -> None:
    frame = unframed(encode_response(payload, 77))
    assert decode_response(frame, type(payload)) == (77, payload)
    for cut in range(len(frame)):
        with pytest.raises(MalformedResponseError):
            decode_response(frame[:cut], type(payload))
    # Trailing bytes are tolerated, as Kafka's parsers do.
    assert decode_response(frame + b"\0", type(payload)) == (77, payload)


def test_response_header_tagged_fields_are_skipped() -> None:
    frame = bytes.fromhex("0000000301 00 000000 00")  # one empty tag 0 in the header
    assert decode_response(frame, c.UpdateMetadataResponse) == (
        3,
        c.UpdateMetadataResponse(error_code=ErrorCode.none),
    )


def test_unknown_error_code_in_response_is_malformed() -> None:
    with pytest.raises(MalformedResponseError):
        decode_response(bytes.fromhex("00000003 00 7fff 00"), c.UpdateMetadataResponse)


# --- frame buffer ------------------------------------------------------------------------


def test_frame_buffer_byte_by_byte() -> None:
    frames = [encode_request(payload, 1, cid) for payload, cid in REQUESTS]
    buffer = FrameBuffer()
    received = []
    for byte in b"".join(frames):
        buffer.feed(bytes([byte]))
        frame = buffer.next_frame()
        if frame is not None:
            received.append(frame)
            assert buffer.next_frame() is None
    assert received == [unframed(f) for f in frames]
    assert buffer.buffered == 0


def test_frame_buffer_several_frames_in_one_feed() -> None:
    buffer = FrameBuffer()
    buffer.feed(b"\0\0\0\2ab\0\0\0\0\0\0\0\1c\0\0")
    assert [buffer.next_frame() for _ in range(4)] == [b"ab", b"", b"c", None]
    assert buffer.buffered == 2


def test_frame_too_large_is_refused_before_its_bytes_arrive() -> None:
    buffer = FrameBuffer(max_frame_size=1024)
    buffer.feed(struct.pack(">i", 1025))
    with pytest.raises(InvalidFrameSizeError) as raised:
        buffer.next_frame()
    assert (raised.value.size, raised.value.max_size) == (1025, 1024)


def test_frame_at_the_maximum_is_accepted() -> None:
    buffer = FrameBuffer(max_frame_size=3)
    buffer.feed(b"\0\0\0\3xyz")
    assert buffer.next_frame() == b"xyz"


def test_negative_frame_size_is_a_protocol_error() -> None:
    buffer = FrameBuffer()
    buffer.feed(b"\xff\xff\xff\xfe")
    with pytest.raises(InvalidFrameSizeError, match="size -2 is outside"):
        buffer.next_frame()


@given(
    st.lists(st.binary(max_size=40), max_size=10),
    st.lists(st.integers(1, 30), min_size=1, max_size=20),
)
def test_frame_buffer_any_chunking(payloads: list[bytes], chunk_sizes: list[int]) -> None:
    stream = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    buffer = FrameBuffer()
    received: list[bytes] = []
    position = 0
    chunks = iter(chunk_sizes * (len(stream) + 1))
    while position < len(stream):
        size = next(chunks)
        buffer.feed(stream[position : position + size])
        position += size
        while (frame := buffer.next_frame()) is not None:
            received.append(frame)
    assert received == payloads
    assert buffer.buffered == 0


def test_a_frame_larger_than_the_scratch_buffer_is_read_into_its_own() -> None:
    """Read the way asyncio's BufferedProtocol reads: into get_buffer(), then buffer_updated()."""
    payload = bytes(range(256)) * 1000  # 256,000 bytes: more than the 64 KiB scratch buffer
    stream = struct.pack(">i", len(payload)) + payload + b"\0\0\0\1z"
    buffer = FrameBuffer()
    frames: list[bytes | bytearray] = []
    position = 0
    while position < len(stream):
        target = buffer.get_buffer()
        n = min(len(target), 10_000, len(stream) - position)
        target[:n] = stream[position:position + n]
        buffer.buffer_updated(n)
        position += n
        while (frame := buffer.next_frame()) is not None:
            frames.append(frame)
    assert frames == [payload, b"z"]
    assert isinstance(frames[0], bytearray)  # the buffer it was read into, not a copy
    assert isinstance(frames[1], bytes)


def test_frames_nobody_takes_yet_do_not_stop_the_buffer_filling() -> None:
    """A muted channel leaves whole frames in the buffer while bytes keep coming."""
    small = [struct.pack(">i", 100) + bytes([i % 256]) * 100 for i in range(1000)]  # 104 KB in all
    big = struct.pack(">i", 70_000) + b"b" * 70_000
    buffer = FrameBuffer()
    buffer.feed(b"".join(small) + big + small[0])
    assert buffer.buffered == len(b"".join(small)) + len(big) + len(small[0])
    frames = []
    while (frame := buffer.next_frame()) is not None:
        frames.append(frame)
    assert frames == [f[4:] for f in small] + [big[4:], small[0][4:]]
    assert buffer.buffered == 0
