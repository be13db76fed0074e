"""Kafka's frame layer, sans-IO: size-prefixed frames, request and response headers.

Every message on a Kafka connection is a frame: a big-endian int32 size, then that many
bytes. A request frame holds a request header and the request body; a response frame holds
a response header and the response body. Which header version a message uses depends on
its api key and version:

* request header v1 (api key, api version, correlation id, nullable client id) for
  non-flexible versions, v2 (the same plus a tagged-field section) for flexible ones; the
  client id keeps its int16-length encoding even in v2;
* response header v0 (correlation id) for non-flexible versions, v1 (plus tagged fields) for
  flexible ones, except ApiVersions, whose response header is always v0: a client reads that
  response before it knows which versions the broker speaks;
* ControlledShutdown v0 alone used a request header without the client id (v0).

Whether a version is flexible comes from the payload classes themselves (kio's generated
schemas, plus :mod:`odradek.protocol.control` for the ZooKeeper-era control APIs), so what
can be decoded and what the header says always agree.

Bodies are decoded by kio's native reader, after a structural walk of the bytes that
refuses what kio would mishandle (see ``_read_body``).

Errors are split the h11 way: the peer's bytes being wrong (:class:`MalformedRequestError`,
:class:`UnsupportedRequestError`, :class:`MalformedResponseError`, :class:`InvalidFrameSizeError`)
is a :class:`ProtocolError`; encoding a payload we built is assumed correct.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any, Final, TypeVar, Union, get_args, get_origin

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.primitive import i32
from kio.static.protocol import Payload

from odradek.protocol import control
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.record_codec import RecordFormatError
from odradek.protocol.varint import VarintError, encode_uvarint, read_uvarint

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME_SIZE: Final = 104_857_600

_SIZE = struct.Struct(">i")
_HEADER_FIXED = struct.Struct(">hhi")  # api key, api version, correlation id
_INT16 = struct.Struct(">h")

# What kio's native reader raises on bytes that passed the structural walk: its DecodeError
# family (invalid UTF-8, unexpected null), ValueError (invalid bool or error code values),
# KeyError (unknown tags, which the walk cuts out first).
_DECODE_ERRORS = (SerialError, ValueError, KeyError)

P = TypeVar("P", bound=Payload)


class ProtocolError(Exception):
    """The peer sent bytes that break the Kafka protocol; the connection should be closed."""


class MalformedRequestError(ProtocolError):
    """A request frame that cannot be parsed: truncated, bad lengths, invalid values."""


class MalformedResponseError(ProtocolError):
    """A response frame that cannot be parsed as the expected response type."""


class InvalidFrameSizeError(ProtocolError):
    """A frame's size prefix is negative or exceeds the maximum (Kafka's
    ``socket.request.max.bytes``; its InvalidReceiveException)."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"frame size {size} is outside 0..{max_size}")
        self.size = size
        self.max_size = max_size


@dataclass(frozen=True, slots=True)
class RequestHeaderInfo:
    """The fields of a request header, whatever its version."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int


class UnsupportedRequestError(ProtocolError):
    """An api key or version that has no schema here.

    Raised from a frame, ``header`` carries the request header (readable even when the body
    is not), so the broker can answer an unsupported ApiVersions request with an
    UNSUPPORTED_VERSION ApiVersions v0 response, as Kafka does; from the header-version
    lookups, ``header`` is None.
    """

    def __init__(self, api_key: int, api_version: int, header: RequestHeaderInfo | None) -> None:
        super().__init__(f"unsupported request: api key {api_key} version {api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.header = header

    @property
    def correlation_id(self) -> int | None:
        """The request's correlation id, when raised from a frame."""
        return None if self.header is None else self.header.correlation_id


# --- schemas and header versions ---------------------------------------------------------


# Hits only: a peer sending arbitrary api keys and versions must not grow these.
_request_schemas: dict[tuple[int, int], type[Payload]] = dict(control.REQUEST_TYPES)
_response_schemas: dict[tuple[int, int], type[Payload]] = dict(control.RESPONSE_TYPES)


