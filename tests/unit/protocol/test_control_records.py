"""Control record keys, end-transaction marker values and marker batches.

The expected bytes are written out by hand from Kafka's ``ControlRecordType``,
``EndTransactionMarker`` and ``DefaultRecord`` layouts, not produced by the codec under test.
"""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol import records
from odradek.protocol.control_records import (
    ControlRecordType,
    build_end_txn_marker_batch,
    decode_control_record_key,
    decode_end_txn_marker,
    decode_end_txn_marker_value,
    encode_control_record_key,
    encode_end_txn_marker_value,
)
from odradek.protocol.errors import CorruptMessageError, InvalidRecordError

INT64 = st.integers(-2**63, 2**63 - 1)
INT32 = st.integers(-2**31, 2**31 - 1)
INT16 = st.integers(-2**15, 2**15 - 1)
MARKERS = st.sampled_from([ControlRecordType.COMMIT, ControlRecordType.ABORT])


def test_key_bytes_are_version_then_type() -> None:
    assert encode_control_record_key(ControlRecordType.ABORT) == b"\x00\x00\x00\x00"
    assert encode_control_record_key(ControlRecordType.COMMIT) == b"\x00\x00\x00\x01"
    assert encode_control_record_key(ControlRecordType.LEADER_CHANGE) == b"\x00\x00\x00\x02"


def test_value_bytes_are_version_then_coordinator_epoch() -> None:
    assert encode_end_txn_marker_value(5) == b"\x00\x00" + b"\x00\x00\x00\x05"
    assert encode_end_txn_marker_value(-1) == b"\x00\x00" + b"\xff\xff\xff\xff"


@pytest.mark.parametrize("record_type", [ControlRecordType.ABORT, ControlRecordType.COMMIT,
                                         ControlRecordType.LEADER_CHANGE])
def test_key_round_trip(record_type: ControlRecordType) -> None:
    assert decode_control_record_key(encode_control_record_key(record_type)) is record_type


@given(INT32)
def test_value_round_trip(epoch: int) -> None:
    assert decode_end_txn_marker_value(encode_end_txn_marker_value(epoch)) == epoch


def test_unknown_type_ids_decode_as_unknown() -> None:
    assert decode_control_record_key(b"\x00\x00\x00\x07") is ControlRecordType.UNKNOWN
    assert decode_control_record_key(b"\x00\x00\xff\xff") is ControlRecordType.UNKNOWN
    with pytest.raises(ValueError, match="UNKNOWN"):
        encode_control_record_key(ControlRecordType.UNKNOWN)


def test_newer_versions_parse_as_version_0_and_ignore_trailing_bytes() -> None:
    assert decode_control_record_key(b"\x00\x03\x00\x01extra") is ControlRecordType.COMMIT
    assert decode_end_txn_marker_value(b"\x00\x01\x00\x00\x00\x09more") == 9


def test_negative_versions_are_corrupt() -> None:
    with pytest.raises(CorruptMessageError, match="version"):
        decode_control_record_key(b"\xff\xff\x00\x01")
    with pytest.raises(CorruptMessageError, match="version"):
        decode_end_txn_marker_value(b"\x80\x00\x00\x00\x00\x01")


@pytest.mark.parametrize("data", [None, b"", b"\x00\x00\x00"])
def test_short_key_is_corrupt(data: bytes | None) -> None:
    with pytest.raises(CorruptMessageError, match="at least 4 bytes"):
        decode_control_record_key(data)


@pytest.mark.parametrize("data", [None, b"", b"\x00\x00\x00\x00\x05"])
def test_short_value_is_corrupt(data: bytes | None) -> None:
    with pytest.raises(CorruptMessageError, match="at least 6 bytes"):
        decode_end_txn_marker_value(data)


def test_commit_batch_bytes() -> None:
    batch = build_end_txn_marker_batch(ControlRecordType.COMMIT, producer_id=1000,
                                       producer_epoch=3, coordinator_epoch=5, timestamp=1234,
                                       base_offset=42, partition_leader_epoch=7)
    # One DefaultRecord: length 16 (zigzag 0x20), attributes, timestamp delta, offset delta,
    # key length 4 (0x08) + key, value length 6 (0x0c) + value, no headers.
    record = (b"\x20" b"\x00" b"\x00" b"\x00" b"\x08" b"\x00\x00\x00\x01"
              b"\x0c" b"\x00\x00\x00\x00\x00\x05" b"\x00")
    after_crc = struct.pack(">hiqqqhii", 0x30, 0, 1234, 1234, 1000, 3, -1, 1) + record
    expected = (struct.pack(">qiib", 42, 4 + 1 + 4 + len(after_crc), 7, 2)
                + struct.pack(">I", crc32c.crc32c(after_crc)) + after_crc)
    assert batch == expected
    assert len(batch) == 78  # RECORD_BATCH_OVERHEAD + CURRENT_END_TXN_SCHEMA_RECORD_SIZE


