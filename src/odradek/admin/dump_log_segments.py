"""``odradek dump-log``: Kafka 3.9's DumpLogSegments (kafka-dump-log.sh) over a broker's files.

For each file of ``--files`` it prints "Dumping <file>" and then, by suffix:

* ``.log``: "Log starting offset: N" and a line per batch (its header fields, position,
  CRC and whether the CRC holds); with ``--deep-iteration`` a "| offset: ..." line per
  record, with ``--print-data-log`` its key and payload as the decoders make them;
  "Found N invalid bytes at the end of <name>" for a torn tail;
* ``.index`` / ``.timeindex``: one line per entry, each checked against the segment's
  ``.log`` (``--verify-index-only`` checks without printing, ``--index-sanity-check`` runs
  the broker's start-up check instead);
* ``.txnindex``: the aborted transactions; ``.snapshot``: the producer state entries.

What the checks find goes to stderr after every file was dumped, as Kafka's tool reports it
(mismatched index entries, time index errors, non-consecutive offsets).  The text is
Kafka's, field for field (Java's ``OptionalLong`` spelling included), so the two tools'
output can be compared byte for byte on the same files.

Files are only read: nothing here opens a file for writing (the broker's index classes
create and trim files, so their formats are read here directly).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from odradek.admin.hash_map_order import scala_hash_map_order
from odradek.broker.group.hashing import java_string_hashcode
from odradek.log.offset_index import OffsetIndex
from odradek.log.producer_state import SNAPSHOT_SUFFIX, ProducerStateEntry, read_snapshot
from odradek.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from odradek.log.time_index import TimeIndex
from odradek.log.transaction_index import ABORTED_TXN_SIZE, ABORTED_TXN_VERSION, TXN_INDEX_SUFFIX
from odradek.protocol.control_records import ControlRecordType, decode_control_record_key
from odradek.protocol.errors import CorruptMessageError, InvalidRecordError
from odradek.protocol.records import (
    LOG_OVERHEAD,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RecordBatchHeader,
    TimestampType,
    compute_crc,
    decode_batch,
    parse_header,
)

__all__ = ["DECODERS", "DumpLogError", "DumpLogOptions", "DumpProblems", "check_files", "dump_file"]

INT32_MAX = 2**31 - 1
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
STRING_DECODER = "org.apache.kafka.tools.api.StringDecoder"

# Kafka's FileLogInputStream: the bytes up to the magic byte, and the smallest size a batch may claim.
_HEADER_SIZE_UP_TO_MAGIC = 17
_MIN_RECORD_OVERHEAD = 14
_OFFSET_AND_SIZE = struct.Struct(">qi")
_ABORTED_TXN = struct.Struct(">hqqqq")
_DELETE_HORIZON_FLAG = 0x40  # of a v2 batch's attributes (KIP-534)
_TIMESTAMP_TYPE_NAMES = {TimestampType.CREATE_TIME: "CreateTime", TimestampType.LOG_APPEND_TIME: "LogAppendTime"}


def _int_decoder(size: int) -> Callable[[bytes], str]:
    def decode(data: bytes) -> str:
        if len(data) < size:
            raise DumpLogError(f"cannot decode {len(data)} bytes as a {size * 8}-bit integer")
        return str(int.from_bytes(data[:size], "big", signed=True))
    return decode


# The decoders --key-decoder-class and --value-decoder-class accept (Kafka's
# org.apache.kafka.tools.api decoders that print text; DefaultDecoder prints a Java array's
# identity, which no other process could reproduce).
DECODERS: dict[str, Callable[[bytes], str]] = {
    STRING_DECODER: lambda data: data.decode("utf-8", "replace"),
    "org.apache.kafka.tools.api.IntegerDecoder": _int_decoder(4),
    "org.apache.kafka.tools.api.LongDecoder": _int_decoder(8),
}
# Kafka 3.8 deprecated kafka.serializer's decoders; the tool maps them and says so on stdout.
_DEPRECATED_DECODERS = {f"kafka.serializer.{name}": f"org.apache.kafka.tools.api.{name}"
                        for name in ("StringDecoder", "IntegerDecoder", "LongDecoder")}


class DumpLogError(Exception):
    """What the tool cannot do, in one line."""


@dataclass(frozen=True, slots=True)
class DumpLogOptions:
    """kafka-dump-log.sh's options (``None`` decoders: not given)."""

    files: tuple[str, ...]
    print_data_log: bool = False
    deep_iteration: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    skip_record_metadata: bool = False
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_bytes: int = INT32_MAX
    key_decoder: str | None = None
    value_decoder: str | None = None

    @property
    def print_contents(self) -> bool:
        """Keys and payloads are printed: --print-data-log, or a decoder named."""
        return self.print_data_log or self.key_decoder is not None or self.value_decoder is not None

    @property
    def deep(self) -> bool:
        return self.deep_iteration or self.print_contents


