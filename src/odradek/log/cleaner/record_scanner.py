"""The cleaner's one reader of records: keys, offsets and positions read straight from a
batch's bytes, with no Record objects.

Both phases of a cleaning read every record of the batches they cannot judge whole: the
map phase wants each key and offset, the clean phase also where each record starts, so
that the survivors' bytes can be copied. :func:`odradek.protocol.records.decode_batch`
reads all of that and more (values, headers) at several times the cost; :func:`scan_records`
skips what the cleaner never looks at and reads one- and two-byte varints (nearly all of
them) inline. The property tests hold it to that decoder: the same keys and offsets for
every batch the decoder reads, :class:`CorruptMessageError` for every truncated one.

The same walk compiled (:mod:`odradek.log.cleaner.native`, built by the set-up) does it for
batches of :data:`NATIVE_MIN_RECORDS` records or more when it is built; the Python loop
(:func:`scan_records_python`) is the fallback, the reference the compiled one is tested
against byte for byte, and the one that names the fault of a batch the compiled one refuses.
"""

from __future__ import annotations

import ctypes

from odradek.log.cleaner import native
from odradek.protocol.errors import CorruptMessageError
from odradek.protocol.records import HEADER_SIZE, RecordBatchHeader, decompress
from odradek.protocol.varint import VarintError, read_varlong

__all__ = ["COMPRESSION_MASK", "NATIVE_MIN_RECORDS", "ScannedRecords", "corrupt", "first_key", "records_section",
           "scan_records", "scan_records_native", "scan_records_python", "uses_compiled_scanner"]

COMPRESSION_MASK = 0x07  # the codec's bits of a batch's attributes


# What scan_records finds, as parallel lists (cheap to build, cheap to zip; a plain tuple, as
# a named one costs a Python call per batch):
#   keys              the keys of the records that have one, in order
#   offsets           the offsets of those records
#   tombstones        the offsets of keyed records without a value
#   keyless           the offsets of records without a key
# and with positions=True, for each keyed record (what rebuilding a batch from some of its
# records needs; empty otherwise):
#   starts, ends      where it starts and ends in the buffer
#   timestamp_deltas  its timestamp delta
ScannedRecords = tuple[list[bytes], list[int], list[int], list[int], list[int], list[int],
                       list[int]]


def records_section(data: bytes, pos: int, header: RecordBatchHeader) -> tuple[bytes, int, int]:
    """Where the records of the batch at ``pos`` lie: ``(buffer, start, end)``, the buffer
    being ``data`` itself or the decompressed records."""
    end = pos + header.size
    if not header.attributes & COMPRESSION_MASK:  # no codec (tested before any enum is made)
        return data, pos + HEADER_SIZE, end
    payload = decompress(header.compression, memoryview(data)[pos + HEADER_SIZE:end])
    return payload, 0, len(payload)


def corrupt(base_offset: int, reason: object) -> CorruptMessageError:
    """The error for a batch whose records cannot be read."""
    return CorruptMessageError(f"record batch at offset {base_offset} is corrupt: "
                               f"{reason or 'a record is truncated'}")


# Below this many records a batch is scanned in Python: a ctypes call costs a few records' scan.
NATIVE_MIN_RECORDS = 4
_NATIVE = native.load()


def uses_compiled_scanner() -> bool:
    """Whether :func:`scan_records` has the compiled scanner (built, and not turned off)."""
    return _NATIVE is not None


def scan_records(buf: bytes, pos: int, end: int, count: int, base_offset: int, *,
                 positions: bool = False) -> ScannedRecords:
    """The ``count`` records of a v2 batch that fill ``buf[pos:end]`` exactly, and with
    ``positions`` where each keyed one lies.

    Raises CorruptMessageError when they do not fill it, or a key runs past its record.
    Timestamps, values (but for the sign of their length) and headers are skipped unread.
    """
    if _NATIVE is not None and count >= NATIVE_MIN_RECORDS and type(buf) is bytes:
        found = scan_records_native(_NATIVE, buf, pos, end, count, base_offset, positions)
        if found is not None:
            return found
    return scan_records_python(buf, pos, end, count, base_offset, positions=positions)