def request_schema(api_key: int, api_version: int) -> type[Payload] | None:
    """The request payload class for an api key and version, or None if there is none."""
    schema = _request_schemas.get((api_key, api_version))
    if schema is None:
        try:
            schema = _request_schemas[api_key, api_version] = load_request_schema(
                api_key, api_version
            )
        except KioIndexError:
            return None
    return schema


def response_schema(api_key: int, api_version: int) -> type[Payload] | None:
    """The response payload class for an api key and version, or None if there is none."""
    schema = _response_schemas.get((api_key, api_version))
    if schema is None:
        try:
            schema = _response_schemas[api_key, api_version] = load_response_schema(
                api_key, api_version
            )
        except KioIndexError:
            return None
    return schema


# Versions kio has no schema for (Kafka 4 dropped them) that odradek reads by hand: Produce
# v0-v2 (protocol.produce_request).  Their headers are v1, their bodies never decoded by kio.
HAND_READ_VERSIONS = frozenset({(ApiKey.PRODUCE, 0), (ApiKey.PRODUCE, 1), (ApiKey.PRODUCE, 2)})


def _request_header_version_of(schema: type[Payload]) -> int:
    return 2 if schema.__flexible__ else 1


def _response_header_version_of(schema: type[Payload]) -> int:
    if schema.__api_key__ == ApiKey.API_VERSIONS:
        return 0
    return 1 if schema.__flexible__ else 0


def request_header_version(api_key: int, api_version: int) -> int:
    """The request header version (0, 1 or 2) used with this api key and version.

    Raises :class:`UnsupportedRequestError` when no schema for it is known.
    """
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    schema = request_schema(api_key, api_version)
    if schema is None:
        raise UnsupportedRequestError(api_key, api_version, None)
    return _request_header_version_of(schema)


def response_header_version(api_key: int, api_version: int) -> int:
    """The response header version (0 or 1) used with this api key and version.

    Raises :class:`UnsupportedRequestError` when no schema for it is known, except for
    ApiVersions, whose response header is v0 at every version, known or not.
    """
    if api_key == ApiKey.API_VERSIONS:
        return 0
    schema = response_schema(api_key, api_version)
    if schema is None:
        raise UnsupportedRequestError(api_key, api_version, None)
    return _response_header_version_of(schema)


# --- encoding ----------------------------------------------------------------------------


def _finish_frame(buffer: io.BytesIO) -> bytes:
    with buffer.getbuffer() as frame:
        _SIZE.pack_into(frame, 0, len(frame) - _SIZE.size)
    return buffer.getvalue()


