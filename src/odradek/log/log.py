"""Kafka's ``Log`` (``UnifiedLog``): one partition's replica on disk.

A log is a list of segments, the last one active. The leader appends produced batches after
checking their headers and CRCs and rewriting their base offsets in place; a follower
appends batches that already carry the leader's offsets. Reads return file regions (a
segment's descriptor, a position and a size) so the network layer can ``sendfile`` them;
consumers' reads stop at the high watermark, followers' at the log end offset.

Transactions (KIP-98): the producer state tracks ongoing transactions; an end-transaction
marker (a control batch, appended by the transaction coordinator or replicated) completes
one, and an aborted one is recorded in the ``.txnindex`` of the segment holding its marker.
The last stable offset (the first offset of a transaction still ongoing or whose marker is
not yet below the high watermark, else the high watermark) bounds READ_COMMITTED fetches,
which also get :meth:`Log.collect_aborted_transactions`.

Nothing here starts threads or timers: the log manager's ``tick`` calls
:meth:`Log.flush_if_due`, :meth:`Log.delete_old_segments` and
:meth:`Log.delete_pending_segments`.
"""

from __future__ import annotations

import bisect
import logging
import os
import random
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kio.schema.errors import ErrorCode

from odradek.common import now_ms
from odradek.config import LogConfig
from odradek.histogram import Histogram
from odradek.log.abstract_index import IndexCorruptError
from odradek.log.checkpoints import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile, fsync_dir
from odradek.log.cleaner.job import CLEANED_SUFFIX, SWAP_SUFFIX
from odradek.log.leader_epoch_cache import LeaderEpochFileCache
from odradek.log.log_dir_failure_channel import LogDirFailureChannel
from odradek.log.log_info import (
    AppendOrigin,
    FetchDataInfo,
    FileRegion,
    LogAppendInfo,
    TimestampAndOffset,
)
from odradek.log.log_loader import load_segments
from odradek.log.log_validator import assign_offsets, validate_produced
from odradek.log.partition_metadata import read_topic_id
from odradek.log.producer_state import (
    NO_GUARD_CHECK,
    CompletedTxn,
    ProducerAppend,
    ProducerStateManager,
    last_stable_offset,
)
from odradek.log.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    BatchInfo,
    LogSegment,
    filename_prefix,
)
from odradek.log.transaction_index import TXN_INDEX_SUFFIX, AbortedTxn
from odradek.protocol.errors import (
    CorruptMessageError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    for_code,
)
from odradek.protocol.records import (
    NO_TIMESTAMP,
    RecordBatchHeader,
    TimestampType,
    check_crc,
    decode_batch,
    iter_batches,
)

log = logging.getLogger(__name__)

# Kafka's LogFlushStats.logFlushTimer (LogFlushRateAndTimeMs): every fsync of a log's data, in
# milliseconds.  One per process, as in Kafka (a process runs one broker).
LOG_FLUSH_STATS = Histogram()

UnsupportedCompressionTypeError = for_code(ErrorCode.unsupported_compression_type)

_CLIENT = AppendOrigin.CLIENT

# ListOffsets special timestamps
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


class UnexpectedAppendOffsetError(Exception):
    """A follower append starts below the log end offset, or its offsets go backwards."""


@dataclass(slots=True)
class _Deletion:
    due_ms: int
    segment: LogSegment = field(compare=False)