def scan_records_native(scan: native.NativeScan, buf: bytes, pos: int, end: int, count: int, base_offset: int,
                        positions: bool) -> ScannedRecords | None:
    """:func:`scan_records` by the compiled ``scan``; None where it refuses the batch (then
    the Python scanner judges it)."""
    out = (ctypes.c_int64 * (3 + 8 * count))()
    if scan(buf, pos, end, count, base_offset, positions, out):
        return None
    keyed, dead, unkeyed = out[0], out[1], out[2]
    key_starts = 3
    key_ends = key_starts + count
    offsets = key_ends + count
    tombstones = offsets + count
    keyless = tombstones + count
    keys = list(map(buf.__getitem__, map(slice, out[key_starts:key_starts + keyed], out[key_ends:key_ends + keyed])))
    if positions:
        starts = keyless + count
        ends = starts + count
        deltas = ends + count
        return (keys, out[offsets:offsets + keyed], out[tombstones:tombstones + dead], out[keyless:keyless + unkeyed],
                out[starts:starts + keyed], out[ends:ends + keyed], out[deltas:deltas + keyed])
    return keys, out[offsets:offsets + keyed], out[tombstones:tombstones + dead], out[keyless:keyless + unkeyed], [], [], []


def scan_records_python(buf: bytes, pos: int, end: int, count: int, base_offset: int, *,
                        positions: bool = False) -> ScannedRecords:
    """:func:`scan_records` in Python."""
    keys: list[bytes] = []
    offsets: list[int] = []
    tombstones: list[int] = []
    keyless: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    timestamp_deltas: list[int] = []
    add_key, add_offset = keys.append, offsets.append
    # Varints of one or two bytes, nearly all of them, are read inline. A zig-zag varint's
    # sign is the low bit of its first byte, so "not b & 0x81" is a one-byte varint that is
    # not negative, worth b >> 1. Two bytes b, b2 that are not negative are worth
    # ((b & 0x7F) | b2 << 7) >> 1, written (b >> 1) - 64 + (b2 << 6): two operations fewer.
    two_byte_base = base_offset - 64
    try:
        for _ in range(count):
            # length, then the attributes byte. A negative length is read as if it were
            # not; the key's check or the final one then fails.
            b = buf[pos]
            if b < 0x80:
                rec_end = pos + 1 + (b >> 1)
                p = pos + 2
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    rec_end = pos - 62 + (b >> 1) + (b2 << 6)  # pos + 2 + length
                    p = pos + 3
                else:
                    length, p = read_varlong(buf, pos, end)
                    rec_end = p + length
                    p += 1
            # timestamp delta: skipped (p stops on its last byte), unless positions are wanted
            if positions:
                b = buf[p]
                timestamp_deltas.append((b >> 1) ^ -(b & 1) if b < 0x80
                                        else read_varlong(buf, p, end)[0])
                starts.append(pos)
                ends.append(rec_end)
            while buf[p] > 0x7F:
                p += 1
            # offset delta
            b = buf[p + 1]
            if not b & 0x81:
                offset = base_offset + (b >> 1)
                p += 2
            elif b & 1:  # negative: never written by a client, but possible
                delta, p = read_varlong(buf, p + 1, end)
                offset = base_offset + delta
            else:
                b2 = buf[p + 2]
                if b2 < 0x80:
                    offset = two_byte_base + (b >> 1) + (b2 << 6)
                    p += 3
                else:
                    delta, p = read_varlong(buf, p + 1, end)
                    offset = base_offset + delta
            # key (any negative length: none), then the sign of the value's length
            b = buf[p]
            if not b & 0x81:
                p += 1
                key_end = p + (b >> 1)
            else:
                length, p = read_varlong(buf, p, end)
                if length < 0:
                    if p >= rec_end:
                        raise corrupt(base_offset, "a record ends before its value")
                    keyless.append(offset)
                    if positions:  # kept for keyed records only
                        del starts[-1], ends[-1], timestamp_deltas[-1]
                    pos = rec_end
                    continue
                key_end = p + length
            if key_end >= rec_end:
                raise corrupt(base_offset, "a record ends before its value")
            add_key(buf[p:key_end])
            add_offset(offset)
            if buf[key_end] & 1:
                tombstones.append(offset)
            pos = rec_end
    except (IndexError, VarintError) as e:
        raise corrupt(base_offset, e) from None
    if pos != end:  # also where a record ran past the end
        raise corrupt(base_offset, "the records do not fill the batch")
    return keys, offsets, tombstones, keyless, starts, ends, timestamp_deltas


def first_key(records: ScannedRecords, start: int) -> bytes | None:
    """The key of the first record, which starts at ``start`` (None when it has none;
    ``records`` scanned with positions)."""
    keys, _, _, _, starts, _, _ = records
    return keys[0] if starts and starts[0] == start else None