def encode_request(payload: Payload, correlation_id: int, client_id: str | None) -> bytes:
    """A complete request frame (size prefix, request header, body) for a request payload.

    ``payload`` is a kio request payload or one from :mod:`odradek.protocol.control`.
    """
    payload_type = type(payload)
    header_type = (
        RequestHeaderV2 if _request_header_version_of(payload_type) == 2 else RequestHeaderV1
    )
    header = header_type(
        request_api_key=payload_type.__api_key__,
        request_api_version=payload_type.__version__,
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    buffer = io.BytesIO()
    buffer.write(bytes(_SIZE.size))  # patched by _finish_frame
    entity_writer(header_type)(buffer, header)
    fast = control.FAST_WRITERS.get(payload_type)
    if fast is not None:
        buffer.write(fast(payload))
    else:
        entity_writer(payload_type)(buffer, payload)
    return _finish_frame(buffer)


def encode_response(payload: Payload, correlation_id: int) -> bytes:
    """A complete response frame (size prefix, response header, body) for a response payload."""
    payload_type = type(payload)
    header_type = (
        ResponseHeaderV1 if _response_header_version_of(payload_type) == 1 else ResponseHeaderV0
    )
    buffer = io.BytesIO()
    buffer.write(bytes(_SIZE.size))  # patched by _finish_frame
    entity_writer(header_type)(buffer, header_type(correlation_id=i32(correlation_id)))
    entity_writer(payload_type)(buffer, payload)
    return _finish_frame(buffer)


# --- decoding ----------------------------------------------------------------------------


class _Malformed(Exception):
    """Internal: bytes that do not parse; re-raised as the request or response error."""


# What the decoders below turn into the request or response error.
_MALFORMED = (_Malformed, VarintError)


class _Unknown:
    """The unknown tagged fields a body walk found, as edits of the body's bytes: (start, end,
    replacement) spans, in order.  Kafka skips such fields (KIP-482); kio's reader cannot (it
    raises KeyError), so they are cut out before it reads.  Set only during a body walk."""

    edits: list[tuple[int, int, bytes]] | None = None


def _tagged_fields(
    view: memoryview, pos: int, end: int, known: dict[int, _Step] | None, owner: str
) -> int:
    """Skip a tagged-field section, walking the values of ``known`` tags.

    With ``known`` None (headers, which define no tags) every tag is skipped, as Kafka does;
    otherwise an unknown tag becomes an edit for :class:`_Unknown` (its span removed, the
    section's count lowered), unless it sits inside another tagged field's value, whose size
    would change with it."""
    section = pos
    count, pos = read_uvarint(view, pos, end)
    count_end = pos
    dropped: list[tuple[int, int, bytes]] = []
    for _ in range(count):
        field = pos
        tag, pos = read_uvarint(view, pos, end)
        size, pos = read_uvarint(view, pos, end)
        if size > end - pos:
            raise _Malformed("truncated")
        if known is not None:
            step = known.get(tag)
            if step is None:
                if _Unknown.edits is None:
                    raise _Malformed(f"unknown tagged field {tag} in {owner}")
                dropped.append((field, pos + size, b""))
            else:
                before = None if _Unknown.edits is None else len(_Unknown.edits)
                if step(view, pos, pos + size) != pos + size:
                    raise _Malformed(f"tagged field {tag} in {owner} does not fill its {size} bytes")
                if before is not None and len(_Unknown.edits) != before:  # type: ignore[arg-type]
                    raise _Malformed(f"unknown tagged field inside tagged field {tag} of {owner}")
        pos += size
    if dropped:
        assert _Unknown.edits is not None
        _Unknown.edits.append((section, count_end, encode_uvarint(count - len(dropped))))
        _Unknown.edits.extend(dropped)
    return pos


def decode_request_header(frame: bytes | memoryview) -> tuple[RequestHeaderInfo, int]:
    """Parse the request header of a frame (without its size prefix).

    Returns the header and the offset at which the request body starts. Raises
    :class:`MalformedRequestError` for bytes that are not a header, and
    :class:`UnsupportedRequestError` (carrying the header) for an api key or version with no
    schema here, since neither the end of such a header nor its body can be known. Decode
    the body with :func:`decode_request` rather than kio directly: it guards kio's reader.
    """
    view = memoryview(frame)
    end = len(view)
    client_id: str | None = None
    try:
        if end < _HEADER_FIXED.size:
            raise _Malformed("truncated")
        api_key, api_version, correlation_id = _HEADER_FIXED.unpack_from(view, 0)
        pos = _HEADER_FIXED.size
        # Header versions differ only from the client id on, so a header we cannot place
        # still yields its api key, version, correlation id and client id for the error.
        header_version = 0 if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0 else 1
        if header_version == 1:
            length, pos = _read_length(view, pos, end, _INT16)
            if length < -1 or length > end - pos:
                raise _Malformed(f"client id length {length} with {end - pos} bytes left")
            if length >= 0:
                # Kafka decodes the client id leniently; so do we.
                client_id = str(view[pos : pos + length], "utf-8", "replace")
                pos += length
        schema = request_schema(api_key, api_version)
        if schema is not None and _request_header_version_of(schema) == 2:
            header_version = 2
            pos = _tagged_fields(view, pos, end, None, "request header")
    except _MALFORMED as exc:
        raise MalformedRequestError(f"request header: {exc}") from None
    header = RequestHeaderInfo(api_key, api_version, correlation_id, client_id, header_version)
    if schema is None and (api_key, api_version) not in HAND_READ_VERSIONS:
        raise UnsupportedRequestError(api_key, api_version, header)
    return header, pos


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeaderInfo, Payload]:
    """Parse a whole request frame (without its size prefix) into its header and payload.

    Raises what :func:`decode_request_header` raises, and :class:`MalformedRequestError`
    when the body does not parse as the header's api key and version or leaves bytes over.
    """
    header, pos = decode_request_header(frame)
    schema = _request_schemas.get((header.api_key, header.api_version))
    if schema is None:  # a version only read by hand (HAND_READ_VERSIONS)
        raise UnsupportedRequestError(header.api_key, header.api_version, header)
    # A large frame arrives in its own bytearray; the body readers want a read-only view.
    view = memoryview(frame)
    if not view.readonly:
        view = view.toreadonly()
    try:
        payload = _read_body(schema, view, pos)
    except _MALFORMED as exc:
        raise MalformedRequestError(
            f"api key {header.api_key} version {header.api_version}: {exc}"
        ) from None
    return header, payload


