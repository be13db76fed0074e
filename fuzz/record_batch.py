"""Target ``record_batch``: a partition's records in a Produce request, validated as the
leader validates them before appending.

Input: one flags byte, then the records.  Flags: bit 0 a compacted topic (every record's key
is read, decompressing the batch), bit 1 LogAppendTime (else CreateTime, whose timestamp
check reads the records of a batch out of range), bit 2 the CRC-32C of every whole batch is
recomputed first (so the fuzzer gets past the checksum to the records and codecs), bit 3 an
append from a coordinator (control batches allowed).

Entry: ``protocol.produce_request.validate_records`` (the replica manager), then
``log.log_validator.validate_produced`` and ``assign_offsets`` (``Log.append_as_leader``); a
magic 0/1 message set goes through ``protocol.legacy_records.up_convert`` (Produce v0-v2).

Property: only ``KafkaError`` is raised (an error code in the partition's answer).  Batches
that pass get contiguous offsets from 0 and keep a valid CRC once rewritten; an
up-converted message set is one v2 batch with a valid CRC whose records decode.
"""

from __future__ import annotations

import struct

from odradek.config import LogConfig
from odradek.log.log_validator import assign_offsets, validate_produced
from odradek.protocol.errors import KafkaError
from odradek.protocol.legacy_records import is_legacy_message_set, up_convert
from odradek.protocol.produce_request import validate_records
from odradek.protocol.records import CRC_OFFSET, check_crc, compute_crc, decode_batch, iter_batches

ALLOWED = (KafkaError,)

COMPACT, LOG_APPEND_TIME, FIX_CRC, FROM_COORDINATOR = 1, 2, 4, 8
NOW_MS = 1_700_000_000_000
_UINT32 = struct.Struct(">I")

_CONFIGS = {
    (compact, append_time): LogConfig(cleanup_policy=("compact",) if compact else ("delete",),
                                      message_timestamp_type="LogAppendTime" if append_time else "CreateTime")
    for compact in (False, True) for append_time in (False, True)
}


def test_one_input(data: bytes) -> None:
    if not data:
        return
    flags, records = data[0], bytearray(data[1:])
    if flags & FIX_CRC:
        _fix_crcs(records)
    if is_legacy_message_set(records):
        _check_up_conversion(records)
        return
    try:
        end = validate_records(records)
        config = _CONFIGS[bool(flags & COMPACT), bool(flags & LOG_APPEND_TIME)]
        batches = validate_produced(memoryview(records)[:end], config, NOW_MS,
                                    from_client=not flags & FROM_COORDINATOR)
    except ALLOWED:
        return
    append_time = NOW_MS if flags & LOG_APPEND_TIME else None
    assigned = assign_offsets(records, batches, 0, 5, append_time, lambda *_: None)
    next_offset = 0
    for (pos, header), (info_pos, size, last, _ts) in zip(batches, assigned.infos, strict=True):
        assert (info_pos, size) == (pos, header.size)
        assert last == next_offset + header.last_offset_delta, "offsets are not contiguous"
        next_offset = last + 1
    for pos, header in iter_batches(memoryview(records)[:end]):
        check_crc(records, pos, header)  # a rewrite that broke the checksum raises: not allowed here
    assert assigned.last_offset == next_offset - 1


def _fix_crcs(records: bytearray) -> None:
    try:
        for pos, header in iter_batches(records, partial_tail_ok=True):
            _UINT32.pack_into(records, pos + CRC_OFFSET, compute_crc(records, pos, header))
    except ALLOWED:
        pass  # a header that does not parse: leave the rest as it is


def _check_up_conversion(records: bytearray) -> None:
    try:
        converted = up_convert(records)
    except ALLOWED:
        return
    header, decoded = decode_batch(converted)  # raises on a bad CRC or undecodable records
    assert header.size == len(converted)
    assert len(decoded) == header.records_count > 0
