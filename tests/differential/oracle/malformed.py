"""Frames that break the protocol, sent as raw bytes on a fresh connection: what each side
does with them (answers, closes the connection, or waits for more bytes) is compared, and
for an answer the answer itself.

Each entry is (name, bytes, the response type an answer is decoded as); the bytes are the
same on both sides.  An answer to an ApiVersions version neither side knows is decoded as the
v0 response Kafka sends then."""

from __future__ import annotations

import struct
from typing import Any

from kio.schema.api_versions.v0 import response as api_versions_v0
from kio.schema.metadata.v1 import request as metadata_v1
from kio.schema.metadata.v1 import response as metadata_v1_resp
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.metadata.v12 import response as metadata_v12_resp
from oracle.side import Session

from odradek.protocol.framing import decode_response, encode_request
from odradek.protocol.varint import encode_uvarint as uvarint
from support.wire import raw_frame as frame
from support.wire import raw_header

__all__ = ["FRAMES", "outcome"]

_SIZE = struct.Struct(">i")


def header(api_key: int, version: int, correlation_id: int = 7, *, flexible: bool = False) -> bytes:
    return raw_header(api_key, version, correlation_id, flexible=flexible, client_id=b"oracle")


_METADATA_V12 = encode_request(metadata_v12.MetadataRequest(
    topics=(metadata_v12.MetadataRequestTopic(topic_id=None, name="oracle-frames"),),
    allow_auto_topic_creation=False, include_topic_authorized_operations=False), 9, "oracle")
# No topic named: v1 asks for auto-creation, which is off by default in odradek alone.
_METADATA_V1 = encode_request(metadata_v1.MetadataRequest(topics=()), 9, "oracle")


def _resized(request: bytes, delta: int) -> bytes:
    """``request`` with its size prefix off by ``delta`` (its bytes unchanged)."""
    return _SIZE.pack(len(request) - 4 + delta) + request[4:]


AV0 = api_versions_v0.ApiVersionsResponse
MD1 = metadata_v1_resp.MetadataResponse
MD12 = metadata_v12_resp.MetadataResponse

FRAMES: list[tuple[str, bytes, type | None]] = [
    ("http", b"GET / HTTP/1.1\r\nHost: oracle\r\n\r\n", None),
    ("empty-frame", frame(b""), None),
    ("negative-size", b"\xff\xff\xff\xfe" + b"\x00" * 8, None),
    ("size-above-socket-request-max-bytes", _SIZE.pack(104_857_601) + b"\x00" * 16, None),
    ("truncated-frame", _SIZE.pack(40) + header(3, 1), None),
    ("header-cut-short", frame(b"\x00\x03\x00"), None),
    ("client-id-past-the-end", frame(struct.pack(">hhih", 3, 1, 7, 300) + b"x" * 8), None),
    ("unknown-api-key", frame(header(999, 0) + b"\x00" * 8), None),
    ("negative-api-key", frame(header(-5, 0) + b"\x00" * 8), None),
    ("produce-v2", frame(header(0, 2) + struct.pack(">hii", 1, 1000, 0)), None),
    ("produce-v99", frame(header(0, 99, flexible=True) + b"\x00" * 8), None),
    ("fetch-v3", frame(header(1, 3) + struct.pack(">iiii", -1, 0, 1, 0)), None),
    ("fetch-v18", frame(header(1, 18, flexible=True) + b"\x00" * 8), None),
    ("metadata-v13", frame(header(3, 13, flexible=True) + b"\x00" * 8), None),
    ("list-offsets-v32767", frame(header(2, 32767, flexible=True) + b"\x00" * 8), None),
    ("api-versions-v5", frame(header(18, 5, correlation_id=4242, flexible=True) + b"\x07future\x00"), AV0),
    ("api-versions-v32767", frame(header(18, 32767, correlation_id=4243, flexible=True)), AV0),
    ("metadata-v12-body-cut", frame(_METADATA_V12[4:-6]), None),
    ("metadata-v12-size-too-small", _resized(_METADATA_V12, -3)[:-3], None),
    ("metadata-v12-trailing-bytes", _resized(_METADATA_V12 + b"\x00\x01\x02", 0), MD12),
    ("metadata-v1-trailing-bytes", _resized(_METADATA_V1 + b"\x00\x00\x00", 0), MD1),
    ("metadata-v1-forged-topic-count", frame(header(3, 1) + struct.pack(">i", 2**31 - 1)), None),
    ("metadata-v12-forged-topic-count", frame(header(3, 12, flexible=True) + uvarint(2**32 - 1) + b"\x00" * 8),
     None),
    ("metadata-v1-string-past-the-end", frame(header(3, 1) + struct.pack(">ih", 1, 30000) + b"t"), None),
    ("metadata-v1-negative-string-length", frame(header(3, 1) + struct.pack(">ih", 1, -7)), None),
    ("metadata-v1-invalid-utf8", frame(header(3, 1) + struct.pack(">ih", 1, 2) + b"\xff\xfe"), None),
    ("metadata-v12-varint-too-long", frame(header(3, 12, flexible=True) + b"\xff" * 6 + b"\x01"), None),
    ("metadata-v12-unknown-tagged-field", frame(header(3, 12, flexible=True) + uvarint(1) + b"\x00\x00"
                                                + uvarint(1) + uvarint(7) + uvarint(1) + b"\x00"), None),
]


def outcome(s: Session, data: bytes, response_type: type | None) -> Any:
    """What the broker does with ``data`` on a fresh connection: :class:`Closed`,
    :class:`NoAnswer` (within 5 s, the connection open), or the answer (decoded as
    ``response_type``, or its correlation id alone when there is none)."""
    answer = s.raw(data, timeout=5.0)
    if not isinstance(answer, bytes):
        return answer
    if response_type is None:
        return {"answered": True, "correlation_id": _SIZE.unpack_from(answer, 0)[0]}
    correlation_id, response = decode_response(answer, response_type)
    return {"correlation_id": correlation_id, "response": response}