def decode_response(frame: bytes | memoryview, payload_type: type[P]) -> tuple[int, P]:
    """Parse a response frame (without its size prefix) as ``payload_type``.

    Returns the correlation id and the payload; matching the correlation id to its request
    is the caller's job. Raises :class:`MalformedResponseError` for bytes that do not parse.
    """
    view = memoryview(frame)
    try:
        if len(view) < _SIZE.size:
            raise _Malformed("truncated")
        (correlation_id,) = _SIZE.unpack_from(view, 0)
        pos = _SIZE.size
        if _response_header_version_of(payload_type) == 1:
            pos = _tagged_fields(view, pos, len(view), None, "response header")
        payload = _read_body(payload_type, view, pos)
    except _MALFORMED as exc:
        raise MalformedResponseError(f"{payload_type.__name__}: {exc}") from None
    return correlation_id, payload


def _read_body(schema: type[P], view: memoryview, pos: int) -> P:
    hand_reader = getattr(schema, "read_body", None)
    if hand_reader is not None:  # a response kio cannot read (protocol.describe_transactions)
        try:
            return hand_reader(bytes(view[pos:]))
        except RecordFormatError as exc:
            raise _Malformed(str(exc)) from None
    # Walk the bytes first: kio's native reader sizes an array's storage from the count on
    # the wire, and a forged count (2**32, say) aborts the whole process when that
    # allocation fails, which no except clause can catch.
    # Bytes left after the body are ignored, as Kafka's parser does: librdkafka 2.x sends
    # a few extra bytes in its Metadata v12 request, and Kafka brokers accept it.
    edits: list[tuple[int, int, bytes]] = []
    _Unknown.edits = edits if schema.__flexible__ else None  # type: ignore[attr-defined]
    try:
        end = _walk(schema, view, pos, len(view))
    finally:
        _Unknown.edits = None
    if edits:  # rare: a peer's tagged fields this version does not define, cut out
        view, pos = memoryview(_without(view, pos, end, edits)), 0
    try:
        payload, _size = entity_reader(schema)(view, pos)
    except _DECODE_ERRORS as exc:
        raise _Malformed(f"{type(exc).__name__}: {exc}") from None
    return payload


def _without(view: memoryview, pos: int, end: int, edits: list[tuple[int, int, bytes]]) -> bytes:
    """The body ``view[pos:end]`` with each (start, end, replacement) span of ``edits`` replaced."""
    out = bytearray()
    at = pos
    for start, stop, replacement in sorted(edits):
        out += view[at:start]
        out += replacement
        at = stop
    out += view[at:end]
    return bytes(out)


# --- structural walk ---------------------------------------------------------------------
#
# A pass over a message's bytes, driven by the same dataclass fields kio reads, that builds
# nothing. Like Kafka's generated readers it rejects an array whose count exceeds the bytes
# left (every item takes at least one byte), and it rejects a null where the schema allows
# none (kio's reader lets a null array through). It must see the structure exactly as kio
# does, so that kio never reads a count the walk has not checked.

_Step = Callable[[memoryview, int, int], int]

