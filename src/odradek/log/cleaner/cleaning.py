"""Kafka's ``LogCleaner.Cleaner`` as plain code over bytes: no files, no clock, no sleeping.

One :class:`Cleaning` carries out one :class:`~odradek.log.cleaner.job.CleanJob` as Kafka's
``Cleaner.doClean`` does, with the reading and writing left to its caller
(:mod:`odradek.log.cleaner.cleaner` reads segment files in chunks; the unit tests hand it
whole segments as bytes):

1. **Map** (``buildOffsetMap``): the dirty section's batches go through :meth:`Cleaning.map`,
   which puts each keyed record's offset into an :class:`OffsetMap` (key -> latest offset).
   When the map is full it says so and the caller stops; the cleaning then ends one past
   the last offset mapped, and the rest of the dirty section waits for the next cleaning.
2. **Clean** (``groupSegmentsBySize`` + ``cleanSegments``): the segments below that end are
   grouped into runs of at most ``segment.bytes`` (:attr:`Cleaning.groups`); each group
   becomes one cleaned segment. Each old segment's batches go through
   :meth:`Cleaning.clean`, which returns the bytes to append: batches kept whole are copied
   byte for byte, partly kept ones rebuilt with their codec, empty ones dropped (or kept
   empty for an idempotent producer's last batch, like Kafka's ``BatchRetention.RETAIN_EMPTY``).
3. :meth:`Cleaning.result` sums it up.

Which records survive is Kafka's ``shouldRetainRecord``: a record stays iff it has a key,
no later offset holds that key, and it has a value or its segment still keeps tombstones.

Transactions (Kafka's ``CleanedTransactionMetadata``): both phases walk the batches in offset
order with a :class:`CleanedTransactionMetadata` fed the job's aborted transactions. A
transactional batch of an aborted transaction is never mapped (an aborted newer value must
not shadow a committed older one) and is discarded whole when cleaning. A marker (control
batch) is discarded once its transaction has no batch left in the log (none met in this
pass) and its segment no longer keeps tombstones (the same ``delete.retention.ms`` rule);
the entry of each ABORT marker kept while its transaction still has data goes into the
cleaned segment's ``.txnindex`` (:attr:`CleanedChunk.aborted`). Committed transactional
batches are compacted like any other (their producer fields and attributes stay).

Speed: nearly all the time goes to reading every dirty record's key in the map phase, so
that loop (:func:`_scan_keys`) is written out by hand with one- and two-byte varint fast
paths. The clean phase parses records only where it must: a batch entirely inside the
mapped range keeps exactly the records whose offsets are in the map, so counting the map's
offsets inside ``[base, last]`` (bisect over their sorted list) tells whether it is dropped
(no offset: the common case in a well compacted log), copied whole (every offset) or must
be parsed.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from odradek.log.cleaner.job import CleanedGroup, CleanerStats, CleanJob, CleanResult, SegmentRef
from odradek.log.transaction_index import AbortedTxn
from odradek.protocol.control_records import ControlRecordType, decode_control_record_key
from odradek.protocol.errors import CorruptMessageError
from odradek.protocol.records import (
    HEADER_SIZE,
    CompressionType,
    RecordBatchHeader,
    TimestampType,
    compress,
    decompress,
    encode_batch,
    parse_header,
)
from odradek.protocol.varint import VarintError, read_varlong

__all__ = [
    "BatchInfo",
    "CleanedChunk",
    "CleanedTransactionMetadata",
    "Cleaning",
    "OffsetMap",
    "group_segments_by_size",
    "retains_tombstones",
]

_INT32_MAX = 2**31 - 1
_COMPRESSION_MASK = 0x07

# (position in the returned bytes, batch size, last offset, max timestamp) per batch: the
# shape LogSegment.append takes (odradek.log.segment.BatchInfo).
BatchInfo = tuple[int, int, int, int]


class OffsetMap:
    """Key bytes -> the latest offset seen for it: the role of Kafka's ``SkimpyOffsetMap``.

    Kafka stores 16-byte key hashes in a fixed buffer; here a dict holds the keys
    themselves, bounded by ``capacity`` entries (what ``log.cleaner.dedupe.buffer.size``
    allows). Updating a key already present never fills it.
    """

    __slots__ = ("capacity", "entries", "latest_offset")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.entries: dict[bytes, int] = {}
        self.latest_offset = -1  # the last offset put

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, or -1 when it is not in the map."""
        return self.entries.get(key, -1)

    def put(self, key: bytes, offset: int) -> bool:
        """Map ``key`` to ``offset``; False (nothing changed) when a new key finds it full."""
        entries = self.entries
        if len(entries) >= self.capacity and key not in entries:
            return False
        entries[key] = offset
        self.latest_offset = offset
        return True

    @property
    def utilization(self) -> float:
        return len(self.entries) / self.capacity if self.capacity > 0 else 1.0


