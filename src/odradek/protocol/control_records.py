"""Kafka's control records: ``ControlRecordType`` keys and ``EndTransactionMarker`` values.

A control batch (attribute bit 5) carries records that are not user data. The ones a
ZooKeeper-mode broker writes are the end-transaction markers (KIP-98): one record whose key
names COMMIT or ABORT and whose value carries the transaction coordinator's epoch. The
transaction coordinator sends them in WriteTxnMarkers; the partition leader appends the
batch this module builds, and the log, the producer state manager and the fetch path read
it back with :func:`decode_end_txn_marker`. Sans-IO: bytes in, bytes out.

Layouts (big-endian), Kafka's ``ControlRecordType`` and ``EndTransactionMarker``::

    key   = version int16 (0) + type int16      ABORT=0, COMMIT=1, LEADER_CHANGE=2 (KIP-595)
    value = version int16 (0) + coordinatorEpoch int32

As in Kafka, a key or value of a newer version is parsed as version 0 (its leading fields
are the same; trailing bytes are ignored); a negative version is corruption.
"""

from __future__ import annotations

import struct
from enum import IntEnum

from odradek.protocol.errors import CorruptMessageError, InvalidRecordError
from odradek.protocol.records import (
    HEADER_SIZE,
    NO_SEQUENCE,
    SimpleRecord,
    build_batch,
    decode_batch,
    encode_batch,
    parse_header,
)

__all__ = [
    "CONTROL_RECORD_KEY_SIZE",
    "CONTROL_RECORD_KEY_VERSION",
    "END_TXN_MARKER_VALUE_SIZE",
    "END_TXN_MARKER_VERSION",
    "ControlRecordType",
    "build_end_txn_marker_batch",
    "decode_control_record_key",
    "decode_end_txn_marker",
    "decode_end_txn_marker_value",
    "encode_control_record_key",
    "encode_end_txn_marker_value",
]

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")

CONTROL_RECORD_KEY_VERSION = 0  # Kafka's CURRENT_CONTROL_RECORD_KEY_VERSION
CONTROL_RECORD_KEY_SIZE = _KEY.size  # 4
END_TXN_MARKER_VERSION = 0  # Kafka's CURRENT_END_TXN_MARKER_VERSION
END_TXN_MARKER_VALUE_SIZE = _VALUE.size  # 6

# Attribute bits of a v2 batch (Kafka's DefaultRecordBatch): transactional and control.
_TRANSACTIONAL_FLAG = 0x10
_CONTROL_FLAG = 0x20


class ControlRecordType(IntEnum):
    """Kafka's ``ControlRecordType``; UNKNOWN stands for any type id this broker does not know
    (Kafka's clients skip such records rather than fail)."""

    ABORT = 0
    COMMIT = 1
    # Written by KRaft quorums (KIP-595), never by a ZooKeeper-mode broker. Numbered as from
    # Kafka 3.0; 2.8's early-access KRaft had QUORUM_REASSIGNMENT=2 and LEADER_CHANGE=3.
    LEADER_CHANGE = 2
    UNKNOWN = -1

    @classmethod
    def from_type_id(cls, type_id: int) -> ControlRecordType:
        """Kafka's ``fromTypeId``: the type for an id, UNKNOWN for one not listed."""
        if type_id < 0:
            return cls.UNKNOWN
        try:
            return cls(type_id)
        except ValueError:
            return cls.UNKNOWN


_END_TXN_TYPES = (ControlRecordType.ABORT, ControlRecordType.COMMIT)


def _field_after_version(data: bytes | bytearray | memoryview | None, layout: struct.Struct,
                         what: str) -> int:
    """The field after the int16 version of a key or value laid out as ``layout``; bytes
    past it (a newer version's) are ignored, a short one or a negative version is corrupt."""
    if data is None or len(data) < layout.size:
        found = 0 if data is None else len(data)
        raise CorruptMessageError(f"{what} must have at least {layout.size} bytes, found {found}")
    version, field = layout.unpack_from(data, 0)
    if version < 0:
        raise CorruptMessageError(f"{what} has invalid version {version}")
    return field


def encode_control_record_key(record_type: ControlRecordType) -> bytes:
    """The 4-byte key of a control record of ``record_type`` (Kafka's ``recordKey``)."""
    if record_type is ControlRecordType.UNKNOWN:
        raise ValueError("cannot encode a control record key of UNKNOWN type")
    return _KEY.pack(CONTROL_RECORD_KEY_VERSION, record_type)


def decode_control_record_key(key: bytes | bytearray | memoryview | None) -> ControlRecordType:
    """The type named by a control record key (Kafka's ``ControlRecordType.parse``).

    Raises CorruptMessageError for a key shorter than 4 bytes or with a negative version.
    """
    return ControlRecordType.from_type_id(_field_after_version(key, _KEY, "control record key"))


def encode_end_txn_marker_value(coordinator_epoch: int) -> bytes:
    """The 6-byte value of an end-transaction marker (Kafka's ``EndTransactionMarker``)."""
    return _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def decode_end_txn_marker_value(value: bytes | bytearray | memoryview | None) -> int:
    """The coordinator epoch in an end-transaction marker value (Kafka's
    ``deserializeValue``); bytes after the first six, from a newer version, are ignored."""
    return _field_after_version(value, _VALUE, "end transaction marker value")


def build_end_txn_marker_batch(marker: ControlRecordType, *, producer_id: int,
                               producer_epoch: int, coordinator_epoch: int, timestamp: int,
                               base_offset: int = 0, partition_leader_epoch: int = -1) -> bytes:
    """One v2 batch holding one COMMIT or ABORT marker, as Kafka's
    ``MemoryRecords.withEndTransactionMarker`` writes it: transactional and control bits set,
    no compression, CreateTime, the producer's id and epoch, base sequence -1, CRC-32C.
    """
    if marker not in _END_TXN_TYPES:
        raise ValueError(f"an end transaction marker is COMMIT or ABORT, not {marker!r}")
    record = SimpleRecord(key=encode_control_record_key(marker),
                          value=encode_end_txn_marker_value(coordinator_epoch))
    # build_batch encodes the record; an uncompressed batch's bytes after the header are
    # exactly the records, which encode_batch wraps again with the control bit added.
    plain = build_batch([record], timestamp=timestamp)
    return encode_batch(plain[HEADER_SIZE:], base_offset=base_offset, last_offset_delta=0,
                        records_count=1, attributes=_TRANSACTIONAL_FLAG | _CONTROL_FLAG,
                        base_timestamp=timestamp, max_timestamp=timestamp,
                        partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE)


def decode_end_txn_marker(batch: bytes | bytearray | memoryview
                          ) -> tuple[ControlRecordType, int]:
    """``(COMMIT or ABORT, coordinator epoch)`` from a marker batch, CRC checked.

    As Kafka does, only the batch's first record is read. Raises CorruptMessageError for a
    truncated or corrupt batch or record, InvalidRecordError for a batch that is not a
    control batch or whose control record is not an end-transaction marker.
    """
    header = parse_header(batch)
    if not header.is_control:
        raise InvalidRecordError(f"batch at offset {header.base_offset} is not a control batch")
    _, records = decode_batch(batch)
    if not records:
        raise CorruptMessageError(f"control batch at offset {header.base_offset} has no records")
    record_type = decode_control_record_key(records[0].key)
    if record_type not in _END_TXN_TYPES:
        raise InvalidRecordError(f"control record at offset {records[0].offset} is "
                                 f"{record_type.name}, not an end transaction marker")
    return record_type, decode_end_txn_marker_value(records[0].value)