_FIXED_SIZES: Final = {
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint16": 2,
    "float64": 8,
    "uuid": 16,
    "bool": 1,
    "error_code": 2,
    "timedelta_i32": 4,
    "timedelta_i64": 8,
    "datetime_i64": 8,
}
# Length prefixes of the non-flexible (legacy) encodings; flexible ones use varints.
_LEGACY_LENGTHS: Final = {"string": _INT16, "bytes": _SIZE, "records": _SIZE}


def _read_length(
    view: memoryview, pos: int, end: int, legacy: struct.Struct | None
) -> tuple[int, int]:
    """A length or count, compact (varint of n + 1) or legacy (signed int); -1 is null."""
    if legacy is None:
        n, pos = read_uvarint(view, pos, end)
        return n - 1, pos
    if legacy.size > end - pos:
        raise _Malformed("truncated")
    return legacy.unpack_from(view, pos)[0], pos + legacy.size


def _fixed_step(size: int) -> _Step:
    def step(view: memoryview, pos: int, end: int) -> int:
        if size > end - pos:
            raise _Malformed("truncated")
        return pos + size

    return step


def _sized_step(legacy: struct.Struct | None, nullable: bool, what: str) -> _Step:
    def step(view: memoryview, pos: int, end: int) -> int:
        n, pos = _read_length(view, pos, end, legacy)
        if n < 0 and not (n == -1 and nullable):
            raise _Malformed(f"invalid {what} length {n}")
        if n > end - pos:
            raise _Malformed("truncated")
        return pos + max(n, 0)

    return step


def _struct_step(schema: type, nullable: bool) -> _Step:
    def step(view: memoryview, pos: int, end: int) -> int:
        if nullable:
            if pos >= end:
                raise _Malformed("truncated")
            pos += 1
            if view[pos - 1] == 0xFF:  # int8 -1 marks null; kio reads any other byte as present
                return pos
        return _walk(schema, view, pos, end)

    return step


def _array_step(
    item: _Step, item_size: int | None, flexible: bool, nullable: bool, name: str
) -> _Step:
    def step(view: memoryview, pos: int, end: int) -> int:
        n, pos = _read_length(view, pos, end, None if flexible else _SIZE)
        if n < 0:
            if n == -1 and nullable:
                return pos
            raise _Malformed(f"invalid count {n} for array {name}")
        if n > end - pos:
            raise _Malformed(f"array {name} of {n} items in {end - pos} bytes")
        if item_size is not None:
            if n * item_size > end - pos:
                raise _Malformed("truncated")
            return pos + n * item_size
        for _ in range(n):
            pos = item(view, pos, end)
        return pos

    return step


def _field_step(f: dataclasses.Field[Any], flexible: bool) -> _Step:
    kind = f.type
    nullable = get_origin(kind) in (UnionType, Union)
    if nullable:
        kind = next(arg for arg in get_args(kind) if arg is not NoneType)
    is_array = get_origin(kind) is tuple
    item_type = get_args(kind)[0] if is_array else kind
    # For an array, nullability belongs to the array; its items are never null.
    nullable_item = nullable and not is_array
    item_size: int | None = None
    if dataclasses.is_dataclass(item_type):
        item = _struct_step(item_type, nullable_item)
    else:
        kafka_type = f.metadata["kafka_type"]
        item_size = _FIXED_SIZES.get(kafka_type)
        if item_size is not None:
            item = _fixed_step(item_size)
        elif kafka_type in _LEGACY_LENGTHS:
            legacy = None if flexible else _LEGACY_LENGTHS[kafka_type]
            item = _sized_step(legacy, nullable_item, kafka_type)
        else:
            raise TypeError(f"{f.name}: no wire layout known for kafka_type {kafka_type!r}")
    if not is_array:
        return item
    return _array_step(item, item_size, flexible, nullable, f.name)


@functools.cache
def _plan(schema: type) -> tuple[tuple[_Step, ...], dict[int, _Step] | None]:
    """A schema's steps, and its tagged fields' steps by tag (None when not flexible)."""
    flexible: bool = schema.__flexible__  # type: ignore[attr-defined]
    steps: list[_Step] = []
    tagged: dict[int, _Step] = {}
    for f in dataclasses.fields(schema):
        tag = f.metadata.get("tag")
        if tag is None:
            steps.append(_field_step(f, flexible))
        else:
            tagged[tag] = _field_step(f, flexible)
    return tuple(steps), (tagged if flexible else None)


