"""ProduceResponse (v0-v9) written by hand: the whole response frame in one pass of struct
packs, instead of building kio dataclasses and running kio's generic writer.

The bytes are those ``framing.encode_response`` writes for the kio ProduceResponse that
``broker.apis.produce`` builds (a test checks every version over random inputs), including
its one conversion: a negative log append time goes out as -1 (kio's "no timestamp").
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.protocol.varint import encode_uvarint

__all__ = ["ProducedPartition", "encode_produce_response"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
# index, error code, base offset, log append time (v2+), log start offset (v5+)
_PARTITION_V0 = struct.Struct(">ihq")
_PARTITION_V2 = struct.Struct(">ihqq")
_PARTITION_V5 = struct.Struct(">ihqqq")
_NULL_LEGACY_STRING = b"\xff\xff"
_NULL_COMPACT_STRING = b"\x00"
_NO_TAGGED_FIELDS = b"\x00"


@dataclass(slots=True)
class ProducedPartition:
    index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int = -1  # negative: none (CreateTime topics), sent as -1
    log_start_offset: int = -1  # v5+
    # v8+ (KIP-467): (batch index, error message) of each record that made the batch fail
    record_errors: tuple[tuple[int, str | None], ...] = ()
    error_message: str | None = None  # v8+


def _string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return _NULL_COMPACT_STRING if flexible else _NULL_LEGACY_STRING
    raw = value.encode()
    return (encode_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def encode_produce_response(correlation_id: int, version: int,
                            topics: Sequence[tuple[str, Sequence[ProducedPartition]]],
                            throttle_time_ms: int = 0) -> bytes:
    """The response frame (size prefix, response header, body) for Produce ``version``.

    ``topics`` is (topic name, its partitions) in response order.
    """
    if not 0 <= version <= 9:
        raise ValueError(f"produce response version {version} is not supported here")
    flexible = version >= 9
    with_log_start = version >= 5
    with_append_time = version >= 2
    with_errors = version >= 8
    head = _PARTITION_V5 if with_log_start else _PARTITION_V2
    out = bytearray(4)  # size prefix, patched at the end
    out += _I32.pack(correlation_id)
    if flexible:
        out += _NO_TAGGED_FIELDS  # response header v1
        out += encode_uvarint(len(topics) + 1)
    else:
        out += _I32.pack(len(topics))
    for name, partitions in topics:
        raw = name.encode()
        if flexible:
            out += encode_uvarint(len(raw) + 1)
            out += raw
            out += encode_uvarint(len(partitions) + 1)
        else:
            out += _I16.pack(len(raw))
            out += raw
            out += _I32.pack(len(partitions))
        for p in partitions:
            append_time = p.log_append_time_ms if p.log_append_time_ms >= 0 else -1
            if with_log_start:
                out += head.pack(p.index, p.error_code, p.base_offset, append_time, p.log_start_offset)
            elif with_append_time:
                out += head.pack(p.index, p.error_code, p.base_offset, append_time)
            else:
                out += _PARTITION_V0.pack(p.index, p.error_code, p.base_offset)
            if with_errors:
                errors = p.record_errors
                out += encode_uvarint(len(errors) + 1) if flexible else _I32.pack(len(errors))
                for batch_index, message in errors:
                    out += _I32.pack(batch_index)
                    out += _string(message, flexible)
                    if flexible:
                        out += _NO_TAGGED_FIELDS
                out += _string(p.error_message, flexible)
            if flexible:
                out += _NO_TAGGED_FIELDS  # partition
        if flexible:
            out += _NO_TAGGED_FIELDS  # topic
    if version >= 1:
        out += _I32.pack(throttle_time_ms)
    if flexible:
        out += _NO_TAGGED_FIELDS  # response
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
