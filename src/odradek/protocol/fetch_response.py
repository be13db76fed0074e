"""FetchResponse (v4-v12) written by hand as a list of chunks, so record batches are sent
straight from segment files (``FileChunk``s) instead of being copied into an encoded message.

A test decodes the output with kio's generated FetchResponse for every version.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from odradek.protocol.varint import encode_uvarint


class FileSlice(Protocol):
    """Bytes of a file to send as they are (the log's FileRegion, the server's FileChunk)."""

    fd: int
    position: int
    size: int


__all__ = ["FetchedPartition", "FileSlice", "encode_fetch_response"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihqq")  # partition, error, high watermark, last stable offset
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_NO_REPLICA = b"\xff\xff\xff\xff"
_EPOCH_END = struct.Struct(">iq")  # a diverging epoch: epoch, end offset  # preferred read replica: none (-1)


@dataclass(slots=True)
class FetchedPartition:
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    chunks: Sequence[FileSlice] = ()
    aborted_transactions_null: bool = True
    # read_committed fetches: (producer id, first offset) of each aborted transaction in range
    aborted_transactions: Sequence[tuple[int, int]] = ()
    preferred_read_replica: int = -1  # v11+ (KIP-392)
    diverging_epoch: tuple[int, int] | None = None  # v12+ (KIP-595): (epoch, end offset), tag 0


def encode_fetch_response(correlation_id: int, version: int, error_code: int, session_id: int,
                          topics: Sequence[tuple[str, Sequence[FetchedPartition]]],
                          throttle_time_ms: int = 0) -> list[bytes | FileSlice]:
    """The response frame (size prefix included) as chunks to write in order."""
    flexible = version >= 12
    parts: list[bytes | FileSlice] = []
    head = bytearray()
    head += _I32.pack(correlation_id)
    if flexible:
        head += b"\x00"  # response header v1: no tagged fields
    head += _I32.pack(throttle_time_ms)
    if version >= 7:
        head += _I16.pack(error_code) + _I32.pack(session_id)
    head += encode_uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    for name, partitions in topics:
        raw = name.encode()
        head += (encode_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw
        head += encode_uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for p in partitions:
            head += _PARTITION_HEAD.pack(p.partition, p.error_code, p.high_watermark, p.last_stable_offset)
            if version >= 5:
                head += _I64.pack(p.log_start_offset)
            if p.aborted_transactions_null:
                head += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                aborted = p.aborted_transactions
                head += encode_uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for producer_id, first_offset in aborted:
                    head += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        head += b"\x00"  # aborted transaction tagged fields
            if version >= 11:
                replica = p.preferred_read_replica
                head += _NO_REPLICA if replica < 0 else _I32.pack(replica)
            size = sum(c.size for c in p.chunks)
            head += encode_uvarint(size + 1) if flexible else _I32.pack(size)
            if p.chunks:
                parts.append(bytes(head))
                parts.extend(p.chunks)
                head = bytearray()
            if flexible:
                diverging = p.diverging_epoch
                if diverging is None:
                    head += b"\x00"  # partition tagged fields
                else:
                    # One tagged field: DivergingEpoch (tag 0, 13 bytes: epoch, end offset, no tags).
                    head += b"\x01\x00\x0d" + _EPOCH_END.pack(*diverging) + b"\x00"
        if flexible:
            head += b"\x00"  # topic tagged fields
    if flexible:
        head += b"\x00"  # response tagged fields
    parts.append(bytes(head))
    total = sum(len(c) if isinstance(c, bytes) else c.size for c in parts)
    parts.insert(0, _I32.pack(total))
    return parts