@dataclass(slots=True)
class DumpProblems:
    """What the checks found, by absolute file path, reported after every file is dumped."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    out_of_order_timestamps: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    offsets_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """Kafka's stderr report, in the order of its Scala maps; pairs that Kafka prepends to a
        list come newest first."""
        def order(found: dict[str, list[tuple[int, int]]]) -> list[str]:
            return scala_hash_map_order(found, java_string_hashcode)

        out = []
        for path in order(self.index_mismatches):
            out.append(f"Mismatches in :{path}")
            out += [f"  Index offset: {i}, log offset: {o}" for i, o in reversed(self.index_mismatches[path])]
        for path in order(self.time_index_mismatches):
            out.append(f"Found timestamp mismatch in :{path}")
            out += [f"  Index timestamp: {i}, log timestamp: {t}" for i, t in self.time_index_mismatches[path]]
        for path in order(self.out_of_order_timestamps):
            out.append(f"Found out of order timestamp in :{path}")
            out += [f"  Index timestamp: {i}, Previously indexed timestamp: {p}"
                    for i, p in self.out_of_order_timestamps[path]]
        for path in order(self.offsets_not_found):
            out.append("The following indexed offsets are not found in the log.")
            out += [f"Indexed offset: {i}, found log offset: {o}" for i, o in self.offsets_not_found[path]]
        for path in order(self.non_consecutive):
            out.append(f"Non-consecutive offsets in {path}")
            out += [f"  {a} is followed by {b}" for a, b in reversed(self.non_consecutive[path])]
        return out


def _suffix(path: str) -> str:
    name = os.path.basename(path)
    return name[name.rfind("."):] if "." in name else ""


def _base_offset(path: str) -> int:
    """The offset a segment file is named after (the name up to its first dot)."""
    prefix = os.path.basename(path).split(".")[0]
    if not prefix.isdigit():
        raise DumpLogError(f"{path}: the file name does not start with an offset")
    return int(prefix)


def _sibling(path: str, suffix: str) -> str:
    return os.path.join(os.path.dirname(path), os.path.basename(path).split(".")[0] + suffix)


def _absolute(path: str) -> str:
    """Java's File.getAbsolutePath: the working directory joined, nothing resolved."""
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


def check_files(options: DumpLogOptions) -> None:
    """Refuse, before anything is printed, the files the tool could not read: missing ones,
    segment files not named after an offset, indexes without their ``.log``, bad decoders."""
    for name in (options.key_decoder, options.value_decoder):
        if name is not None and _DEPRECATED_DECODERS.get(name, name) not in DECODERS:
            raise DumpLogError(f"unknown decoder class {name} (known: {', '.join(sorted(DECODERS))})")
    if options.max_message_size <= 0 or options.max_bytes < 0:
        raise DumpLogError("--max-message-size must be positive and --max-bytes not negative")
    for path in options.files:
        if not path:
            raise DumpLogError("--files has an empty file name")
        if not os.path.isfile(path):
            raise DumpLogError(f"{path}: no such file")
        if not os.access(path, os.R_OK):
            raise DumpLogError(f"{path}: permission denied")
        suffix = _suffix(path)
        if suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            _base_offset(path)
        needs = {INDEX_SUFFIX: (LOG_SUFFIX,), TIME_INDEX_SUFFIX: (LOG_SUFFIX, INDEX_SUFFIX)}.get(suffix, ())
        for other in needs:
            if not options.index_sanity_check and not os.path.isfile(_sibling(path, other)):
                raise DumpLogError(f"{path}: its segment's {other} file {_sibling(path, other)} is missing")


def dump_file(path: str, options: DumpLogOptions, problems: DumpProblems,
              warn: Callable[[str], None]) -> Iterator[str]:
    """The stdout lines for one file; ``warn`` gets what Kafka prints on stderr as it goes.
    Raises DumpLogError where Kafka's tool would stop with an exception."""
    yield f"Dumping {path}"
    suffix = _suffix(path)
    if suffix == LOG_SUFFIX:
        yield from _dump_log(path, options, problems)
    elif suffix == INDEX_SUFFIX:
        yield from _dump_index(path, options, problems)
    elif suffix == TIME_INDEX_SUFFIX:
        yield from _dump_time_index(path, options, problems)
    elif suffix == SNAPSHOT_SUFFIX:
        yield from _dump_producer_snapshot(path, warn)
    elif suffix == TXN_INDEX_SUFFIX:
        yield from _dump_txn_index(path)
    else:
        warn(f"Ignoring unknown file {path}")


