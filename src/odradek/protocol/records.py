"""Record batch v2 (magic 2): header parsing, CRC-32C, in-place offset rewrite.

The broker never decodes records on the produce/fetch path (DESIGN.md, principle 3). The
functions at the top of this module work on batch *headers* only: they walk a ``records``
byte string batch by batch, check bounds, magic and CRC, and patch the fields that are
outside the CRC (base offset, partition leader epoch). The record decoder, the codecs and
the batch builder at the bottom are for tests, tools and the rare lookup that needs one
record's timestamp (ListOffsets by time); they are never called per produced batch.

Layout (all big-endian), Kafka's ``DefaultRecordBatch``::

    0  baseOffset int64          21 attributes int16        43 producerId int64
    8  batchLength int32         23 lastOffsetDelta int32   51 producerEpoch int16
    12 partitionLeaderEpoch int32 27 baseTimestamp int64     53 baseSequence int32
    16 magic int8                35 maxTimestamp int64      57 recordsCount int32
    17 crc uint32 (CRC-32C of bytes 21..end)                61 records...
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NamedTuple

import crc32c as _crc32c
from kio.schema.errors import ErrorCode

from odradek.protocol.errors import CorruptMessageError, InvalidRecordError, for_code
from odradek.protocol.varint import VarintError, encode_varlong, read_uvarint, read_varlong

__all__ = [
    "ATTRIBUTES_OFFSET",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "MAGIC_OFFSET",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "PRODUCER_ID_OFFSET",
    "TRANSACTIONAL_MASK",
    "CompressionType",
    "Record",
    "RecordBatchHeader",
    "SimpleRecord",
    "TimestampType",
    "build_batch",
    "check_crc",
    "compress",
    "compute_crc",
    "decode_batch",
    "decompress",
    "encode_batch",
    "iter_batches",
    "parse_header",
    "set_base_offset",
    "set_log_append_time",
    "set_partition_leader_epoch",
]

# Field offsets inside a batch.
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
HEADER_SIZE = 61  # Kafka's RECORD_BATCH_OVERHEAD
LOG_OVERHEAD = 12  # baseOffset + batchLength: what precedes the length-counted part
MAGIC = 2

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_INT32_MAX = 2**31 - 1

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10  # of the attributes; it lies in their low (second) byte
_CONTROL_MASK = 0x20

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class CompressionType(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class RecordBatchHeader(NamedTuple):
    """The 61-byte header of one record batch, as stored.

    A NamedTuple rather than a frozen dataclass: one is built per batch on the produce
    path, and ``tuple.__new__`` costs a fraction of a frozen dataclass's ``__init__``.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes this batch occupies in a log: the 12-byte prefix plus ``batch_length``."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> CompressionType:
        try:
            return CompressionType(self.attributes & _COMPRESSION_MASK)
        except ValueError:
            raise CorruptMessageError(
                f"unknown compression codec {self.attributes & _COMPRESSION_MASK}") from None

    @property
    def timestamp_type(self) -> TimestampType:
        return (TimestampType.LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_MASK
                else TimestampType.CREATE_TIME)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """The sequence of the last record; sequences wrap from INT32_MAX to 0 as in Kafka."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (_INT32_MAX + 1)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> RecordBatchHeader:
    """Parse the batch header at ``pos``; checks that the header fits and the magic is 2.

    Raises CorruptMessageError for a truncated or malformed header and InvalidRecordError
    for magic 0/1 (Kafka's answer to a v3+ Produce carrying legacy message sets).
    """
    if len(buf) - pos < HEADER_SIZE:
        # The magic byte may still be readable: report legacy formats for what they are.
        if len(buf) - pos > MAGIC_OFFSET and buf[pos + MAGIC_OFFSET] in (0, 1):
            raise InvalidRecordError(f"record batch at {pos} has magic {buf[pos + MAGIC_OFFSET]}; "
                                     "only magic 2 is supported")
        raise CorruptMessageError(f"record batch header at {pos} is truncated")
    header = RecordBatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        if header.magic in (0, 1):
            raise InvalidRecordError(f"record batch at {pos} has magic {header.magic}; "
                                     "only magic 2 is supported")
        raise CorruptMessageError(f"record batch at {pos} has invalid magic {header.magic}")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptMessageError(f"record batch at {pos} has length {header.batch_length}, "
                                  f"less than the minimum {HEADER_SIZE - LOG_OVERHEAD}")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptMessageError(f"record batch at {pos} has a negative offset delta or count")
    return header


def iter_batches(buf: bytes | bytearray | memoryview, *, partial_tail_ok: bool = False
                 ) -> Iterator[tuple[int, RecordBatchHeader]]:
    """Yield ``(position, header)`` for each batch in ``buf``, in order.

    Every batch must lie entirely inside ``buf``; a trailing fragment is corrupt unless
    ``partial_tail_ok`` (a fetch response may end in a cut batch), in which case iteration
    stops before it. CRCs are not checked here (see :func:`check_crc`).
    """
    end = len(buf)
    pos = 0
    while pos < end:
        if end - pos < HEADER_SIZE:
            if partial_tail_ok:
                return
            parse_header(buf, pos)  # raises with the precise reason
        header = parse_header(buf, pos)
        size = header.batch_length + LOG_OVERHEAD
        if pos + size > end:
            if partial_tail_ok:
                return
            raise CorruptMessageError(f"record batch at {pos} claims {size} bytes, "
                                      f"only {end - pos} remain")
        yield pos, header
        pos += size


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, header: RecordBatchHeader) -> int:
    """CRC-32C over attributes..end of the batch at ``pos`` (Kafka's checksum scope)."""
    view = memoryview(buf)
    return _crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET:pos + LOG_OVERHEAD + header.batch_length])


