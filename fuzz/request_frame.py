"""Target ``request_frame``: the bytes a client sends, read as the broker reads them.

Entry: a :class:`~odradek.net.kafka_channel.KafkaChannel` (the socket server's sans-IO
connection, with the broker's answer to unsupported ApiVersions versions) is fed the input as
the byte stream of one connection; each request it hands out is read as its handler reads it:
Produce by ``protocol.produce_request.parse_produce_request``, then each partition's records
by ``validate_records`` (v3+, the replica manager) or the legacy up-conversion (v0-v2, the
produce handler); Fetch by ``protocol.fetch_request.parse_fetch_request``; every other api
(ControlledShutdown, LeaderAndIsr, StopReplica and UpdateMetadata of ``protocol.control``
among them) by ``protocol.framing.decode_request``, the frame walker in front of kio.

Property: the channel never raises (a bad size prefix or header closes it: ``closing``); a
body reader raises nothing but ``ProtocolError`` (the server closes the connection:
``net.server.Connection._handler_failed``); a partition's records raise nothing but
``KafkaError`` (an error code in that partition's answer).  Anything else escaping would be
logged by the server as a handler failure: a crash.

Frames are capped at 1 MiB here (the broker's ``socket.request.max.bytes`` is 100 MiB) so
that a forged size costs the fuzzer no large allocation.
"""

from __future__ import annotations

from odradek.broker.apis.api_versions import unsupported_api_versions
from odradek.net.kafka_channel import KafkaChannel, Request
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import KafkaError
from odradek.protocol.fetch_request import parse_fetch_request
from odradek.protocol.framing import ProtocolError, decode_request
from odradek.protocol.legacy_records import is_legacy_message_set, up_convert
from odradek.protocol.produce_request import parse_produce_request, validate_records

MAX_FRAME_BYTES = 1 << 20

ALLOWED_FROM_BODY = (ProtocolError,)
ALLOWED_FROM_RECORDS = (KafkaError,)


def test_one_input(data: bytes) -> None:
    channel = KafkaChannel(max_request_bytes=MAX_FRAME_BYTES, on_unsupported=unsupported_api_versions)
    channel.frames.feed(data)
    while (request := channel.next_request()) is not None:
        try:
            read_body(request)
        except ALLOWED_FROM_BODY:
            return  # the server closes the connection
        channel.respond(request, None)


def read_body(request: Request) -> None:
    """Read a request's body as its handler does (see the module docstring)."""
    key, version = request.api_key, request.api_version
    if key == ApiKey.PRODUCE:
        body = parse_produce_request(request.frame, request.body_offset, version)
        for _topic, _partition, records in body.partitions:
            try:
                if version >= 3:
                    validate_records(records)
                elif records is not None and is_legacy_message_set(records):
                    up_convert(records)
            except ALLOWED_FROM_RECORDS:
                pass
    elif key == ApiKey.FETCH:
        parse_fetch_request(request.frame, request.body_offset, version)
    else:
        decode_request(request.frame)