# ------------------------------------------------------------------ segments (.log)


class _Segment:
    """A segment file, read batch by batch as Kafka's FileLogInputStream does: a batch cut
    off by the end is not returned.  Each batch is read on its own, so memory stays bounded
    by the largest batch, not the segment."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDONLY)
        self.size = os.fstat(self._fd).st_size

    def close(self) -> None:
        os.close(self._fd)

    def batches(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, RecordBatchHeader, bytes]]:
        """(position, header, the batch's bytes) from ``start`` up to ``end``."""
        end = self.size if end is None else min(end, self.size)
        position = start
        while position + _HEADER_SIZE_UP_TO_MAGIC < end:
            _, size = _OFFSET_AND_SIZE.unpack(os.pread(self._fd, _OFFSET_AND_SIZE.size, position))
            if size < _MIN_RECORD_OVERHEAD:
                raise DumpLogError(f"Found record size {size} smaller than minimum record overhead "
                                   f"({_MIN_RECORD_OVERHEAD}) in file {self.path}.")
            if position + LOG_OVERHEAD + size > end:
                return
            batch = os.pread(self._fd, LOG_OVERHEAD + size, position)
            try:
                header = parse_header(batch)
            except (CorruptMessageError, InvalidRecordError) as e:
                raise DumpLogError(f"{self.path}: {e}") from None
            yield position, header, batch
            position += LOG_OVERHEAD + size


def _optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _batch_line(position: int, header: RecordBatchHeader, batch: bytes) -> str:
    delete_horizon = header.base_timestamp if header.attributes & _DELETE_HORIZON_FLAG else None
    valid = compute_crc(batch, 0, header) == header.crc
    return (f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.records_count} "
            f"baseSequence: {header.base_sequence} lastSequence: {header.last_sequence} "
            f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
            f"partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"isTransactional: {_bool(header.is_transactional)} isControl: {_bool(header.is_control)} "
            f"deleteHorizonMs: {_optional_long(delete_horizon)} position: {position} "
            f"{_TIMESTAMP_TYPE_NAMES[header.timestamp_type]}: {header.max_timestamp} size: {header.size} "
            f"magic: {header.magic} compresscodec: {header.compression.name.lower()} crc: {header.crc} "
            f"isvalid: {_bool(valid)}")


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _decoder(name: str | None) -> Callable[[bytes], str]:
    return DECODERS[_DEPRECATED_DECODERS.get(name, name) if name is not None else STRING_DECODER]


def _dump_log(path: str, options: DumpLogOptions, problems: DumpProblems) -> Iterator[str]:
    # Kafka's tool builds its decoders per log file, announcing a deprecated name each time.
    for name in (options.value_decoder, options.key_decoder):
        if name in _DEPRECATED_DECODERS:
            yield f"{name} is deprecated. Please use {_DEPRECATED_DECODERS[name]} instead"
    yield f"Log starting offset: {_base_offset(path)}"
    key_decoder, value_decoder = _decoder(options.key_decoder), _decoder(options.value_decoder)
    segment = _Segment(path)
    try:
        end = min(options.max_bytes, segment.size)
        valid_bytes = 0
        last_offset = -1
        for position, header, batch in segment.batches(0, end):
            yield _batch_line(position, header, batch)
            if options.deep:
                for line, offset in _record_lines(path, header, batch, options, key_decoder, value_decoder):
                    if last_offset == -1:
                        last_offset = offset
                    elif offset != last_offset + 1:
                        problems.non_consecutive.setdefault(_absolute(path), []).append((last_offset, offset))
                    last_offset = offset
                    yield line
            valid_bytes += header.size
        trailing = end - valid_bytes
        if trailing > 0 and options.max_bytes == INT32_MAX:
            yield f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}"
    finally:
        segment.close()