def check_crc(buf: bytes | bytearray | memoryview, pos: int, header: RecordBatchHeader) -> None:
    """Raise CorruptMessageError unless the stored CRC matches the batch's bytes."""
    actual = compute_crc(buf, pos, header)
    if actual != header.crc:
        raise CorruptMessageError(f"record batch at offset {header.base_offset} is corrupt "
                                  f"(stored crc = {header.crc}, computed crc = {actual})")


def set_base_offset(buf: bytearray | memoryview, pos: int, offset: int) -> None:
    """Rewrite the base offset in place (outside the CRC, so the CRC stays valid)."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite the partition leader epoch in place (outside the CRC)."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, header: RecordBatchHeader,
                        timestamp: int) -> None:
    """Stamp the batch with the broker's time: LogAppendTime bit, maxTimestamp, new CRC.

    As in Kafka, the records keep their own timestamps; readers of a LogAppendTime batch
    use maxTimestamp for every record.
    """
    attributes = header.attributes | _TIMESTAMP_TYPE_MASK
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    view = memoryview(buf)
    crc = _crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET:pos + LOG_OVERHEAD + header.batch_length])
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc)


# ------------------------------------------------------------------ codecs (tests and tools)

_SNAPPY_JAVA_MAGIC = b"\x82SNAPPY\x00"
# A raw snappy block's elements turn at most 3 bytes into 64 (a 2-byte-offset copy), so a block
# that claims more than 22 times its size is corrupt: its length must not size the output
# buffer (a 20-byte block claiming 4 GiB would be allocated; fuzz/record_batch.py found it).
_SNAPPY_MAX_EXPANSION = 22


def _pyarrow_codec(name: str) -> Any:  # pyarrow is optional: imported on first use
    try:
        import pyarrow
    except ImportError:
        raise for_code(ErrorCode.unsupported_compression_type)(
            f"{name} needs pyarrow (pip install odradek[spark])") from None
    return pyarrow


def decompress(codec: CompressionType, data: bytes | memoryview) -> bytes:
    """Decompress a batch's records section. gzip uses the standard library; snappy, lz4
    (frame format) and zstd use pyarrow when it is installed."""
    data = bytes(data)
    if codec is CompressionType.NONE:
        return data
    try:
        if codec is CompressionType.GZIP:
            return zlib.decompress(data, wbits=47)  # 32+15: gzip or zlib header
        pa = _pyarrow_codec(codec.name.lower())
        if codec is CompressionType.SNAPPY:
            return _snappy_decompress(pa, data)
        name = "lz4" if codec is CompressionType.LZ4 else "zstd"
        return bytes(pa.CompressedInputStream(pa.BufferReader(data), name).read())
    except (zlib.error, OSError, ValueError) as e:
        raise CorruptMessageError(f"cannot decompress {codec.name} records: {e}") from None
    except Exception as e:
        if type(e).__module__.startswith("pyarrow"):
            raise CorruptMessageError(f"cannot decompress {codec.name} records: {e}") from None
        raise


def _snappy_decompress(pa: Any, data: bytes) -> bytes:
    codec = pa.Codec("snappy")

    def raw(block: bytes) -> bytes:
        # Raw snappy starts with the uncompressed length (a VarintError is a ValueError).
        size, _ = read_uvarint(block, 0, len(block))
        if size > _SNAPPY_MAX_EXPANSION * len(block):
            raise ValueError(f"a snappy block of {len(block)} bytes claims {size} bytes uncompressed")
        return codec.decompress(block, decompressed_size=size, asbytes=True)

    if not data.startswith(_SNAPPY_JAVA_MAGIC):
        return raw(data)
    # xerial snappy-java framing (the Java client): 16-byte header, then [int32 len][block]*
    out = bytearray()
    pos = 16
    while pos < len(data):
        (length,) = _INT32.unpack_from(data, pos)
        out += raw(data[pos + 4:pos + 4 + length])
        pos += 4 + length
    return bytes(out)


def compress(codec: CompressionType, data: bytes) -> bytes:
    """Compress a records section (used by the test/tool batch builder)."""
    if codec is CompressionType.NONE:
        return data
    if codec is CompressionType.GZIP:
        return gzip.compress(data)
    pa = _pyarrow_codec(codec.name.lower())
    name = {CompressionType.SNAPPY: "snappy", CompressionType.LZ4: "lz4",
            CompressionType.ZSTD: "zstd"}[codec]
    return pa.Codec(name).compress(data, asbytes=True)


# --------------------------------------------------------------- records (tests and tools)


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with its absolute offset and effective timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    """A record to build: ``timestamp=None`` takes the builder's default timestamp."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None


