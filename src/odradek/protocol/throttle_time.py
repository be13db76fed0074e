"""The ``throttle_time_ms`` of an encoded response, set after the response was written.

A quota's throttle time (KIP-219) is known only once the handler has run, when its response is
already bytes; rather than teach every handler the number, the request path writes it into the
frame.  Almost every response carries it as the first field of its body (right after the
response header); Produce carries it last (before the top-level tagged fields on v9).
ApiVersions carries it after its API table and is left alone, as are responses without it.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from typing import Any

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.framing import (
    UnsupportedRequestError,
    response_header_version,
    response_schema,
)

__all__ = ["throttle_time_position", "with_throttle_time"]

_I32 = struct.Struct(">i")
_SIZE_AND_CORRELATION_ID = 8
_BUFFERS = (bytes, bytearray, memoryview)


@functools.cache
def throttle_time_position(api_key: int, api_version: int) -> int | None:
    """Where the field is in a response frame (size prefix included): a position from the
    start, or (negative) from the end; None if this response has no such field there."""
    if api_key == ApiKey.PRODUCE:
        return -5 if api_version >= 9 else -4
    if api_key == ApiKey.API_VERSIONS:
        return None
    schema = response_schema(api_key, api_version)
    if schema is None:
        return None
    fields = dataclasses.fields(schema)
    first = fields[0] if fields else None
    if first is None or first.metadata.get("kafka_type") != "timedelta_i32" or "throttle" not in first.name:
        return None
    try:
        return _SIZE_AND_CORRELATION_ID + response_header_version(api_key, api_version)
    except UnsupportedRequestError:
        return None


def with_throttle_time(response: Any, api_key: int, api_version: int, throttle_ms: int) -> Any:
    """``response`` (a frame, or chunks whose leading buffers hold the field) with a throttle time
    of at least ``throttle_ms``; unchanged when it has no such field or a longer one."""
    position = throttle_time_position(api_key, api_version)
    if position is None or response is None:
        return response
    if isinstance(response, _BUFFERS):
        return _patched(response, position, throttle_ms)
    if position < 0:
        return response  # Produce answers are single frames
    chunks = list(response)
    offset = 0
    for i, chunk in enumerate(chunks):  # the buffer holding the field (the size prefix may be a chunk of its own)
        if not isinstance(chunk, _BUFFERS):
            break
        if position < offset + len(chunk):
            if position + 4 > offset + len(chunk):
                break  # split across chunks: not how any encoder here writes it
            chunks[i] = _patched(chunk, position - offset, throttle_ms)
            return chunks
        offset += len(chunk)
    return response


def _patched(frame: bytes | bytearray | memoryview, position: int, throttle_ms: int) -> bytes | bytearray | memoryview:
    start = position if position >= 0 else len(frame) + position
    if start < 0 or start + 4 > len(frame):
        return frame
    (current,) = _I32.unpack_from(frame, start)
    if current >= throttle_ms:
        return frame
    patched = bytearray(frame)
    _I32.pack_into(patched, start, throttle_ms)
    return bytes(patched) if isinstance(frame, bytes) else patched