def _record_lines(path: str, header: RecordBatchHeader, batch: bytes, options: DumpLogOptions,
                  key_decoder: Callable[[bytes], str], value_decoder: Callable[[bytes], str]
                  ) -> Iterator[tuple[str, int]]:
    """A "| offset: ..." line per record of the batch, with its offset."""
    try:
        _, records = decode_batch(batch, verify_crc=False)
    except (CorruptMessageError, InvalidRecordError) as e:
        raise DumpLogError(f"{path}: batch at offset {header.base_offset}: {e}") from None
    timestamp_type = _TIMESTAMP_TYPE_NAMES[header.timestamp_type]
    for record in records:
        line = ""
        line_prefix = "| "
        if not options.skip_record_metadata:
            sequence = NO_SEQUENCE if header.base_sequence == NO_SEQUENCE else \
                (header.base_sequence + record.offset - header.base_offset) % (INT32_MAX + 1)
            line = (f"| offset: {record.offset} {timestamp_type}: {record.timestamp} "
                    f"keySize: {-1 if record.key is None else len(record.key)} "
                    f"valueSize: {-1 if record.value is None else len(record.value)} "
                    f"sequence: {sequence} headerKeys: [{','.join(k for k, _ in record.headers)}]")
            if header.is_control:
                line += _control_text(path, record.key, record.value)
            line_prefix = " "
        if options.print_contents and not header.is_control:
            if record.key is not None:
                line += f"{line_prefix}key: {key_decoder(record.key)}"
            if record.value is not None:
                line += f" payload: {value_decoder(record.value)}"
        yield line, record.offset


def _control_text(path: str, key: bytes | None, value: bytes | None) -> str:
    try:
        record_type = decode_control_record_key(key)
        if record_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            if value is None or len(value) < 6:
                raise CorruptMessageError("end transaction marker value is too short")
            coordinator_epoch = struct.unpack_from(">i", value, 2)[0]
            return f" endTxnMarker: {record_type.name} coordinatorEpoch: {coordinator_epoch}"
    except CorruptMessageError as e:
        raise DumpLogError(f"{path}: {e}") from None
    type_id = struct.unpack_from(">h", key or b"\0\0\0\0", 2)[0]
    return f" controlType: {record_type.name}({type_id})"


# ------------------------------------------------------------------ indexes


def _entries(path: str, entry: struct.Struct) -> list[tuple[int, int]]:
    data = Path(path).read_bytes()
    return list(entry.iter_unpack(data[:len(data) - len(data) % entry.size]))


def _dump_index(path: str, options: DumpLogOptions, problems: DumpProblems) -> Iterator[str]:
    base_offset = _base_offset(path)
    entries = _entries(path, OffsetIndex.entry)
    if not entries:
        yield f"{path} is empty."
        return
    if options.index_sanity_check:
        size = os.path.getsize(path)
        last = base_offset + entries[-1][0]
        if last < base_offset:
            raise DumpLogError(f"Corrupt index found, index file ({_absolute(path)}) has non-zero size but the last "
                               f"offset is {last} which is less than the base offset {base_offset}")
        if size % OffsetIndex.entry.size:
            raise DumpLogError(f"Index file {_absolute(path)} is corrupt, found {size} bytes which is neither "
                               f"positive nor a multiple of {OffsetIndex.entry.size}")
        yield f"{path} passed sanity check."
        return
    segment = _Segment(_sibling(path, LOG_SUFFIX))
    try:
        for i, (relative, position) in enumerate(entries):
            if relative == 0 and i > 0:
                return  # the zeroed tail of a preallocated index
            offset = base_offset + relative
            if position > segment.size:
                raise DumpLogError(f"{path}: entry {offset} points at position {position}, past the end of "
                                   f"{segment.path} ({segment.size} bytes)")
            first = next(segment.batches(position, position + options.max_message_size), None)
            if first is None:
                raise DumpLogError(f"{path}: no batch of at most {options.max_message_size} bytes starts at "
                                   f"position {position} of {segment.path}")
            if first[1].last_offset != offset:
                problems.index_mismatches.setdefault(_absolute(path), []).append((offset, first[1].last_offset))
            if not options.verify_index_only:
                yield f"offset: {offset} position: {position}"
    finally:
        segment.close()