def retains_tombstones(segment: SegmentRef, first_dirty_offset: int, now_ms: int,
                       delete_retention_ms: int) -> bool:
    """Whether ``segment``'s tombstones survive this cleaning.

    A tombstone goes once it has been through a cleaning (its segment lies in the clean
    section) and ``delete.retention.ms`` has passed since that segment was last written,
    so a consumer that read up to it has had that long to see the delete.
    """
    cleaned_before = segment.next_offset <= first_dirty_offset
    return not (cleaned_before and now_ms - segment.last_modified_ms > delete_retention_ms)


def group_segments_by_size(segments: Sequence[SegmentRef], max_size: int
                           ) -> list[tuple[SegmentRef, ...]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments whose sizes sum to at most
    ``max_size`` (``segment.bytes``) and whose offsets stay within 32 bits of the group's
    base offset form one group; a segment too large on its own is a group by itself."""
    groups: list[tuple[SegmentRef, ...]] = []
    i = 0
    while i < len(segments):
        first = segments[i]
        size = first.size
        j = i + 1
        while (j < len(segments) and size + segments[j].size <= max_size
               and segments[j].next_offset - 1 - first.base_offset <= _INT32_MAX):
            size += segments[j].size
            j += 1
        groups.append(tuple(segments[i:j]))
        i = j
    return groups


@dataclass(slots=True)
class CleanedChunk:
    """What :meth:`Cleaning.clean` made of one chunk of a segment: bytes to append to the
    cleaned segment and their batches."""

    data: bytearray = field(default_factory=bytearray)
    batches: list[BatchInfo] = field(default_factory=list)
    # Entries for the cleaned segment's .txnindex: the ABORT markers kept in this chunk
    # whose transaction still has data, in offset order.
    aborted: list[AbortedTxn] = field(default_factory=list)


class _AbortedTxnState:
    """Kafka's ``AbortedTransactionMetadata``: an aborted transaction the walk is inside."""

    __slots__ = ("last_observed_batch_offset", "txn")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.last_observed_batch_offset = -1  # -1: none of its batches met in this pass


class CleanedTransactionMetadata:
    """Kafka's ``CleanedTransactionMetadata``: the transactions a walk over the log in offset
    order is inside, and whether each batch or marker it meets may be discarded.

    An aborted transaction becomes ongoing for its producer when the walk reaches its first
    offset, and ends at the producer's ABORT marker; a producer's transactional batch met
    outside an aborted transaction opens a committed one, ended by its COMMIT marker.
    """

    __slots__ = ("_aborted", "_next", "_ongoing_aborted", "_ongoing_committed")

    def __init__(self, aborted_txns: Sequence[AbortedTxn] | set[AbortedTxn]) -> None:
        self._aborted = sorted(set(aborted_txns), key=lambda t: (t.first_offset, t.last_offset))
        self._next = 0
        self._ongoing_aborted: dict[int, _AbortedTxnState] = {}
        self._ongoing_committed: set[int] = set()

    def _consume_up_to(self, offset: int) -> None:
        """Kafka's ``consumeAbortedTxnsUpTo``: start the aborted transactions beginning at or
        before ``offset``."""
        aborted = self._aborted
        i = self._next
        while i < len(aborted) and aborted[i].first_offset <= offset:
            txn = aborted[i]
            if txn.producer_id not in self._ongoing_aborted:
                self._ongoing_aborted[txn.producer_id] = _AbortedTxnState(txn)
            i += 1
        self._next = i

    def on_batch_read(self, header: RecordBatchHeader) -> bool:
        """Kafka's ``onBatchRead`` for a data batch: True when it belongs to an aborted
        transaction (it may be discarded). The walk may skip non-transactional batches:
        they change nothing."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        state = self._ongoing_aborted.get(header.producer_id)
        if state is None:
            self._ongoing_committed.add(header.producer_id)
            return False
        state.last_observed_batch_offset = header.last_offset
        return True

    def on_control_batch_read(self, header: RecordBatchHeader,
                              marker: ControlRecordType | None
                              ) -> tuple[bool, AbortedTxn | None]:
        """Kafka's ``onControlBatchRead``: ``(may be discarded, the AbortedTxn to write to the
        cleaned .txnindex)``. ``marker`` is the type of the batch's first control record,
        None for an empty control batch (a cleaning emptied it: discardable). An ABORT
        marker stays while its transaction still had a batch in this pass, a COMMIT marker
        while its transaction did; other control records stay."""
        self._consume_up_to(header.last_offset)
        if marker is None:
            return True, None
        pid = header.producer_id
        if marker is ControlRecordType.ABORT:
            state = self._ongoing_aborted.pop(pid, None)
            if state is not None and state.last_observed_batch_offset >= 0:
                return False, state.txn
            return True, None
        if marker is ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False, None
            return True, None
        return False, None


@dataclass(slots=True)
class _Counters:
    """The counting part of CleanerStats, accumulated while cleaning."""

    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    invalid_messages: int = 0
    aborted_batches: int = 0
    markers_removed: int = 0


class Cleaning:
    """One cleaning of ``job`` (see the module docstring for the order of calls)."""

    def __init__(self, job: CleanJob) -> None:
        self.job = job
        self.offset_map = OffsetMap(job.max_map_entries)
        self.map_full = False
        self._counters = _Counters()
        # Offsets of keyless records and of tombstones met while mapping: few, and they
        # let the clean phase skip parsing batches it drops or copies whole.
        self._keyless_offsets: list[int] = []
        self._tombstone_offsets: list[int] = []
        # Set when mapping is done (_finish_map)
        self._end_offset = -1
        self._groups: list[tuple[SegmentRef, ...]] = []
        self._group_of: dict[int, int] = {}  # old segment's base offset -> its group's
        self._mapped: list[int] = []  # the map's offsets, sorted
        self._tombstones: list[int] = []  # mapped tombstones' offsets, sorted
        self._groups_keeping_tombstones: set[int] = set()
        # The map phase walks the dirty section, the clean phase every segment it rewrites:
        # each has its own view of the transactions (set up in _finish_map for the latter).
        self._map_txns = CleanedTransactionMetadata(
            [t for t in job.aborted_txns if t.last_offset >= job.first_dirty_offset])
        self._clean_txns = CleanedTransactionMetadata(())

    # ------------------------------------------------------------------ map phase

    @property
    def dirty_segments(self) -> tuple[SegmentRef, ...]:
        """The segments to feed to :meth:`map`, in order."""
        first_dirty = self.job.first_dirty_offset
        return tuple(s for s in self.job.segments if s.next_offset > first_dirty)

    def map(self, data: bytes, limit: int | None = None) -> bool:
        """Map the keyed records of the whole batches in ``data[:limit]`` whose offsets lie
        in ``[first_dirty_offset, first_uncleanable_offset)`` (Kafka's
        ``buildOffsetMapForSegment``). Returns True once the map is full: stop feeding."""
        if self.map_full:
            return True
        if self._end_offset >= 0:
            raise RuntimeError("map() after the clean phase began")
        job = self.job
        start, stop = job.first_dirty_offset, job.first_uncleanable_offset
        offset_map = self.offset_map
        entries = offset_map.entries
        capacity = offset_map.capacity
        counters = self._counters
        map_txns = self._map_txns
        end = len(data) if limit is None else limit
        pos = 0
        while pos < end:
            header = parse_header(data, pos)
            size = header.size
            if pos + size > end:
                raise CorruptMessageError(f"batch at {pos} runs past the end of the data")
            base = header.base_offset
            last = base + header.last_offset_delta
            if last < start or base >= stop:
                pos += size
                continue
            if header.is_control:
                # Kafka's buildOffsetMapForSegment: markers only move the transactions on
                map_txns.on_control_batch_read(header, self._marker_type(data, pos, header))
                pos += size
                continue
            if header.is_transactional and map_txns.on_batch_read(header):
                pos += size  # an aborted transaction's batch: never mapped
                continue
            if header.records_count == 0:
                pos += size
                continue
            counters.map_bytes_read += size
            counters.map_messages_read += header.records_count
            buf, first, stop_pos = _records_section(data, pos, header)
            try:
                keys, offsets, tombstones, keyless = _scan_keys(buf, first, stop_pos,
                                                                header.records_count, base)
            except (IndexError, VarintError) as e:
                raise _corrupt(header, e) from None
            if tombstones:
                self._tombstone_offsets.extend(tombstones)
            if keyless:
                self._keyless_offsets.extend(keyless)
            if offsets:
                if base >= start and last < stop and len(entries) + len(keys) <= capacity:
                    entries.update(zip(keys, offsets, strict=True))
                    offset_map.latest_offset = offsets[-1]
                else:
                    for key, offset in zip(keys, offsets, strict=True):
                        if start <= offset < stop and not offset_map.put(key, offset):
                            self.map_full = True
                            return True
            pos += size
        return False

    # ------------------------------------------------------------------ clean phase

    def _finish_map(self) -> None:
        job = self.job
        first_dirty = job.first_dirty_offset
        if not self.map_full:
            end = job.first_uncleanable_offset
        elif self.offset_map.latest_offset >= first_dirty:
            end = self.offset_map.latest_offset + 1
        else:
            end = first_dirty
        self._end_offset = end
        self._mapped = sorted(self.offset_map.entries.values())
        self._tombstones = sorted(o for o in self._tombstone_offsets if first_dirty <= o < end)
        self._counters.invalid_messages += sum(
            1 for o in self._keyless_offsets if first_dirty <= o < end)
        self._groups = group_segments_by_size(
            [s for s in job.segments if s.base_offset < end], job.segment_bytes)
        self._group_of = {s.base_offset: g[0].base_offset for g in self._groups for s in g}
        # Kafka collects the aborted transactions per segment up to the map's end.
        self._clean_txns = CleanedTransactionMetadata(
            [t for t in job.aborted_txns if t.first_offset < end])

    @property
    def end_offset(self) -> int:
        """Where this cleaning ends (the next first dirty offset): one past the last offset
        mapped when the map filled up, else ``first_uncleanable_offset``. Reading it (or
        :attr:`groups`) ends the map phase."""
        if self._end_offset < 0:
            self._finish_map()
        return self._end_offset

    @property
    def groups(self) -> list[tuple[SegmentRef, ...]]:
        """The segments to rewrite (every one starting below :attr:`end_offset`), grouped
        into the cleaned segments that replace them (Kafka's ``groupSegmentsBySize``)."""
        if self._end_offset < 0:
            self._finish_map()
        return self._groups

    def clean(self, segment: SegmentRef, data: bytes, limit: int | None = None
              ) -> CleanedChunk:
        """Filter the whole batches in ``data[:limit]``, read from ``segment`` (one of
        :attr:`groups`), into the bytes to append to its cleaned segment (Kafka's
        ``cleanInto``)."""
        job = self.job
        first_dirty = job.first_dirty_offset
        end_offset = self.end_offset
        retain_tombstones = retains_tombstones(segment, first_dirty, job.now_ms,
                                               job.delete_retention_ms)
        mapped = self._mapped
        counters = self._counters
        txns = self._clean_txns
        out = CleanedChunk()
        end = len(data) if limit is None else limit
        view = memoryview(data)
        copy_from = -1  # start of a run of batches copied whole, not yet appended
        kept_tombstone = False  # or a marker due to go
        pos = 0
        while pos < end:
            header = parse_header(data, pos)
            size = header.size
            if pos + size > end:
                raise CorruptMessageError(f"batch at {pos} runs past the end of the data")
            base = header.base_offset
            last = base + header.last_offset_delta
            count = header.records_count
            counters.messages_read += count
            counters.bytes_read += size
            rebuilt: bytes | None = None
            if header.is_control:
                # Kafka 2.8's shouldDiscardBatch: a marker goes once its transaction has no
                # batch left and its segment no longer keeps tombstones
                # (retainDeletesAndTxnMarkers).
                discardable, aborted = txns.on_control_batch_read(
                    header, self._marker_type(data, pos, header))
                if aborted is not None:
                    out.aborted.append(aborted)
                if not discardable:
                    keep_whole = True
                elif retain_tombstones:
                    keep_whole = True
                    kept_tombstone = True  # due once the segment is past the horizon
                elif self._is_last_marker_of_producer(header):
                    # BatchRetention.RETAIN_EMPTY: emptied, kept for the producer's epoch
                    keep_whole = count == 0
                    if not keep_whole:
                        rebuilt = self._empty_batch(header)
                else:
                    keep_whole = False
                    counters.markers_removed += 1
            elif header.is_transactional and txns.on_batch_read(header):
                # An aborted transaction's batch: discarded whole (BatchRetention.DELETE), or
                # emptied when it is its producer's last (RETAIN_EMPTY).
                counters.aborted_batches += 1
                keep_whole = count == 0 and self._is_producers_last(header)
                if count:
                    rebuilt = self._empty_or_none(header)
            elif count and first_dirty <= base and last < end_offset and retain_tombstones:
                # Inside the mapped range the survivors are exactly the mapped offsets.
                survivors = bisect_right(mapped, last) - bisect_left(mapped, base)
                keep_whole = survivors == count
                if keep_whole:
                    tombstones = self._tombstones
                    kept_tombstone = kept_tombstone or (
                        bisect_right(tombstones, last) > bisect_left(tombstones, base))
                elif survivors == 0:
                    rebuilt = self._empty_or_none(header)
                else:
                    keep_whole, rebuilt, tomb = self._filter(data, pos, header, True)
                    kept_tombstone = kept_tombstone or tomb
            elif count == 0:
                keep_whole = self._is_producers_last(header)
            else:
                keep_whole, rebuilt, tomb = self._filter(data, pos, header, retain_tombstones)
                kept_tombstone = kept_tombstone or tomb
            if keep_whole:
                if copy_from < 0:
                    copy_from = pos
                out.batches.append((len(out.data) + pos - copy_from, size, last,
                                    header.max_timestamp))
                counters.messages_written += count
            else:
                if copy_from >= 0:
                    out.data += view[copy_from:pos]
                    copy_from = -1
                if rebuilt is not None:
                    out.batches.append((len(out.data), len(rebuilt), last,
                                        _max_timestamp(rebuilt)))
                    out.data += rebuilt
                    counters.messages_written += _records_count(rebuilt)
            pos += size
        if copy_from >= 0:
            out.data += view[copy_from:end]
        counters.bytes_written += len(out.data)
        if kept_tombstone:
            self._groups_keeping_tombstones.add(self._group_of[segment.base_offset])
        return out

    def _is_producers_last(self, header: RecordBatchHeader) -> bool:
        """Kafka's ``isBatchLastRecordOfProducer``: this batch holds its idempotent
        producer's last sequence, which the producer state rebuilt from the log needs."""
        return (header.producer_id >= 0
                and self.job.producer_last_offsets.get(header.producer_id) == header.last_offset)

    def _is_last_marker_of_producer(self, header: RecordBatchHeader) -> bool:
        """Kafka's ``isBatchLastRecordOfProducer`` for a control batch: its producer's state
        holds no data batch and the marker has the producer's current epoch."""
        epoch = self.job.marker_only_producers.get(header.producer_id)
        return epoch is not None and epoch == header.producer_epoch

    @staticmethod
    def _marker_type(data: bytes, pos: int, header: RecordBatchHeader
                     ) -> ControlRecordType | None:
        """The type of the first control record of the control batch at ``pos`` (Kafka's
        ``ControlRecordType.parse``), None when the batch is empty."""
        if header.records_count == 0:
            return None
        payload, first, stop = _records_section(data, pos, header)
        try:
            records = _scan_records(payload, first, stop, header.records_count,
                                    header.base_offset)
        except (IndexError, VarintError) as e:
            raise _corrupt(header, e) from None
        return decode_control_record_key(records[0][3])

    def _empty_or_none(self, header: RecordBatchHeader) -> bytes | None:
        """No record survives: nothing, or an empty batch for a producer's last batch."""
        if not self._is_producers_last(header):
            return None
        return self._empty_batch(header)

    @staticmethod
    def _empty_batch(header: RecordBatchHeader) -> bytes:
        """The batch emptied of its records (Kafka's ``DefaultRecordBatch.writeEmptyHeader``:
        no codec, maxTimestamp as both timestamps, offsets, producer fields, sequence and
        the transactional and control bits unchanged)."""
        return encode_batch(
            b"", base_offset=header.base_offset, last_offset_delta=header.last_offset_delta,
            records_count=0, attributes=header.attributes & ~_COMPRESSION_MASK,
            base_timestamp=header.max_timestamp, max_timestamp=header.max_timestamp,
            partition_leader_epoch=header.partition_leader_epoch,
            producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence)

    def _filter(self, data: bytes, pos: int, header: RecordBatchHeader, retain_tombstones: bool
                ) -> tuple[bool, bytes | None, bool]:
        """Kafka's ``shouldRetainRecord`` over one batch: (kept whole?, the rebuilt batch or
        None, kept a tombstone?)."""
        entries = self.offset_map.entries
        first_dirty, end_offset = self.job.first_dirty_offset, self._end_offset
        payload, first, stop = _records_section(data, pos, header)
        try:
            records = _scan_records(payload, first, stop, header.records_count,
                                    header.base_offset)
        except (IndexError, VarintError) as e:
            raise _corrupt(header, e) from None
        kept: list[tuple[int, int, int]] = []  # (start, end, timestamp delta)
        kept_tombstone = False
        for start, end, offset, key, has_value, ts_delta in records:
            if key is None:
                if not first_dirty <= offset < end_offset:  # else counted while mapping
                    self._counters.invalid_messages += 1
                continue
            if offset >= entries.get(key, -1) and (has_value or retain_tombstones):
                kept.append((start, end, ts_delta))
                kept_tombstone = kept_tombstone or not has_value
        if len(kept) == header.records_count:
            return True, None, kept_tombstone
        if not kept:
            return False, self._empty_or_none(header), False
        body = b"".join([payload[start:end] for start, end, _ in kept])
        codec = CompressionType(header.attributes & _COMPRESSION_MASK)
        max_timestamp = header.max_timestamp
        if header.timestamp_type is TimestampType.CREATE_TIME:
            max_timestamp = header.base_timestamp + max(ts for _, _, ts in kept)
        # The records keep their bytes, so their offset and timestamp deltas stay relative
        # to the original base offset and base timestamp; lastOffsetDelta keeps covering
        # the batch's original offsets (Kafka's MemoryRecordsBuilder.overrideLastOffset).
        rebuilt = encode_batch(
            compress(codec, body), base_offset=header.base_offset,
            last_offset_delta=header.last_offset_delta, records_count=len(kept),
            attributes=header.attributes, base_timestamp=header.base_timestamp,
            max_timestamp=max_timestamp, partition_leader_epoch=header.partition_leader_epoch,
            producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence)
        return False, rebuilt, kept_tombstone

    # ------------------------------------------------------------------ result

    def result(self, sizes: dict[int, int], *, map_seconds: float = 0.0,
               clean_seconds: float = 0.0) -> CleanResult:
        """The CleanResult, given each written group's size by its base offset."""
        job = self.job
        c = self._counters
        groups = tuple(CleanedGroup(g[0].base_offset, tuple(s.base_offset for s in g),
                                    sizes[g[0].base_offset]) for g in self.groups)
        # A kept tombstone's segment is in the clean section next time, with the group's
        # mtime (its last segment's): it may go delete.retention.ms after that.
        due = [g[-1].last_modified_ms + job.delete_retention_ms for g in self.groups
               if g[0].base_offset in self._groups_keeping_tombstones]
        stats = CleanerStats(**asdict(c), map_seconds=map_seconds, clean_seconds=clean_seconds,
                             buffer_utilization=self.offset_map.utilization)
        return CleanResult(groups, self.end_offset, stats, min(due) if due else None)


# ---------------------------------------------------------------------- record scanning


def _records_section(data: bytes, pos: int, header: RecordBatchHeader) -> tuple[bytes, int, int]:
    """Where the records of the batch at ``pos`` lie: ``(buffer, start, end)``, the
    buffer being ``data`` itself or the decompressed records."""
    codec = header.compression
    if codec is CompressionType.NONE:
        return data, pos + HEADER_SIZE, pos + header.size
    payload = decompress(codec, memoryview(data)[pos + HEADER_SIZE:pos + header.size])
    return payload, 0, len(payload)


def _corrupt(header: RecordBatchHeader, e: Exception) -> CorruptMessageError:
    return CorruptMessageError(f"record batch at offset {header.base_offset} is corrupt: "
                               f"{e or 'a record is truncated'}")


def _scan_keys(buf: bytes, pos: int, end: int, count: int, base: int
               ) -> tuple[list[bytes], list[int], list[int], list[int]]:
    """Keys and offsets of the ``count`` records in ``buf[pos:end]``, plus the offsets of
    tombstones and of keyless records. The map phase's inner loop: one- and two-byte
    varints (nearly all of them) are read inline."""
    keys: list[bytes] = []
    offsets: list[int] = []
    tombstones: list[int] = []
    keyless: list[int] = []
    add_key = keys.append
    add_offset = offsets.append
    for _ in range(count):
        # length (zig-zag varlong), then attributes (one byte)
        b = buf[pos]
        if b < 0x80:
            rec_end = pos + 1 + (b >> 1)
            p = pos + 2
        else:
            b2 = buf[pos + 1]
            if b2 < 0x80:
                rec_end = pos + 2 + (((b & 0x7F) | (b2 << 7)) >> 1)
                p = pos + 3
            else:
                length, p = read_varlong(buf, pos, end)
                rec_end = p + length
                p += 1
        # timestamp delta: skipped
        while buf[p] > 0x7F:
            p += 1
        # offset delta
        b = buf[p + 1]
        if b < 0x80:
            offset = base + (b >> 1)
            p += 2
        else:
            b2 = buf[p + 2]
            if b2 < 0x80:
                offset = base + (((b & 0x7F) | (b2 << 7)) >> 1)
                p += 3
            else:
                delta, p = read_varlong(buf, p + 1, end)
                offset = base + delta
        # key
        b = buf[p]
        if b < 0x80:
            if b == 1:  # length -1: no key
                keyless.append(offset)
                pos = rec_end
                continue
            p += 1
            key_end = p + (b >> 1)
        else:
            length, p = read_varlong(buf, p, end)
            if length < 0:
                keyless.append(offset)
                pos = rec_end
                continue
            key_end = p + length
        add_key(buf[p:key_end])
        add_offset(offset)
        if buf[key_end] == 1:  # value length -1: a tombstone
            tombstones.append(offset)
        pos = rec_end
    if pos != end:
        raise CorruptMessageError(f"record batch at offset {base}: records do not fill the batch")
    return keys, offsets, tombstones, keyless


def _scan_records(buf: bytes, pos: int, end: int, count: int, base: int
                  ) -> list[tuple[int, int, int, bytes | None, bool, int]]:
    """``(start, end, offset, key, has_value, timestamp delta)`` of each record in
    ``buf[pos:end]``: what the clean phase needs to filter and rebuild a batch. Varints
    of one or two bytes are read inline, as in :func:`_scan_keys`."""
    records = []
    add = records.append
    for _ in range(count):
        # length, then attributes
        b = buf[pos]
        if b < 0x80:
            rec_end = pos + 1 + (b >> 1)
            p = pos + 2
        else:
            b2 = buf[pos + 1]
            if b2 < 0x80:
                rec_end = pos + 2 + (((b & 0x7F) | (b2 << 7)) >> 1)
                p = pos + 3
            else:
                length, p = read_varlong(buf, pos, end)
                rec_end = p + length
                p += 1
        if rec_end > end:
            raise CorruptMessageError(f"record batch at offset {base}: record runs past its end")
        # timestamp delta (signed)
        b = buf[p]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            ts_delta, p = read_varlong(buf, p, end)
        # offset delta
        b = buf[p]
        if b < 0x80:
            offset = base + (b >> 1)
            p += 1
        else:
            b2 = buf[p + 1]
            if b2 < 0x80:
                offset = base + (((b & 0x7F) | (b2 << 7)) >> 1)
                p += 2
            else:
                delta, p = read_varlong(buf, p, end)
                offset = base + delta
        # key, then the first byte of the value length (1: length -1, no value)
        b = buf[p]
        if b < 0x80 and b != 1:
            p += 1
            key: bytes | None = buf[p:p + (b >> 1)]
            p += b >> 1
        else:
            length, p = read_varlong(buf, p, end)
            if length < 0:
                key = None
            else:
                key = buf[p:p + length]
                p += length
        add((pos, rec_end, offset, key, buf[p] != 1, ts_delta))
        pos = rec_end
    if pos != end:
        raise CorruptMessageError(f"record batch at offset {base}: records do not fill the batch")
    return records


def _max_timestamp(batch: bytes) -> int:
    return parse_header(batch).max_timestamp


def _records_count(batch: bytes) -> int:
    return parse_header(batch).records_count