@given(MARKERS, INT64, INT16, INT32, st.integers(0, 2**62), st.integers(-1, 2**31 - 1),
       st.integers(0, 2**62))
def test_built_batch_parses_and_round_trips(marker: ControlRecordType, producer_id: int,
                                            producer_epoch: int, coordinator_epoch: int,
                                            base_offset: int, leader_epoch: int,
                                            timestamp: int) -> None:
    batch = build_end_txn_marker_batch(marker, producer_id=producer_id,
                                       producer_epoch=producer_epoch,
                                       coordinator_epoch=coordinator_epoch, timestamp=timestamp,
                                       base_offset=base_offset,
                                       partition_leader_epoch=leader_epoch)
    header = records.parse_header(batch)
    assert header.is_control and header.is_transactional
    assert header.records_count == 1 and header.last_offset_delta == 0
    assert header.size == len(batch)
    assert header.compression is records.CompressionType.NONE
    assert (header.base_offset, header.partition_leader_epoch) == (base_offset, leader_epoch)
    assert (header.producer_id, header.producer_epoch) == (producer_id, producer_epoch)
    assert header.base_sequence == records.NO_SEQUENCE
    assert header.base_timestamp == header.max_timestamp == timestamp
    _, (record,) = records.decode_batch(batch)  # checks the CRC
    assert record.offset == base_offset and record.timestamp == timestamp
    assert decode_end_txn_marker(batch) == (marker, coordinator_epoch)


def test_corrupted_batch_fails_its_crc() -> None:
    batch = bytearray(build_end_txn_marker_batch(ControlRecordType.ABORT, producer_id=1,
                                                 producer_epoch=0, coordinator_epoch=2,
                                                 timestamp=0))
    batch[-2] ^= 0x01  # inside the coordinator epoch
    with pytest.raises(CorruptMessageError, match="crc"):
        decode_end_txn_marker(bytes(batch))


@pytest.mark.parametrize("cut", [0, 10, records.HEADER_SIZE - 1, records.HEADER_SIZE, 77])
def test_truncated_batch_is_corrupt(cut: int) -> None:
    batch = build_end_txn_marker_batch(ControlRecordType.COMMIT, producer_id=1,
                                       producer_epoch=0, coordinator_epoch=2, timestamp=0)
    with pytest.raises(CorruptMessageError):
        decode_end_txn_marker(batch[:cut])


def test_only_commit_and_abort_are_markers() -> None:
    for record_type in (ControlRecordType.LEADER_CHANGE, ControlRecordType.UNKNOWN):
        with pytest.raises(ValueError, match="COMMIT or ABORT"):
            build_end_txn_marker_batch(record_type, producer_id=1, producer_epoch=0,
                                       coordinator_epoch=0, timestamp=0)


def test_data_batch_is_not_a_marker() -> None:
    batch = records.build_batch([records.SimpleRecord(b"\x00\x00\x00\x00\x00\x01",
                                                      key=b"\x00\x00\x00\x01")],
                                producer_id=1, producer_epoch=0, is_transactional=True)
    with pytest.raises(InvalidRecordError, match="not a control batch"):
        decode_end_txn_marker(batch)


def test_leader_change_control_batch_is_not_a_marker() -> None:
    plain = records.build_batch([records.SimpleRecord(b"\x00\x00", key=b"\x00\x00\x00\x02")])
    control = records.encode_batch(plain[records.HEADER_SIZE:], base_offset=0,
                                   last_offset_delta=0, records_count=1, attributes=0x20,
                                   base_timestamp=0, max_timestamp=0, partition_leader_epoch=0,
                                   producer_id=-1, producer_epoch=-1, base_sequence=-1)
    with pytest.raises(InvalidRecordError, match="LEADER_CHANGE"):
        decode_end_txn_marker(control)
