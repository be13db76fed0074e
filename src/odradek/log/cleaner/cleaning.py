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
   :meth:`Cleaning.clean`, which judges each batch with the pure rules of
   :mod:`~odradek.log.cleaner.retention` and copies what they keep: batches kept whole
   byte for byte, partly kept ones rebuilt with their codec, emptied ones as an empty batch.
3. :meth:`Cleaning.result` sums it up.

Transactions (Kafka's ``CleanedTransactionMetadata``): both phases walk the batches in offset
order with a :class:`CleanedTransactionMetadata` fed the job's aborted transactions. A
transactional batch of an aborted transaction is never mapped (an aborted newer value must
not shadow a committed older one) and is discarded whole when cleaning. A marker (control
batch) is discarded once its transaction has no batch left in the log (none met in this
pass) and its segment no longer keeps tombstones (the same ``delete.retention.ms`` rule);
the entry of each ABORT marker kept while its transaction still has data goes into the
cleaned segment's ``.txnindex`` (:attr:`CleanedChunk.aborted`). Committed transactional
batches are compacted like any other (their producer fields and attributes stay).

Speed: nearly all the time goes to reading every dirty record's key in the map phase
(:func:`~odradek.log.cleaner.record_scanner.scan_records`). The clean phase reads records
only where it must: a batch entirely inside the mapped range keeps exactly the records whose
offsets are in the map, so counting the map's offsets inside ``[base, last]`` (bisect over
their sorted list) tells whether it is dropped (no offset: the common case in a well
compacted log), copied whole (every offset) or must be read.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from odradek.log.cleaner.job import CleanedGroup, CleanerStats, CleanJob, CleanResult, SegmentRef
from odradek.log.cleaner.offset_map import OffsetMap
from odradek.log.cleaner.record_scanner import (
    COMPRESSION_MASK,
    first_key,
    records_section,
    scan_records,
)
from odradek.log.cleaner.retention import (
    BatchRetention,
    check_batch_retention,
    records_to_retain,
    retains_tombstones,
    should_discard_batch,
    when_no_record_survives,
)
from odradek.log.cleaner.transaction_metadata import CleanedTransactionMetadata
from odradek.log.transaction_index import AbortedTxn
from odradek.protocol.control_records import ControlRecordType, decode_control_record_key
from odradek.protocol.errors import CorruptMessageError
from odradek.protocol.records import (
    RecordBatchHeader,
    TimestampType,
    compress,
    encode_batch,
    parse_header,
)

__all__ = ["BatchInfo", "CleanedChunk", "Cleaning", "group_segments_by_size"]

_INT32_MAX = 2**31 - 1
_KEEP, _DELETE, _FILTER, _RETAIN_EMPTY = (BatchRetention.KEEP, BatchRetention.DELETE,
                                          BatchRetention.FILTER, BatchRetention.RETAIN_EMPTY)

# (position in the returned bytes, batch size, last offset, max timestamp) per batch: the
# shape LogSegment.append takes (odradek.log.segment.BatchInfo).
BatchInfo = tuple[int, int, int, int]


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
    # It keeps something due to go once its segment passes the delete horizon: a
    # tombstone, or the marker of a transaction with nothing left.
    keeps_deletes: bool = False