def _dump_time_index(path: str, options: DumpLogOptions, problems: DumpProblems) -> Iterator[str]:
    base_offset = _base_offset(path)
    entries = _entries(path, TimeIndex.entry)
    if options.index_sanity_check:
        yield from _time_index_sanity_check(path, base_offset, entries)
        return
    offsets = _entries(_sibling(path, INDEX_SUFFIX), OffsetIndex.entry)
    segment = _Segment(_sibling(path, LOG_SUFFIX))
    absolute = _absolute(path)
    try:
        previous = NO_TIMESTAMP
        for i, (timestamp, relative) in enumerate(entries):
            if relative == 0 and i > 0:
                return
            offset = base_offset + relative
            position = _index_lookup(offsets, relative)
            found = next(((h, b) for _, h, b in segment.batches(position) if h.last_offset >= offset), None)
            if found is None:
                problems.offsets_not_found.setdefault(absolute, []).append((offset, -1))
            elif found[0].last_offset != offset:
                problems.offsets_not_found.setdefault(absolute, []).append((offset, found[0].last_offset))
            else:
                header, batch = found
                try:
                    _, records = decode_batch(batch, verify_crc=False)
                except (CorruptMessageError, InvalidRecordError) as e:
                    raise DumpLogError(f"{segment.path}: batch at offset {header.base_offset}: {e}") from None
                largest = max([NO_TIMESTAMP, *(r.timestamp for r in records)])
                if largest != timestamp:
                    problems.time_index_mismatches.setdefault(absolute, []).append((timestamp, largest))
                if previous >= timestamp:
                    problems.out_of_order_timestamps.setdefault(absolute, []).append((timestamp, previous))
            if not options.verify_index_only:
                yield f"timestamp: {timestamp} offset: {offset}"
            previous = timestamp
    finally:
        segment.close()


def _index_lookup(entries: Sequence[tuple[int, int]], relative: int) -> int:
    """The position of the last offset index entry at or below ``relative`` (0 if none),
    by Kafka's binary search."""
    low, high = 0, len(entries) - 1
    if not entries or entries[0][0] > relative:
        return 0
    while low < high:
        middle = (low + high + 1) // 2
        if entries[middle][0] <= relative:
            low = middle
        else:
            high = middle - 1
    return entries[low][1]


def _time_index_sanity_check(path: str, base_offset: int, entries: Sequence[tuple[int, int]]) -> Iterator[str]:
    absolute, size = _absolute(path), os.path.getsize(path)
    if entries:
        last_timestamp, last_offset = entries[-1][0], base_offset + entries[-1][1]
        if last_timestamp < entries[0][0]:
            raise DumpLogError(f"Corrupt time index found, time index file ({absolute}) has non-zero size but the "
                               f"last timestamp is {last_timestamp} which is less than the first timestamp "
                               f"{entries[0][0]}")
        if last_offset < base_offset:
            raise DumpLogError(f"Corrupt time index found, time index file ({absolute}) has non-zero size but the "
                               f"last offset is {last_offset} which is less than the first offset {base_offset}")
    if size % TimeIndex.entry.size:
        raise DumpLogError(f"Time index file {absolute} is corrupt, found {size} bytes which is neither positive "
                           f"nor a multiple of {TimeIndex.entry.size}")
    yield f"{path} passed sanity check."


# ------------------------------------------------------------------ transaction index and producer snapshots


def _dump_txn_index(path: str) -> Iterator[str]:
    data = Path(path).read_bytes()
    for pos in range(0, len(data) - ABORTED_TXN_SIZE + 1, ABORTED_TXN_SIZE):
        version, producer_id, first, last, lso = _ABORTED_TXN.unpack_from(data, pos)
        if version > ABORTED_TXN_VERSION:
            raise DumpLogError(f"Unexpected aborted transaction version {version} in transaction index "
                               f"{_absolute(path)}, current version is {ABORTED_TXN_VERSION}")
        yield f"version: {version} producerId: {producer_id} firstOffset: {first} lastOffset: {last} " \
              f"lastStableOffset: {lso}"


def _dump_producer_snapshot(path: str, warn: Callable[[str], None]) -> Iterator[str]:
    try:
        producers = read_snapshot(Path(path))
    except ValueError as e:
        warn(str(e))  # Kafka's tool reports a corrupt snapshot and goes on
        return
    for entry in producers.values():
        yield _producer_line(entry)


def _producer_line(entry: ProducerStateEntry) -> str:
    line = (f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
            f"coordinatorEpoch: {entry.coordinator_epoch} "
            f"currentTxnFirstOffset: {_optional_long(entry.current_txn_first_offset)} "
            f"lastTimestamp: {entry.last_timestamp} ")
    if entry.batches:
        batch = entry.batches[0]
        line += (f"firstSequence: {batch.first_seq} lastSequence: {batch.last_seq} lastOffset: {batch.last_offset} "
                 f"offsetDelta: {batch.last_offset - batch.first_offset} timestamp: {batch.timestamp}")
    return line