class Log:
    """One partition's log. Open with :meth:`Log.open`."""

    def __init__(self, directory: Path, config: LogConfig, *, topic: str, partition: int,
                 time_ms: Callable[[], int], producer_id_expiration_ms: int,
                 failure_channel: LogDirFailureChannel | None = None) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.name = f"{topic}-{partition}"  # Kafka's TopicPartition.toString, for messages
        self.config = config
        self._time_ms = time_ms
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.recovery_point = 0
        self._high_watermark = 0
        self._next_offset = 0
        self._pending_deletes: list[_Deletion] = []
        self._last_flush_ms = time_ms()
        self._roll_flush_pending = False
        self._dir_dirty = False
        self._bound_cache: tuple[int, int, int] | None = None  # (offset, segment base, position)
        self.leader_epoch_cache = LeaderEpochFileCache(
            LeaderEpochCheckpointFile(directory / LEADER_EPOCH_CHECKPOINT),
            lambda: self._next_offset)
        self.producer_state = ProducerStateManager(directory, producer_id_expiration_ms)
        self.topic_id: str | None = None
        # The lowest offset the log was truncated to since the cleaner last looked (the
        # cleaner lowers its checkpoint to it; Kafka's maybeTruncateCheckpoint).
        self.truncated_to: int | None = None
        # Where an I/O error takes this log's directory offline (None: only raised).
        self.failure_channel = failure_channel

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, topic: str, partition: int,
             log_start_offset: int = 0, recovery_point: int = 0, high_watermark: int = 0,
             had_clean_shutdown: bool = True, time_ms: Callable[[], int] = now_ms,
             producer_id_expiration_ms: int = 86_400_000, sync_parent: bool = True,
             failure_channel: LogDirFailureChannel | None = None) -> Log:
        """Open (creating if needed) the log in ``directory`` and recover it if the broker
        did not shut down cleanly. A created directory is made durable by an fsync of its
        parent, unless ``sync_parent`` is False (the caller then does it, for many at once)."""
        created = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        if created and sync_parent:
            fsync_dir(directory.parent)  # the partition directory itself must survive a crash
        self = cls(directory, config, topic=topic, partition=partition, time_ms=time_ms,
                   producer_id_expiration_ms=producer_id_expiration_ms, failure_channel=failure_channel)
        self.topic_id = read_topic_id(directory)
        cache = self.leader_epoch_cache

        def on_batch(header: RecordBatchHeader) -> None:
            epoch = header.partition_leader_epoch
            if epoch >= 0 and (cache.latest_epoch is None or epoch > cache.latest_epoch):
                cache.assign(epoch, header.base_offset)

        loaded = load_segments(directory, self._make_segment, recovery_point=recovery_point,
                               had_clean_shutdown=had_clean_shutdown, on_batch=on_batch)
        if not loaded.segments:
            loaded.segments.append(self._make_segment(log_start_offset))
            self._dir_dirty = True
        self.segments = loaded.segments
        self._bases = [s.base_offset for s in self.segments]
        self._next_offset = self.active_segment.next_offset
        if cache.unreadable:
            for header in self._headers_from(self.segments[0].base_offset):
                on_batch(header)
            cache.unreadable = False
        self.log_start_offset = min(max(log_start_offset, self.segments[0].base_offset),
                                    self._next_offset)
        self.recovery_point = min(max(recovery_point, self.log_start_offset), self._next_offset)
        if loaded.recovered:
            # What recovery accepted is now the log, with the indexes it rebuilt: make them
            # durable. flush() covers the segments past the recovery point; below it, a failed
            # sanity check rebuilt the indexes, whose files would otherwise stay empty until a
            # clean shutdown.
            for i, segment in enumerate(self.segments):
                upper = self._bases[i + 1] if i + 1 < len(self.segments) else self._next_offset
                if segment.base_offset in loaded.recovered_bases and upper <= self.recovery_point:
                    segment.index.flush()
                    segment.time_index.flush()
            self.flush()
        cache.truncate_from_end(self._next_offset)
        cache.truncate_from_start(self.log_start_offset)
        if loaded.recovered_bases:
            self._rebuild_txn_indexes(loaded.recovered_bases)
        else:
            self._rebuild_producer_state()
        self._high_watermark = min(max(high_watermark, self.log_start_offset), self._next_offset)
        self.producer_state.on_high_watermark_updated(self._high_watermark)
        if loaded.truncated_bytes:
            log.warning("%s: recovered to log end offset %d", directory, self._next_offset)
        return self

    def _make_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        jitter = self.config.segment_jitter_ms
        return LogSegment(
            self.dir, base_offset, index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes, now_ms=self._time_ms(),
            roll_jitter_ms=random.randrange(min(jitter, self.config.segment_ms)) if jitter else 0,
            suffix=suffix)

    def _rebuild_producer_state(self) -> None:
        """Kafka's ``loadProducerState``: the latest usable snapshot, then the batches after
        it (markers read whole, so transactions complete as they did at append)."""
        start = self.producer_state.truncate_and_reload(self.log_start_offset, self._next_offset,
                                                        self._time_ms())
        if start < self._next_offset:
            self.producer_state.replay(self._headers_from(start), self._next_offset,
                                       self._read_stored_batch)

    def _rebuild_txn_indexes(self, bases: set[int]) -> None:
        """Rebuild the ``.txnindex`` of the re-scanned segments ``bases`` together with the
        producer state (Kafka's ``LogSegment.recover`` with the producer state as of the
        segment's start): replay from a snapshot at or before the first of them, and give
        each aborted transaction to the segment holding its marker."""
        rebuilt = [s for s in self.segments if s.base_offset in bases]
        for segment in rebuilt:
            segment.txn_index.delete()
        first = rebuilt[0].base_offset
        state = self.producer_state
        # Snapshots past the first re-scanned segment may describe data recovery dropped.
        start = state.truncate_and_reload(self.log_start_offset, max(first, self.log_start_offset),
                                          self._time_ms())
        aborted = state.replay(self._headers_from(start), self._next_offset,
                               self._read_stored_batch)
        for txn in aborted:
            segment = self.segment_for(txn.last_offset)
            if segment is not None and segment.base_offset in bases:
                segment.update_txn_index(txn)
        for segment in rebuilt:
            segment.txn_index.flush()
        state.take_snapshot()

    def _read_stored_batch(self, header: RecordBatchHeader) -> bytes:
        """The stored bytes of the batch ``header`` describes (for markers in a replay);
        CorruptMessageError when no batch is at its offset (a header whose offset lies, in
        a log the broker trusts)."""
        segment = self.segment_for(header.base_offset)
        found = None if segment is None else segment.translate_offset(header.base_offset)
        if segment is None or found is None:
            raise CorruptMessageError(f"{self}: no batch at offset {header.base_offset}, where a header says")
        return segment.read_bytes(found[0], header.size)

    def _headers_from(self, offset: int) -> Iterator[RecordBatchHeader]:
        """The stored batch headers from ``offset`` on, for the rebuilds at open. A malformed
        header (in a log the broker trusts: recovery truncates at one) ends them, logged: the
        state covers what comes before it, and a read there answers CORRUPT_MESSAGE."""
        try:
            for segment in self.segments[max(self._segment_index(offset), 0):]:
                yield from segment.iter_headers(offset if segment.base_offset <= offset else None)
        except (CorruptMessageError, InvalidRecordError) as e:
            log.error("%s: state rebuilt only up to a corrupt batch: %s", self, e)

    # ------------------------------------------------------------------ state

    def __repr__(self) -> str:
        return (f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, "
                f"end={self._next_offset}, hw={self._high_watermark})")

    def _storage_error(self, doing: str, error: OSError) -> KafkaStorageError:
        """Kafka's maybeHandleIOException: report this log's directory as failed and
        return the KAFKA_STORAGE_ERROR to raise."""
        message = f"Error while {doing} {self.name} in dir {self.dir.parent}"
        if self.failure_channel is not None:
            self.failure_channel.maybe_add_offline_log_dir(self.dir.parent, message, error)
        return KafkaStorageError(f"{message}: {error.strerror or error}")

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def unflushed_messages(self) -> int:
        return self._next_offset - self.recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to ``[log_start_offset, log_end_offset]``."""
        self._high_watermark = hw = min(max(offset, self.log_start_offset), self._next_offset)
        state = self.producer_state
        if state.unreplicated_txns:  # cheap test: on every HW move
            state.on_high_watermark_updated(hw)
        return hw

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Raise the high watermark to ``offset`` (never lowers it); True if it moved."""
        if offset <= self._high_watermark:
            return False
        self.update_high_watermark(offset)
        return True

    # ------------------------------------------------------------------ transactions

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction still ongoing or whose marker is not
        yet below the high watermark, never below the log start offset (Kafka's
        ``firstUnstableOffset``); None when there is none."""
        offset = self.producer_state.first_unstable_offset()
        if offset is None:
            return None
        return max(offset, self.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """Where READ_COMMITTED fetches stop: min(first unstable offset, high watermark)."""
        return last_stable_offset(self.first_unstable_offset, self._high_watermark)

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """The producer, known with this epoch, has a transaction ongoing in this log."""
        return self.producer_state.has_ongoing_transaction(producer_id, producer_epoch)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int
                                     ) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset, upper_bound_offset)``: from
        the segment holding ``start_offset`` on, until a segment's index says the search is
        complete (Kafka's ``collectAbortedTransactions``)."""
        found: list[AbortedTxn] = []
        for segment in self.segments[max(self._segment_index(start_offset), 0):]:
            txns, complete = segment.txn_index.collect_aborted_txns(start_offset,
                                                                    upper_bound_offset)
            found.extend(txns)
            if complete:
                break
        return found

    def _complete_txns(self, completed: list[CompletedTxn]) -> None:
        """After the append holding their markers: index aborted transactions in the
        segment holding the marker, then mark them decided (Kafka's ``Log.append``:
        ``updateTxnIndex`` and ``completeTxn``)."""
        state = self.producer_state
        for txn in completed:
            aborted = state.complete_txn(txn, state.last_stable_offset_for(txn))
            if aborted is not None:
                segment = self.segment_for(txn.last_offset)
                if segment is not None:
                    segment.update_txn_index(aborted)

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: see :meth:`LeaderEpochFileCache.end_offset_for`."""
        return self.leader_epoch_cache.end_offset_for(epoch)

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """A new leader records its epoch's start (its log end offset) before appending."""
        try:
            self.leader_epoch_cache.assign(epoch, start_offset)
        except OSError as e:
            raise self._storage_error("recording a leader epoch of", e) from e

    def _segment_index(self, offset: int) -> int:
        return bisect.bisect_right(self._bases, offset) - 1

    # ------------------------------------------------------------------ appends

    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int,
                         origin: AppendOrigin = AppendOrigin.CLIENT,
                         verification_guard: object = NO_GUARD_CHECK) -> LogAppendInfo:
        """Validate produced batches, assign offsets in place and append them.

        A ``bytearray`` is rewritten in place; other inputs are copied once. Raises
        CorruptMessageError (bad structure or CRC), InvalidRecordError (client rule broken,
        e.g. a control batch), MessageTooLargeError, RecordListTooLargeError,
        InvalidTimestampError, OutOfOrderSequenceError, InvalidProducerEpochError,
        InvalidTxnStateError (a non-transactional batch during the producer's transaction,
        or a transaction start without the producer's verification guard, KIP-890) or
        TransactionCoordinatorFencedError, and appends nothing then. A retried idempotent
        batch returns its original offsets with ``duplicate=True``. ``origin`` COORDINATOR
        may write control batches (end-transaction markers) and skips sequence checks;
        ``verification_guard`` applies to CLIENT appends only.
        """
        # Offsets are rewritten in place: a bytearray, or a writable view into one (a produce
        # request read into its own buffer), is used as it is; anything else is copied once.
        if isinstance(records, bytearray) or (isinstance(records, memoryview) and not records.readonly):
            buf = records
        else:
            buf = bytearray(records)
        now = self._time_ms()
        from_client = origin is _CLIENT
        batches = validate_produced(buf, self.config, now, self.name, from_client=from_client)
        log_append = self.config.message_timestamp_type == "LogAppendTime"
        if from_client:
            for _, header in batches:
                dup = self.producer_state.find_duplicate(header) if header.producer_id >= 0 else None
                if dup is not None:
                    # Kafka answers a duplicate with the first append's timestamp as its
                    # log append time, whatever the topic's timestamp type.
                    return LogAppendInfo(dup.first_offset, dup.last_offset, dup.timestamp,
                                         dup.last_offset, dup.timestamp,
                                         self.log_start_offset, 0, 0, 0, duplicate=True)
            update = self.producer_state.prepare(True, verification_guard=verification_guard)
        else:
            # Kafka's AppendOrigin.Coordinator: fencing checked, no sequences.
            update = self.producer_state.prepare(True, check_sequences=False)
        completed: list[CompletedTxn] = []

        def on_batch(pos: int, header: RecordBatchHeader, first: int, last: int, ts: int) -> None:
            if header.producer_id >= 0:
                if header.is_control:
                    txn = update.add(header, first, last, ts,
                                     memoryview(buf)[pos:pos + header.size])
                    if txn is not None:
                        completed.append(txn)
                else:
                    update.add(header, first, last, ts)

        assigned = assign_offsets(buf, batches, self._next_offset, leader_epoch,
                                  now if log_append else None, on_batch)
        if leader_epoch >= 0:
            latest = self.leader_epoch_cache.latest_epoch
            if latest is None or leader_epoch > latest:
                self.assign_epoch_start_offset(leader_epoch, assigned.first_offset)
        self._write(buf, assigned.infos, assigned.first_offset, assigned.last_offset,
                    assigned.max_timestamp, now, update, completed)
        return LogAppendInfo(assigned.first_offset, assigned.last_offset, assigned.max_timestamp,
                             assigned.offset_of_max_timestamp, now if log_append else NO_TIMESTAMP,
                             self.log_start_offset, len(batches), assigned.num_records, len(buf))

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches fetched from the leader (offsets and epochs already set).

        A trailing partial batch is ignored (the next fetch brings it). Raises
        CorruptMessageError for a bad CRC and UnexpectedAppendOffsetError when the batches
        start below the log end offset or go backwards. End-transaction markers complete
        their transactions as on the leader. An empty log whose start lies inside the first
        batch starts over at that batch's base offset and takes it whole (Kafka's
        Partition.appendRecordsToFollowerOrFutureReplica): a replica that starts over at the
        leader's log start, which DeleteRecords may have put inside a batch, would otherwise
        be refused that batch on every fetch.
        """
        batches = list(iter_batches(records, partial_tail_ok=True))
        if not batches:
            return LogAppendInfo(-1, -1, NO_TIMESTAMP, -1, NO_TIMESTAMP, self.log_start_offset,
                                 0, 0, 0)
        head_position, head = batches[0]
        end = self._next_offset
        if head.base_offset < end == self.log_start_offset and batches[-1][1].last_offset >= end:
            check_crc(records, head_position, head)  # nothing is truncated for a corrupt batch
            self.truncate_fully_and_start_at(head.base_offset)
        update = self.producer_state.prepare(from_client=False)
        cache = self.leader_epoch_cache
        infos: list[BatchInfo] = []
        expected = self._next_offset
        max_ts, offset_of_max = NO_TIMESTAMP, -1
        num_records = 0
        completed: list[CompletedTxn] = []
        for pos, header in batches:
            check_crc(records, pos, header)
            if header.base_offset < expected:
                raise UnexpectedAppendOffsetError(
                    f"batch at offset {header.base_offset} is below the expected offset "
                    f"{expected} of {self.topic}-{self.partition}")
            if header.has_producer_id:
                if header.is_control:
                    txn = update.add(header, header.base_offset, header.last_offset,
                                     header.max_timestamp,
                                     memoryview(records)[pos:pos + header.size])
                    if txn is not None:
                        completed.append(txn)
                else:
                    update.add(header, header.base_offset, header.last_offset,
                               header.max_timestamp)
            if header.max_timestamp > max_ts:
                max_ts, offset_of_max = header.max_timestamp, header.last_offset
            infos.append((pos, header.size, header.last_offset, header.max_timestamp))
            num_records += header.records_count
            expected = header.next_offset
        valid = batches[-1][0] + batches[-1][1].size
        first = batches[0][1].base_offset
        for _, header in batches:
            epoch = header.partition_leader_epoch
            if epoch >= 0 and (cache.latest_epoch is None or epoch > cache.latest_epoch):
                self.assign_epoch_start_offset(epoch, header.base_offset)
        data = records if valid == len(records) else memoryview(records)[:valid]
        self._write(data, infos, first, expected - 1, max_ts, self._time_ms(), update, completed)
        return LogAppendInfo(first, expected - 1, max_ts, offset_of_max, NO_TIMESTAMP,
                             self.log_start_offset, len(batches), num_records, valid)

    def _write(self, data: bytes | bytearray | memoryview, infos: list[BatchInfo], first: int,
               last: int, max_ts: int, now: int, update: ProducerAppend, completed: list[CompletedTxn]
               ) -> None:
        """Append validated batches to the active segment (rolled first when due) and make them
        the log's: producer state, the transactions their markers complete, a flush if due.  An
        I/O error reports the directory and raises KAFKA_STORAGE_ERROR."""
        try:
            segment = self.active_segment
            if segment.should_roll(messages_size=len(data), max_timestamp=max_ts, max_offset=last,
                                   now_ms=now, segment_bytes=self.config.segment_bytes,
                                   segment_ms=self.config.segment_ms):
                segment = self.roll(first)
            before = segment.size
            try:
                segment.append(data, infos)
            except OSError:
                # Leave no partial batch behind if the disk lets us; otherwise recovery will.
                try:
                    os.ftruncate(segment.fd, before)
                    segment.size = before
                    segment.forget_tail()
                except OSError:
                    pass
                raise
            self._next_offset = last + 1
            update.commit(self._next_offset)
            if completed:
                self._complete_txns(completed)
            self._maybe_flush()
        except OSError as e:
            raise self._storage_error("appending records to", e) from e

    def _maybe_flush(self) -> None:
        if self._next_offset - self.recovery_point >= self.config.flush_messages:
            self.flush()

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, log end offset)``."""
        new_base = max(expected_next_offset or 0, self._next_offset)
        old = self.active_segment
        if old.size == 0 and old.base_offset == new_base:
            return old
        old.on_become_inactive()
        for path in (self.dir / f"{filename_prefix(new_base)}{suffix}" for suffix in
                     (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
            if path.exists():  # a stale empty leftover with our name (never a live segment)
                path.unlink()
        segment = self._make_segment(new_base)
        self.segments.append(segment)
        self._bases.append(new_base)
        self._dir_dirty = True
        self._roll_flush_pending = True
        self.producer_state.map_end_offset = max(self.producer_state.map_end_offset, new_base)
        self.producer_state.take_snapshot()
        return segment

    # ------------------------------------------------------------------ reads

    def read(self, start_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True) -> FetchDataInfo:
        """Whole batches from the one holding ``start_offset``, up to ``max_bytes`` (the
        first batch whole if ``min_one_message``) and before ``max_offset`` (exclusive;
        pass the high watermark for consumers, None for followers: the log end offset).

        Raises OffsetOutOfRangeError outside ``[log_start_offset, log_end_offset]``.
        """
        end = self._next_offset
        if start_offset < self.log_start_offset or start_offset > end:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is out of range for {self.topic}-{self.partition}: "
                f"[{self.log_start_offset}, {end}]")
        bound = end if max_offset is None else min(max_offset, end)
        if start_offset >= bound:
            return FetchDataInfo(start_offset)
        i = max(self._segment_index(start_offset), 0)
        while i < len(self.segments):
            segment = self.segments[i]
            try:
                if i + 1 < len(self.segments) and self._bases[i + 1] <= bound:
                    max_position = segment.size
                else:
                    max_position = self._position_of(bound, segment)
                found = segment.read(start_offset, max_bytes, max_position, min_one_message)
            except OSError as e:
                raise self._storage_error("reading", e) from e
            if found is not None:
                position, size = found
                if not size:
                    return FetchDataInfo(start_offset)
                return FetchDataInfo(start_offset,
                                     (FileRegion(segment.fd, position, size, segment.log_path),))
            i += 1
        return FetchDataInfo(start_offset)

    def read_chunks(self, max_bytes: int) -> Iterator[bytes]:
        """The whole log, from its start offset to the log end offset at the call, in chunks
        of whole batches of about ``max_bytes`` (how coordinators load an internal topic)."""
        offset, end = self.log_start_offset, self._next_offset
        while offset < end:
            data = self.read(offset, max_bytes, end).read_bytes()
            if not data:
                return
            for _, header in iter_batches(data):
                offset = header.next_offset
            yield data

    def _position_of(self, offset: int, segment: LogSegment) -> int:
        """Position in ``segment`` of the batch holding ``offset`` (its size past the end)."""
        if offset >= self._next_offset and segment is self.active_segment:
            return segment.size
        cached = self._bound_cache
        if cached is not None and cached[0] == offset and cached[1] == segment.base_offset:
            return cached[2]
        found = segment.translate_offset(offset)
        position = found[0] if found is not None else segment.size
        self._bound_cache = (offset, segment.base_offset, position)
        return position

    def offset_for_timestamp(self, timestamp: int, max_offset: int | None = None
                             ) -> TimestampAndOffset | None:
        """ListOffsets: the first offset with a timestamp >= ``timestamp``, or the special
        EARLIEST (-2), LATEST (-1) and MAX_TIMESTAMP (-3) answers. ``max_offset`` bounds the
        answer (the high watermark for consumers); None when there is no such offset."""
        bound = self._next_offset if max_offset is None else min(max_offset, self._next_offset)
        cache = self.leader_epoch_cache
        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self.log_start_offset,
                                      cache.epoch_for_offset(self.log_start_offset))
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, bound, cache.latest_epoch)
        if timestamp == MAX_TIMESTAMP:
            best = max(self.segments, key=lambda s: s.max_timestamp_so_far)
            newest = best.max_timestamp_so_far
            if newest < 0 or best.offset_of_max_timestamp_so_far >= bound:
                return None
            # The record that carries it, not its batch's last offset (Kafka 3.8+, KAFKA-16310).
            found = best.find_batch_by_timestamp(newest, self.log_start_offset)
            offset = best.offset_of_max_timestamp_so_far
            if found is not None:
                newest, offset = self._first_record_at_or_after(best, *found, newest)
            return TimestampAndOffset(newest, offset, cache.epoch_for_offset(offset))
        for segment in self.segments:
            if segment.largest_timestamp < timestamp:
                continue
            try:
                found = segment.find_batch_by_timestamp(timestamp, self.log_start_offset)
                if found is None:
                    continue
                ts, offset = self._first_record_at_or_after(segment, *found, timestamp)
            except OSError as e:
                raise self._storage_error("searching by timestamp in", e) from e
            if offset >= bound:
                return None
            return TimestampAndOffset(ts, offset, cache.epoch_for_offset(offset))
        return None

    def _first_record_at_or_after(self, segment: LogSegment, position: int,
                                  header: RecordBatchHeader, timestamp: int) -> tuple[int, int]:
        """Refine a batch to its first record at or after ``timestamp`` (decodes this one
        batch; a LogAppendTime batch or an undecodable codec answers with the batch)."""
        floor = self.log_start_offset
        if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
            return header.max_timestamp, max(header.base_offset, floor)
        try:
            _, records = decode_batch(segment.read_bytes(position, header.size))
        except UnsupportedCompressionTypeError:
            return header.max_timestamp, max(header.base_offset, floor)
        for record in records:
            if record.timestamp >= timestamp and record.offset >= floor:
                return record.timestamp, record.offset
        return header.max_timestamp, header.last_offset

    # ------------------------------------------------------------------ truncation, retention

    def truncate_to(self, target_offset: int) -> bool:
        """Remove everything at or after ``target_offset`` (a follower diverged); returns
        False if the log already ends at or before it. Either way the leader epochs that
        start at or past the end go: a deposed leader records its epoch's start before it
        writes anything, and that empty epoch would otherwise stay its last one, which its
        new leader (asked by a Kafka 2.7+ follower's last fetched epoch) never had."""
        if target_offset < 0:
            raise ValueError(f"cannot truncate to a negative offset {target_offset}")
        if target_offset >= self._next_offset:
            try:
                self.leader_epoch_cache.truncate_from_end(self._next_offset)
            except OSError as e:
                raise self._storage_error("truncating the leader epochs of", e) from e
            return False
        if target_offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(target_offset)
            return True
        try:
            keep = self._segment_index(target_offset) + 1
            self._async_delete(self.segments[keep:])
            del self.segments[keep:]
            del self._bases[keep:]
            self.active_segment.truncate_to(target_offset)
            self._next_offset = self.active_segment.next_offset
            self._after_truncation()
        except OSError as e:
            raise self._storage_error("truncating", e) from e
        return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start empty at ``new_offset``."""
        try:
            self._async_delete(self.segments)
            self.segments = [self._make_segment(new_offset)]
            self._bases = [new_offset]
            self._dir_dirty = True
            self.leader_epoch_cache.clear_and_flush()
            self.producer_state.truncate_fully_and_start_at(new_offset)
            self._next_offset = self.log_start_offset = self.recovery_point = new_offset
            self._after_truncation()
        except OSError as e:
            raise self._storage_error("truncating", e) from e

    def _after_truncation(self) -> None:
        self._bound_cache = None
        end = self._next_offset
        self.truncated_to = end if self.truncated_to is None else min(self.truncated_to, end)
        self.log_start_offset = min(self.log_start_offset, end)
        self.recovery_point = min(self.recovery_point, end)
        self._high_watermark = min(self._high_watermark, end)
        self.leader_epoch_cache.truncate_from_end(end)
        self._rebuild_producer_state()
        self.producer_state.on_high_watermark_updated(self._high_watermark)

    def maybe_increment_log_start_offset(self, new_start_offset: int) -> bool:
        """DeleteRecords: move the log start offset forward (never past the high
        watermark); segments wholly below it go at the next retention pass."""
        if new_start_offset > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot increment the log start offset to {new_start_offset} of "
                f"{self.topic}-{self.partition}: it is past the high watermark "
                f"{self._high_watermark}")
        if new_start_offset <= self.log_start_offset:
            return False
        self.log_start_offset = new_start_offset
        self.leader_epoch_cache.truncate_from_start(new_start_offset)
        return True

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention: delete whole segments below the log start offset, older than
        ``retention.ms`` or beyond ``retention.bytes``, never at or past the high watermark.
        Returns the number of segments deleted."""
        now = self._time_ms() if now_ms is None else now_ms
        start = self.log_start_offset
        deleted = self._delete_segments(lambda s, nxt: nxt is not None and nxt.base_offset <= start)
        if "delete" not in self.config.cleanup_policy:
            return deleted
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            deleted += self._delete_segments(lambda s, _: now - s.largest_timestamp > retention_ms)
        if self.config.retention_bytes >= 0:
            excess = self.size - self.config.retention_bytes

            def over_size(segment: LogSegment, _: LogSegment | None) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True

            deleted += self._delete_segments(over_size)
        return deleted

    def _delete_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> int:
        deletable: list[LogSegment] = []
        for i, segment in enumerate(self.segments):
            nxt = self.segments[i + 1] if i + 1 < len(self.segments) else None
            upper = nxt.base_offset if nxt is not None else self._next_offset
            if self._high_watermark < upper or not predicate(segment, nxt):
                break
            if nxt is None and segment.size == 0:
                break
            deletable.append(segment)
        if not deletable:
            return 0
        if len(deletable) == len(self.segments):
            self.roll()  # always keep an active segment
        del self.segments[:len(deletable)]
        del self._bases[:len(deletable)]
        self._async_delete(deletable)
        self._bound_cache = None
        if self.segments[0].base_offset > self.log_start_offset:
            self.log_start_offset = self.segments[0].base_offset
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self.producer_state.delete_snapshots_before(self.segments[0].base_offset)
        return len(deletable)

    # ------------------------------------------------------------------ cleaning

    def cleanable_segments(self, first_uncleanable_offset: int) -> list[LogSegment]:
        """The segments a cleaning may rewrite: from the first, every one that ends at or
        below ``first_uncleanable_offset`` (never the active segment)."""
        out = []
        for i, segment in enumerate(self.segments[:-1]):
            if self._bases[i + 1] > first_uncleanable_offset:
                break
            out.append(segment)
        return out

    def segment_for(self, offset: int) -> LogSegment | None:
        """The segment whose offset range holds ``offset`` (None below the first segment)."""
        i = self._segment_index(offset)
        return self.segments[i] if i >= 0 else None

    def segment_end(self, segment: LogSegment) -> int:
        """One past ``segment``'s last offset: its successor's base (or the log end)."""
        i = self._segment_index(segment.base_offset)
        return self._bases[i + 1] if i + 1 < len(self._bases) else self._next_offset

    def holds_segments(self, segments: list[tuple[LogSegment, int]]) -> bool:
        """True while every ``(segment, size)`` is still a non-active segment of this log
        with that size (retention, truncation or deletion since a cleaning started make it
        False: the cleaning's output is then stale)."""
        live = {id(s) for s in self.segments[:-1]}
        return all(id(segment) in live and segment.size == size and segment.fd >= 0
                   for segment, size in segments)

    def replace_segments(self, groups: list[tuple[list[LogSegment], int]]) -> list[LogSegment]:
        """Swap cleaned segments in (Kafka's replaceSegments, for a whole cleaning at once):
        each group is a consecutive run of inactive segments and the base offset of the
        ``<base>.log.cleaned`` segment (with its indexes) made from them.

        Crash-safe at every step, for the cleaning as a whole: first every ``.cleaned`` file
        becomes ``.swap``; until the last has, a load finds a ``.cleaned`` file and discards
        every ``.swap`` and ``.cleaned`` one (the old log). Then, group by group, the old
        segments become ``.deleted`` and the ``.swap`` files take the live names; a load
        completes any swap left (see log_loader)."""
        runs: list[tuple[int, list[LogSegment], LogSegment]] = []
        for old, base in groups:
            first = next((i for i, s in enumerate(self.segments) if s is old[0]), -1)
            if first < 0 or first + len(old) >= len(self.segments) or any(
                    a is not b for a, b in zip(self.segments[first:first + len(old)], old, strict=True)):
                raise ValueError(f"{self}: cannot replace {old}: not a run of inactive segments")
            cleaned = self.dir / f"{filename_prefix(base)}{LOG_SUFFIX}{CLEANED_SUFFIX}"
            if not cleaned.exists():
                raise FileNotFoundError(f"{cleaned} does not exist")
            new = self._make_segment(base, CLEANED_SUFFIX)
            try:
                new.sanity_check()
            except IndexCorruptError:
                new.recover()
            runs.append((first, old, new))
        for _, _, new in runs:
            new.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
        for first, old, new in sorted(runs, key=lambda r: r[0], reverse=True):
            self.segments[first:first + len(old)] = [new]
            self._bases[first:first + len(old)] = [new.base_offset]
        for _, old, new in runs:
            self._async_delete(old)
            new.change_suffix(SWAP_SUFFIX, "")
        fsync_dir(self.dir)
        self._bound_cache = None
        return [new for _, _, new in runs]

    def _async_delete(self, segments: list[LogSegment]) -> None:
        """Rename to ``.deleted`` now (out of the log), unlink after file.delete.delay.ms, so
        file regions handed out for sendfile stay readable meanwhile."""
        due = self._time_ms() + self.config.file_delete_delay_ms
        for segment in segments:
            segment.add_suffix(DELETED_SUFFIX)
            self._pending_deletes.append(_Deletion(due, segment))

    def delete_pending_segments(self, now_ms: int) -> None:
        """Unlink segments whose delete delay has passed."""
        keep = []
        for pending in self._pending_deletes:
            if pending.due_ms <= now_ms:
                pending.segment.delete()
            else:
                keep.append(pending)
        self._pending_deletes = keep

    # ------------------------------------------------------------------ durability, lifecycle

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding data below ``offset`` (default: everything) that is
        past the recovery point, then advance the recovery point."""
        offset = self._next_offset if offset is None else min(offset, self._next_offset)
        if offset > self.recovery_point:
            started_ns = time.monotonic_ns()
            try:
                for i, segment in enumerate(self.segments):
                    upper = self._bases[i + 1] if i + 1 < len(self.segments) else self._next_offset
                    if segment.base_offset < offset and upper > self.recovery_point:
                        segment.flush()
                if self._dir_dirty:
                    fsync_dir(self.dir)
                    self._dir_dirty = False
            except OSError as e:
                raise self._storage_error("flushing", e) from e
            LOG_FLUSH_STATS.update((time.monotonic_ns() - started_ns) / 1e6)
            self.recovery_point = offset
        self._last_flush_ms = self._time_ms()

    def flush_if_due(self, now_ms: int) -> None:
        """Flush rolled segments (Kafka flushes them in the background at roll) and, per
        ``flush.ms``, everything."""
        if now_ms - self._last_flush_ms >= self.config.flush_ms:
            self.flush()
        elif self._roll_flush_pending:
            self.flush(self.active_segment.base_offset)
        self._roll_flush_pending = False

    def close(self) -> None:
        """Snapshot producer state and release every descriptor (no fsync: see flush)."""
        self.producer_state.map_end_offset = self._next_offset
        self.producer_state.take_snapshot()
        for segment in self.segments:
            segment.close()
        for pending in self._pending_deletes:
            pending.segment.delete()
        self._pending_deletes = []

    def close_handlers(self) -> None:
        """Release every descriptor without writing anything (the directory failed, so a
        snapshot or index write would only fail again; Kafka's closeHandlers)."""
        for segment in self.segments + [p.segment for p in self._pending_deletes]:
            segment.close_handlers()

    def rename_dir(self, new_dir: Path) -> None:
        """Move the partition directory (async delete); descriptors stay valid."""
        os.rename(self.dir, new_dir)
        self.dir = new_dir
        for segment in self.segments:
            segment.update_directory(new_dir)
        for pending in self._pending_deletes:
            pending.segment.update_directory(new_dir)
        self.producer_state.directory = new_dir
        self.leader_epoch_cache.checkpoint.path = new_dir / LEADER_EPOCH_CHECKPOINT

    def delete(self) -> None:
        """Release descriptors and remove the directory with everything in it."""
        for segment in self.segments + [p.segment for p in self._pending_deletes]:
            segment.delete()
        self.segments = []
        self._pending_deletes = []
        shutil.rmtree(self.dir, ignore_errors=True)


__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "LOG_FLUSH_STATS",
    "MAX_TIMESTAMP",
    "NO_GUARD_CHECK",
    "AbortedTxn",
    "AppendOrigin",
    "FetchDataInfo",
    "FileRegion",
    "Log",
    "LogAppendInfo",
    "TimestampAndOffset",
    "UnexpectedAppendOffsetError",
]