def _read_bytes(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = read_varlong(buf, pos, end)
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptMessageError("record field runs past the end of the batch")
    return buf[pos:pos + length], pos + length


def decode_batch(batch: bytes | bytearray | memoryview, *, verify_crc: bool = True
                 ) -> tuple[RecordBatchHeader, list[Record]]:
    """Decode one whole batch (header, CRC check, decompression, records).

    Not for the hot path: it costs Python work per record.  ``verify_crc=False`` reads the
    records of a batch whose CRC does not match, as Kafka's DumpLogSegments does.
    """
    header = parse_header(batch)
    if header.size > len(batch):
        raise CorruptMessageError("record batch is truncated")
    if verify_crc:
        check_crc(batch, 0, header)
    payload = decompress(header.compression, memoryview(batch)[HEADER_SIZE:header.size])
    try:
        records = _decode_records(header, payload)
    except VarintError as e:
        raise CorruptMessageError(f"record batch at offset {header.base_offset}: {e}") from None
    return header, records


def _decode_records(header: RecordBatchHeader, payload: bytes) -> list[Record]:
    # Every field of a v2 record is a varlong here (Kafka's DefaultRecord reads most of them
    # as 32-bit varints; a value that needs more fails the length checks all the same).
    log_append = header.timestamp_type is TimestampType.LOG_APPEND_TIME
    records: list[Record] = []
    size = len(payload)
    pos = 0
    for _ in range(header.records_count):
        length, pos = read_varlong(payload, pos, size)
        end = pos + length
        if length < 0 or end > size:
            raise CorruptMessageError("record length runs past the end of the batch")
        pos += 1  # record attributes: unused in v2
        ts_delta, pos = read_varlong(payload, pos, size)
        offset_delta, pos = read_varlong(payload, pos, size)
        key, pos = _read_bytes(payload, pos, size)
        value, pos = _read_bytes(payload, pos, size)
        count, pos = read_varlong(payload, pos, size)
        headers = []
        for _ in range(max(count, 0)):
            hkey, pos = _read_bytes(payload, pos, size)
            hvalue, pos = _read_bytes(payload, pos, size)
            if hkey is None:
                raise CorruptMessageError("record header key is null")
            headers.append((hkey.decode("utf-8", "replace"), hvalue))
        if pos != end:
            raise CorruptMessageError("record length does not match its fields")
        timestamp = header.max_timestamp if log_append else header.base_timestamp + ts_delta
        records.append(Record(header.base_offset + offset_delta, timestamp, key, value,
                              tuple(headers)))
    if pos != size:
        raise CorruptMessageError("record batch has trailing bytes after its records")
    return records


def build_batch(records: Sequence[SimpleRecord], *, base_offset: int = 0, timestamp: int = 0,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                base_sequence: int = NO_SEQUENCE, is_transactional: bool = False,
                compression: CompressionType = CompressionType.NONE,
                timestamp_type: TimestampType = TimestampType.CREATE_TIME) -> bytes:
    """Encode ``records`` as one v2 batch (for tests and tools; the broker builds only when it
    up-converts a legacy message set, protocol.legacy_records)."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    stamps = [timestamp if r.timestamp is None else r.timestamp for r in records]
    first_ts = stamps[0]
    body = bytearray()
    for delta, (record, ts) in enumerate(zip(records, stamps, strict=True)):
        rec = bytearray(b"\x00")
        rec += encode_varlong(ts - first_ts)
        rec += encode_varlong(delta)
        for field in (record.key, record.value):
            if field is None:
                rec += encode_varlong(-1)
            else:
                rec += encode_varlong(len(field))
                rec += field
        rec += encode_varlong(len(record.headers))
        for hkey, hvalue in record.headers:
            encoded = hkey.encode("utf-8")
            rec += encode_varlong(len(encoded))
            rec += encoded
            if hvalue is None:
                rec += encode_varlong(-1)
            else:
                rec += encode_varlong(len(hvalue))
                rec += hvalue
        body += encode_varlong(len(rec))
        body += rec
    attributes = int(compression)
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= _TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    return encode_batch(compress(compression, bytes(body)), base_offset=base_offset,
                        last_offset_delta=len(records) - 1, records_count=len(records),
                        attributes=attributes, base_timestamp=first_ts, max_timestamp=max(stamps),
                        partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=base_sequence)


def encode_batch(payload: bytes | bytearray | memoryview, *, base_offset: int,
                 last_offset_delta: int, records_count: int, attributes: int,
                 base_timestamp: int, max_timestamp: int, partition_leader_epoch: int,
                 producer_id: int, producer_epoch: int, base_sequence: int) -> bytes:
    """A v2 batch around ``payload``, records already encoded (and compressed as
    ``attributes`` says), with its CRC-32C: Kafka's ``DefaultRecordBatch.writeHeader``.

    The log cleaner uses it to rewrite a batch from the surviving records' bytes, and with
    an empty payload for the empty batch that keeps a producer's last sequence.
    """
    out = bytearray(HEADER_SIZE)
    out += payload
    _HEADER.pack_into(out, 0, base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch, MAGIC,
                      0, attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
                      producer_epoch, base_sequence, records_count)
    _UINT32.pack_into(out, CRC_OFFSET, _crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)