class Cleaning:
    """One cleaning of ``job`` (see the module docstring for the order of calls)."""

    def __init__(self, job: CleanJob) -> None:
        self.job = job
        self.offset_map = OffsetMap(job.max_map_entries)
        self.map_full = False
        self._stats = CleanerStats()  # the counts; the times are set by result()
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
        stats = self._stats
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
                map_txns.on_control_batch_read(header, _marker_type(data, pos, header))
                pos += size
                continue
            if header.is_transactional and map_txns.on_batch_read(header):
                pos += size  # an aborted transaction's batch: never mapped
                continue
            if header.records_count == 0:
                pos += size
                continue
            stats.map_bytes_read += size
            stats.map_messages_read += header.records_count
            buf, first, stop_pos = records_section(data, pos, header)
            keys, offsets, tombstones, keyless, _, _, _ = scan_records(
                buf, first, stop_pos, header.records_count, base)
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

    def _finish_map(self) -> None:
        """End the map phase (once): where the cleaning ends, and what it rewrites."""
        if self._end_offset >= 0:
            return
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
        self._stats.invalid_messages += sum(
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
        self._finish_map()
        return self._end_offset

    @property
    def groups(self) -> list[tuple[SegmentRef, ...]]:
        """The segments to rewrite (every one starting below :attr:`end_offset`), grouped
        into the cleaned segments that replace them (Kafka's ``groupSegmentsBySize``)."""
        self._finish_map()
        return self._groups

    # ------------------------------------------------------------------ clean phase

    def clean(self, segment: SegmentRef, data: bytes, limit: int | None = None
              ) -> CleanedChunk:
        """Filter the whole batches in ``data[:limit]``, read from ``segment`` (one of
        :attr:`groups`), into the bytes to append to its cleaned segment (Kafka's
        ``cleanInto``).

        Each batch is judged in three steps, each only if the one before leaves it open:
        the batch-level rules (:meth:`_check_batch`; a batch outside transactions with
        records is left to its records at once), the map's pre-check, and its records one
        by one (:meth:`_filter_records`). Then it is copied whole (a run of such batches
        with one slice), left out, or replaced by an emptied or rebuilt batch.
        """
        self._finish_map()
        job = self.job
        retain_deletes = retains_tombstones(segment, job.first_dirty_offset, job.now_ms,
                                            job.delete_retention_ms)
        # The pre-check: inside the mapped range the survivors of a batch are exactly the
        # mapped offsets in [base, last], counted by bisect; not where tombstones go (a
        # mapped tombstone would not survive), so there the range is empty.
        lo, hi = (job.first_dirty_offset, self._end_offset) if retain_deletes else (0, 0)
        mapped, tombstones = self._mapped, self._tombstones
        stats = self._stats
        chunk = CleanedChunk()
        out, batches = chunk.data, chunk.batches
        view = memoryview(data)
        run = -1  # where the run of batches kept whole, not yet copied, begins
        end = len(data) if limit is None else limit
        pos = 0
        while pos < end:
            header = parse_header(data, pos)
            size = header.size
            if pos + size > end:
                raise CorruptMessageError(f"batch at {pos} runs past the end of the data")
            count = header.records_count
            base = header.base_offset
            last = base + header.last_offset_delta
            stats.messages_read += count
            stats.bytes_read += size
            retention: BatchRetention | bytes = _FILTER  # outside transactions: the records decide
            if header.is_control or header.is_transactional or not count:
                retention = self._check_batch(data, pos, header, last, retain_deletes, chunk)
            if retention is _FILTER and lo <= base and last < hi:
                survivors = bisect_right(mapped, last) - bisect_left(mapped, base)
                if survivors == count:
                    retention = _KEEP
                    if bisect_right(tombstones, last) > bisect_left(tombstones, base):
                        chunk.keeps_deletes = True
                elif survivors == 0:
                    retention = when_no_record_survives(
                        count, self._is_last_of_producer(header, False, last))
            if retention is _FILTER:
                retention = self._filter_records(data, pos, header, last, retain_deletes, chunk)
            # The copy
            if retention is _KEEP:
                if run < 0:
                    run = pos
                batches.append((len(out) + pos - run, size, last, header.max_timestamp))
                stats.messages_written += count
            else:
                if run >= 0:
                    out += view[run:pos]
                    run = -1
                if retention is not _DELETE:  # emptied or rebuilt
                    written = _empty_batch(header) if retention is _RETAIN_EMPTY else retention
                    kept = parse_header(written)
                    batches.append((len(out), len(written), last, kept.max_timestamp))
                    out += written
                    stats.messages_written += kept.records_count
            pos += size
        if run >= 0:
            out += view[run:end]
        stats.bytes_written += len(out)
        if chunk.keeps_deletes:
            self._groups_keeping_tombstones.add(self._group_of[segment.base_offset])
        return chunk

    def _check_batch(self, data: bytes, pos: int, header: RecordBatchHeader, last: int,
                     retain_deletes: bool, chunk: CleanedChunk) -> BatchRetention:
        """Kafka's ``checkBatchRetention``: the transaction walk moved past the batch
        (Kafka's ``onBatchRead`` / ``onControlBatchRead``; batches outside transactions never
        move it), the facts judged by :mod:`~odradek.log.cleaner.retention`."""
        txns = self._clean_txns
        is_control = header.is_control
        if is_control:
            discardable, aborted = txns.on_control_batch_read(
                header, _marker_type(data, pos, header))
            if aborted is not None:
                chunk.aborted.append(aborted)
            if discardable and retain_deletes:
                chunk.keeps_deletes = True  # the marker goes once its segment passes the horizon
        else:
            discardable = header.is_transactional and txns.on_batch_read(header)
            if discardable:
                self._stats.aborted_batches += 1
        retention = check_batch_retention(
            is_control, header.records_count,
            should_discard_batch(is_control, discardable, retain_deletes),
            self._is_last_of_producer(header, is_control, last))
        if retention is _DELETE and is_control:
            self._stats.markers_removed += 1
        return retention

    def _filter_records(self, data: bytes, pos: int, header: RecordBatchHeader, last: int,
                        retain_deletes: bool, chunk: CleanedChunk) -> BatchRetention | bytes:
        """Judge the batch's records one by one (Kafka's ``shouldRetainRecord``): KEEP when
        all survive, the batch's fate when none does, else the batch rebuilt from the
        survivors' bytes."""
        buf, first, stop = records_section(data, pos, header)
        keys, offsets, tombstones, keyless, starts, ends, timestamp_deltas = scan_records(
            buf, first, stop, header.records_count, header.base_offset, positions=True)
        start, end = self.job.first_dirty_offset, self._end_offset
        # Keyless records in the mapped range were counted while mapping.
        self._stats.invalid_messages += sum(1 for o in keyless if not start <= o < end)
        kept = records_to_retain(keys, offsets, tombstones, self.offset_map.entries,
                                 retain_deletes)
        if retain_deletes and tombstones and kept:
            dead = set(tombstones)
            if any(offsets[i] in dead for i in kept):
                chunk.keeps_deletes = True
        if len(kept) == header.records_count:
            return _KEEP
        if not kept:
            retention = when_no_record_survives(
                header.records_count, self._is_last_of_producer(header, False, last))
            return _empty_batch(header) if retention is _RETAIN_EMPTY else retention
        body = b"".join([buf[starts[i]:ends[i]] for i in kept])
        max_timestamp = header.max_timestamp
        if header.timestamp_type is TimestampType.CREATE_TIME:
            max_timestamp = header.base_timestamp + max(map(timestamp_deltas.__getitem__, kept))
        # The records keep their bytes, so their offset and timestamp deltas stay relative
        # to the original base offset and base timestamp; lastOffsetDelta keeps covering
        # the batch's original offsets (Kafka's MemoryRecordsBuilder.overrideLastOffset).
        return encode_batch(
            compress(header.compression, body),
            base_offset=header.base_offset, last_offset_delta=header.last_offset_delta,
            records_count=len(kept), attributes=header.attributes,
            base_timestamp=header.base_timestamp, max_timestamp=max_timestamp,
            partition_leader_epoch=header.partition_leader_epoch,
            producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence)

    def _is_last_of_producer(self, header: RecordBatchHeader, is_control: bool, last: int
                             ) -> bool:
        """Kafka's ``isBatchLastRecordOfProducer``: the batch holds its idempotent producer's
        last sequence, or it is a marker of the current epoch of a producer whose state
        holds no data batch; the producer state rebuilt from the log needs it."""
        pid = header.producer_id
        if pid < 0:
            return False
        if is_control:
            epoch = self.job.marker_only_producers.get(pid)
            return epoch is not None and epoch == header.producer_epoch
        return self.job.producer_last_offsets.get(pid) == last

    # ------------------------------------------------------------------ result

    def result(self, sizes: dict[int, int], *, map_seconds: float = 0.0,
               clean_seconds: float = 0.0) -> CleanResult:
        """The CleanResult, given each written group's size by its base offset."""
        job = self.job
        groups = tuple(CleanedGroup(g[0].base_offset, tuple(s.base_offset for s in g),
                                    sizes[g[0].base_offset]) for g in self.groups)
        # A kept tombstone's segment is in the clean section next time, with the group's
        # mtime (its last segment's): it may go delete.retention.ms after that.
        due = [g[-1].last_modified_ms + job.delete_retention_ms for g in self.groups
               if g[0].base_offset in self._groups_keeping_tombstones]
        stats = replace(self._stats, map_seconds=map_seconds, clean_seconds=clean_seconds,
                        buffer_utilization=self.offset_map.utilization)
        return CleanResult(groups, self.end_offset, stats, min(due) if due else None)


def _marker_type(data: bytes, pos: int, header: RecordBatchHeader) -> ControlRecordType | None:
    """The type of the first control record of the control batch at ``pos`` (Kafka's
    ``ControlRecordType.parse``), None when the batch is empty."""
    if header.records_count == 0:
        return None
    buf, first, stop = records_section(data, pos, header)
    records = scan_records(buf, first, stop, header.records_count, header.base_offset,
                           positions=True)
    return decode_control_record_key(first_key(records, first))


def _empty_batch(header: RecordBatchHeader) -> bytes:
    """The batch emptied of its records (Kafka's ``DefaultRecordBatch.writeEmptyHeader``: no
    codec, maxTimestamp as both timestamps, offsets, producer fields, sequence and the
    transactional and control bits unchanged)."""
    return encode_batch(
        b"", base_offset=header.base_offset, last_offset_delta=header.last_offset_delta,
        records_count=0, attributes=header.attributes & ~COMPRESSION_MASK,
        base_timestamp=header.max_timestamp, max_timestamp=header.max_timestamp,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id, producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence)