def _walk(schema: type, view: memoryview, pos: int, end: int) -> int:
    steps, tagged = _plan(schema)
    for step in steps:
        pos = step(view, pos, end)
    if tagged is not None:
        pos = _tagged_fields(view, pos, end, tagged, schema.__name__)
    return pos


# --- frame buffer ------------------------------------------------------------------------

# Frames up to this size are cut out of one reused buffer; larger ones (produce requests,
# mostly) get a buffer of their own, which the rest of the frame is read straight into.
SCRATCH_BYTES: Final = 64 * 1024
_PREFIX: Final = _SIZE.size  # bytes of a frame's size prefix


class FrameBuffer:
    """Collects a connection's bytes and hands out complete frames, sans-IO.

    The bytes go straight where they belong (asyncio's ``BufferedProtocol`` reads into
    :meth:`get_buffer`, then reports :meth:`buffer_updated`), or are copied in with
    :meth:`feed`; :meth:`next_frame` returns complete frames until it returns None. Frames
    come without their size prefix: a ``bytes`` copy when small, the ``bytearray`` they were
    read into when larger than the scratch buffer (read once, never copied). After a
    :class:`ProtocolError` the stream cannot be resynchronised: close the connection.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size  # checked as each size prefix arrives
        self._scratch = bytearray(SCRATCH_BYTES)
        self._start = 0  # unread bytes of the scratch buffer are [_start, _end)
        self._end = 0
        self._big: bytearray | None = None  # a frame larger than the scratch buffer, being read
        self._big_filled = 0

    def get_buffer(self) -> memoryview:
        """Where the next bytes received should go (any number up to its length)."""
        big = self._big
        if big is not None and self._big_filled < len(big):
            return memoryview(big)[self._big_filled :]
        # (A whole big frame not yet taken: what follows it goes to the scratch buffer.)
        scratch = self._scratch
        if self._end == len(scratch):
            if self._start:
                # Make room: move the unread tail to the front.
                scratch[: self._end - self._start] = scratch[self._start : self._end]
                self._end -= self._start
                self._start = 0
            else:
                # Full of whole frames nobody has taken yet (a muted channel, a large feed):
                # a larger buffer, new rather than resized, since views of the old may live on.
                self._scratch = scratch = scratch + bytearray(len(scratch))
        return memoryview(scratch)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` bytes were written at the start of the last :meth:`get_buffer`."""
        big = self._big
        if big is not None and self._big_filled < len(big):
            self._big_filled += nbytes
        else:
            self._end += nbytes

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Copy in bytes received from the peer."""
        view = memoryview(data)
        while view:
            buffer = self.get_buffer()
            n = min(len(buffer), len(view))
            buffer[:n] = view[:n]
            self.buffer_updated(n)
            view = view[n:]

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned in a frame."""
        return self._end - self._start + (self._big_filled if self._big is not None else 0)

    def next_frame(self) -> bytes | bytearray | None:
        """The next complete frame, or None while more bytes are needed.

        Raises :class:`InvalidFrameSizeError` as soon as a size prefix is negative or
        exceeds ``max_frame_size``, before the frame's bytes arrive.
        """
        big = self._big
        if big is not None:
            if self._big_filled < len(big):
                return None
            self._big = None
            return big
        start = self._start
        end = self._end
        if end - start < _PREFIX:
            return None
        scratch = self._scratch
        (size,) = _SIZE.unpack_from(scratch, start)
        if size < 0 or size > self.max_frame_size:
            raise InvalidFrameSizeError(size, self.max_frame_size)
        have = end - start - _PREFIX
        if have >= size:
            begin = start + _PREFIX
            frame = bytes(scratch[begin : begin + size])
            if begin + size == end:
                self._start = self._end = 0
            else:
                self._start = begin + size
            return frame
        if size + _PREFIX > len(scratch):
            big = bytearray(size)
            big[:have] = scratch[start + _PREFIX : end]
            self._start = self._end = 0
            self._big, self._big_filled = big, have
        return None
