"""Kafka's ``ProducerStateManager``: idempotent producers' epochs and sequence numbers.

Per producer id the log keeps the producer epoch and the metadata of its last five batches
(sequence range and offsets), exactly what is needed to

* acknowledge a retried batch again at the offsets it was first written at (a *duplicate*:
  same epoch, same first and last sequence as one of the five), without a second append;
* refuse a gap or reordering (OUT_OF_ORDER_SEQUENCE_NUMBER) and a zombie producer with an
  older epoch (INVALID_PRODUCER_EPOCH, Kafka >= 2.7's code for produce).

As in Kafka >= 2.5 (KIP-360), a producer id the partition does not know (never seen, or
its batches were all deleted and it expired) may start at any sequence, so the log itself
never answers UNKNOWN_PRODUCER_ID. State is rebuilt from batch headers after a restart or
truncation, starting from the latest snapshot (``<offset>.snapshot`` in Kafka's format),
written at segment roll and at close.

Transactions (KIP-98), as Kafka 2.8's ``ProducerAppendInfo`` / ``ProducerStateManager``:
a transactional data batch starts a transaction when the producer has none ongoing
(``current_txn_first_offset``); an end-transaction marker (COMMIT or ABORT control batch)
completes it as a :class:`CompletedTxn`. The manager keeps the ongoing transactions in
first-offset order (Kafka's ``ongoingTxns``) and the completed ones whose marker is not yet
below the high watermark (``unreplicatedTxns``); together they give the first unstable
offset, from which the log will derive its last stable offset for READ_COMMITTED fetches.
An aborted transaction is returned by :meth:`ProducerStateManager.complete_txn` as the
:class:`AbortedTxn` the log appends to the segment's ``.txnindex``.

KIP-890 part 1: a client's transactional batch that would start a transaction must carry
the verification guard the produce path created (:meth:`ProducerStateManager.create_verification_guard`)
before the coordinator confirmed the partition is part of the transaction.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
from kio.schema.errors import ErrorCode

from odradek.log.checkpoints import write_atomically
from odradek.log.segment import filename_prefix
from odradek.log.transaction_index import AbortedTxn
from odradek.protocol.control_records import ControlRecordType, decode_end_txn_marker
from odradek.protocol.errors import CorruptMessageError, InvalidRecordError, for_code
from odradek.protocol.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, RecordBatchHeader

InvalidProducerEpochError = for_code(ErrorCode.invalid_producer_epoch)
OutOfOrderSequenceError = for_code(ErrorCode.out_of_order_sequence_number)
TransactionCoordinatorFencedError = for_code(ErrorCode.transaction_coordinator_fenced)
InvalidTxnStateError = for_code(ErrorCode.invalid_txn_state)

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_VERSION = 1
_INT32_MAX = 2**31 - 1
# PidSnapshot v1: version int16, crc uint32 (CRC-32C of everything after it), entry count
# int32, then per producer: id int64, epoch int16, last sequence int32, last offset int64,
# offset delta int32, timestamp int64, coordinator epoch int32, txn first offset int64.
_SNAPSHOT_HEAD = struct.Struct(">hIi")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")

log = logging.getLogger(__name__)


class _NoGuardCheck:
    """The type of :data:`NO_GUARD_CHECK`."""

    def __repr__(self) -> str:
        return "NO_GUARD_CHECK"


# Passed as an append's verification guard: skip the KIP-890 check (replication, the
# coordinator's appends, and callers that verified nothing).
NO_GUARD_CHECK: object = _NoGuardCheck()

# Gives the stored bytes of a control batch (replay reads only headers otherwise).
BatchReader = Callable[[RecordBatchHeader], bytes | bytearray | memoryview]


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """Kafka's ``CompletedTxn``: a transaction ended by the marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


def last_stable_offset(first_unstable_offset: int | None, high_watermark: int) -> int:
    """A partition's last stable offset: its first unstable offset when that is below the
    high watermark, else the high watermark (Kafka's ``Log.lastStableOffset``)."""
    if first_unstable_offset is None:
        return high_watermark
    return min(first_unstable_offset, high_watermark)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Where one producer batch landed."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None  # first offset of the ongoing transaction

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, header: RecordBatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        for batch in self.batches:
            if batch.first_seq == first and batch.last_seq == last:
                return batch
        return None

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()  # sequences restart with a new epoch
            self.producer_epoch = epoch


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerAppend:
    """Validated, not yet applied, producer updates of one append (Kafka's
    ``ProducerAppendInfo``): applied with :meth:`commit` only after the write succeeded."""

    def __init__(self, manager: ProducerStateManager, from_client: bool,
                 check_sequences: bool | None = None,
                 verification_guard: object = NO_GUARD_CHECK) -> None:
        self._manager = manager
        self._from_client = from_client
        self._check_sequences = from_client if check_sequences is None else check_sequences
        self._verification_guard = verification_guard
        self._ended: list[int] = []  # producers whose marker this append carries
        self._staged: dict[int, ProducerStateEntry] = {}
        # (first offset, producer id) of the transactions this append starts, in order
        # (Kafka's ``startedTransactions``).
        self.started_transactions: list[tuple[int, int]] = []

    def add(self, header: RecordBatchHeader, first_offset: int, last_offset: int,
            timestamp: int, batch: bytes | bytearray | memoryview | None = None
            ) -> CompletedTxn | None:
        """Check one batch against the producer's state (Kafka's ``ProducerAppendInfo.append``).

        Raises, for client appends only, on a fenced producer epoch, a sequence gap, a
        non-transactional batch while a transaction is ongoing (INVALID_TXN_STATE) and a
        marker from an older coordinator epoch (TRANSACTION_COORDINATOR_FENCED); other
        appends log these and go on (Kafka 2.8 refuses INVALID_TXN_STATE from any origin;
        here a replica or a replay only warns, so a log that has one still opens). For a
        control batch, ``batch`` is its stored bytes:
        an end-transaction marker then ends the producer's ongoing transaction, if any, and
        its :class:`CompletedTxn` is returned, for the caller to pass to
        :meth:`ProducerStateManager.complete_txn` after :meth:`commit`. Without ``batch``
        a control batch only moves the epoch.
        """
        pid = header.producer_id
        current = self._manager.producers.get(pid)
        staged = self._staged.get(pid)
        if staged is None:
            if current is None:
                staged = ProducerStateEntry(pid)
            else:
                staged = ProducerStateEntry(
                    pid, current.producer_epoch, last_timestamp=current.last_timestamp,
                    coordinator_epoch=current.coordinator_epoch,
                    current_txn_first_offset=current.current_txn_first_offset)
            self._staged[pid] = staged
        epoch = header.producer_epoch
        if epoch < staged.producer_epoch:
            message = (f"epoch of producer {pid} at offset {first_offset} is {epoch}, smaller "
                       f"than the last seen epoch {staged.producer_epoch}")
            if self._from_client:
                raise InvalidProducerEpochError(message)
            log.warning(message)
        if self._check_sequences and not header.is_control:
            self._check_sequence(current, staged, epoch, header.base_sequence, first_offset)
        if header.is_control:  # markers move the epoch but carry no sequences
            staged.set_epoch(epoch)
            staged.last_timestamp = timestamp
            if batch is None or header.records_count == 0:
                # An empty control batch: the cleaner removed the whole transaction.
                return None
            self._ended.append(pid)
            return self._end_txn(staged, batch, first_offset)
        staged.set_epoch(epoch)
        staged.batches.append(BatchMetadata(header.base_sequence, header.last_sequence,
                                            first_offset, last_offset, timestamp))
        staged.last_timestamp = timestamp
        if staged.current_txn_first_offset is not None and not header.is_transactional:
            message = (f"expected transactional write from producer {pid} at offset "
                       f"{first_offset}: its transaction started at offset "
                       f"{staged.current_txn_first_offset}")
            if self._from_client:
                raise InvalidTxnStateError(message)
            log.warning(message)
        elif staged.current_txn_first_offset is None and header.is_transactional:
            guard = self._verification_guard
            if guard is not NO_GUARD_CHECK and (
                    guard is None or guard is not self._manager.verification_guard_for(pid)):
                # KIP-890 (Kafka's batchMissingRequiredVerification): a transactional batch
                # that would start a transaction must carry the guard created when the
                # coordinator confirmed the partition is in the producer's transaction.
                raise InvalidTxnStateError(
                    f"record from producer {pid} at offset {first_offset} was not part of an "
                    f"ongoing transaction")
            staged.current_txn_first_offset = first_offset
            self.started_transactions.append((first_offset, pid))
        return None

    def _end_txn(self, staged: ProducerStateEntry, batch: bytes | bytearray | memoryview,
                 offset: int) -> CompletedTxn | None:
        """Kafka's ``appendEndTxnMarker``; the producer epoch is already checked and set."""
        pid = staged.producer_id
        try:
            marker, coordinator_epoch = decode_end_txn_marker(batch)
        except (CorruptMessageError, InvalidRecordError) as e:
            if self._from_client:
                raise
            # A replica or a replay keeps going (the log still opens); it completes nothing.
            log.warning("unreadable control batch of producer %d at offset %d: %s", pid,
                        offset, e)
            return None
        if staged.coordinator_epoch > coordinator_epoch:
            message = (f"invalid coordinator epoch for producer {pid} at offset {offset}: "
                       f"{coordinator_epoch} is older than the previously known coordinator "
                       f"epoch {staged.coordinator_epoch}")
            if self._from_client:
                raise TransactionCoordinatorFencedError(message)
            log.info(message)
        first = staged.current_txn_first_offset
        staged.current_txn_first_offset = None
        staged.coordinator_epoch = coordinator_epoch
        if first is None:
            # A marker with no data of its transaction before it: as in Kafka 2.8 it changes
            # neither the last stable offset nor the .txnindex, so nothing is completed.
            return None
        return CompletedTxn(pid, first, offset, marker is ControlRecordType.ABORT)

    def _check_sequence(self, current: ProducerStateEntry | None, staged: ProducerStateEntry,
                        epoch: int, first_seq: int, offset: int) -> None:
        pid = staged.producer_id
        if epoch != staged.producer_epoch:
            if first_seq != 0 and staged.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"invalid sequence number for new epoch of producer {pid} at offset "
                    f"{offset}: {epoch} (request epoch), {first_seq} (seq. number), "
                    f"{staged.producer_epoch} (current producer epoch)")
            return
        current_epoch = current.producer_epoch if current else NO_PRODUCER_EPOCH
        if staged.batches:
            last_seq = staged.last_seq
        elif current is not None and epoch == current.producer_epoch:
            last_seq = current.last_seq
        else:
            last_seq = NO_SEQUENCE
        # A producer whose state is gone (retention, expiry) may continue at any sequence.
        if current_epoch != NO_PRODUCER_EPOCH and not _in_sequence(last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {pid} at offset {offset}: "
                f"{first_seq} (incoming seq. number), {last_seq} (current end sequence number)")

    def commit(self, end_offset: int) -> None:
        """Apply the staged updates; ``end_offset`` is the log end offset after the append."""
        producers = self._manager.producers
        for pid, staged in self._staged.items():
            current = producers.get(pid)
            if current is None:
                producers[pid] = staged
                continue
            current.set_epoch(staged.producer_epoch)
            current.batches.extend(staged.batches)
            current.last_timestamp = staged.last_timestamp
            current.coordinator_epoch = staged.coordinator_epoch
            current.current_txn_first_offset = staged.current_txn_first_offset
        guards = self._manager._verification_guards
        for first_offset, pid in self.started_transactions:
            self._manager._add_ongoing(first_offset, pid)
            guards.pop(pid, None)
        for pid in self._ended:
            guards.pop(pid, None)
        self._manager.map_end_offset = end_offset


class ProducerStateManager:
    """All producers of one partition plus its snapshot files."""

    def __init__(self, directory: Path, producer_id_expiration_ms: int = 86_400_000) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0  # the log end offset the state reflects
        self._last_snapshot_offset = 0
        # Kafka's ongoingTxns: first offset -> producer id, kept in first-offset order.
        self.ongoing_txns: dict[int, int] = {}
        # Kafka's unreplicatedTxns: first offset -> completed transaction whose marker is
        # not yet below the high watermark (:meth:`on_high_watermark_updated`).
        self.unreplicated_txns: dict[int, CompletedTxn] = {}
        # KIP-890 verification guards (Kafka's VerificationStateEntry), not persisted.
        self._verification_guards: dict[int, object] = {}

    def find_duplicate(self, header: RecordBatchHeader) -> BatchMetadata | None:
        """The metadata of an already-appended batch with this epoch and sequence range."""
        entry = self.producers.get(header.producer_id)
        return entry.find_duplicate(header) if entry is not None else None

    def prepare(self, from_client: bool, *, check_sequences: bool | None = None,
                verification_guard: object = NO_GUARD_CHECK) -> ProducerAppend:
        """Start validating an append (``from_client=False`` for replication and replay:
        problems are logged, not raised). ``check_sequences`` defaults to ``from_client``
        (the coordinator's appends raise on fencing but carry no sequences to check);
        ``verification_guard`` other than NO_GUARD_CHECK must be this producer's
        :meth:`verification_guard_for` for a batch that starts a transaction."""
        return ProducerAppend(self, from_client, check_sequences, verification_guard)

    # ------------------------------------------------------------------ KIP-890 guards

    def create_verification_guard(self, producer_id: int) -> object:
        """The guard of ``producer_id``, created if it has none (Kafka's
        ``maybeCreateVerificationStateEntry``, a computeIfAbsent): the produce path takes it
        before asking the coordinator whether the partition is in the transaction, and
        appends with it. Concurrent produce requests of one transaction share it; a marker
        or the start of a transaction in between clears it, so a late append of an already
        ended transaction is refused."""
        return self._verification_guards.setdefault(producer_id, object())

    def verification_guard_for(self, producer_id: int) -> object | None:
        return self._verification_guards.get(producer_id)

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """The producer is known with this epoch and has a transaction ongoing here."""
        entry = self.producers.get(producer_id)
        return (entry is not None and entry.producer_epoch == producer_epoch
                and entry.current_txn_first_offset is not None)

    def replay(self, headers: Iterable[RecordBatchHeader], end_offset: int,
               read_batch: BatchReader | None = None) -> list[AbortedTxn]:
        """Rebuild state from stored batch headers (no checks), up to ``end_offset``.

        A header alone cannot tell COMMIT from ABORT, so for each control batch
        ``read_batch(header)`` must give the stored batch bytes; then its transaction is
        completed as during the append (Kafka's ``loadProducersFromLog`` and segment
        recovery), and the transactions it aborted are returned, in marker order, for a
        caller rebuilding the ``.txnindex``. Without ``read_batch`` markers only move the
        epoch.
        """
        aborted: list[AbortedTxn] = []
        update = self.prepare(from_client=False)
        for header in headers:
            if not header.has_producer_id:
                continue
            stored = None
            if header.is_control and read_batch is not None:
                try:
                    stored = read_batch(header)
                except CorruptMessageError as e:  # its offset lies: it moves the epoch only
                    log.warning("unreadable control batch of producer %d at offset %d: %s",
                                header.producer_id, header.base_offset, e)
            if stored is not None:
                completed = update.add(header, header.base_offset, header.last_offset,
                                       header.max_timestamp, stored)
                if completed is not None:
                    update.commit(header.next_offset)
                    update = self.prepare(from_client=False)
                    txn = self.complete_txn(completed, self.last_stable_offset_for(completed))
                    if txn is not None:
                        aborted.append(txn)
            else:
                update.add(header, header.base_offset, header.last_offset, header.max_timestamp)
        update.commit(end_offset)
        return aborted

    def remove_expired_producers(self, now_ms: int) -> None:
        """Forget producers idle for ``producer.id.expiration.ms`` and with no ongoing
        transaction (Kafka's ``isProducerExpired``)."""
        for pid in [pid for pid, e in self.producers.items() if self._expired(e, now_ms)]:
            del self.producers[pid]

    def _expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (entry.current_txn_first_offset is None
                and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms)

    # ------------------------------------------------------------------ transactions

    def _add_ongoing(self, first_offset: int, producer_id: int) -> None:
        out_of_order = bool(self.ongoing_txns) and first_offset < next(reversed(self.ongoing_txns))
        self.ongoing_txns[first_offset] = producer_id
        if out_of_order:  # not from appends (offsets grow), but keep the order regardless
            self.ongoing_txns = dict(sorted(self.ongoing_txns.items()))

    def first_undecided_offset(self) -> int | None:
        """The first offset of the earliest ongoing transaction (Kafka's
        ``firstUndecidedOffset``), None when no transaction is ongoing."""
        return next(iter(self.ongoing_txns), None)

    def first_unstable_offset(self) -> int | None:
        """The earliest first offset of a transaction that is ongoing or whose marker is not
        yet below the high watermark (Kafka's ``firstUnstableOffset``), or None."""
        if not self.unreplicated_txns:
            return next(iter(self.ongoing_txns), None)
        candidates = [txn.first_offset for txn in self.unreplicated_txns.values()]
        undecided = self.first_undecided_offset()
        if undecided is not None:
            candidates.append(undecided)
        return min(candidates, default=None)

    def last_stable_offset_for(self, completed: CompletedTxn) -> int:
        """The last stable offset once ``completed`` ends (Kafka's
        ``lastStableOffset(completedTxn)``): the first offset of the earliest other ongoing
        transaction, else the offset after the marker. Stored in the AbortedTxn."""
        for first_offset, pid in self.ongoing_txns.items():
            if pid != completed.producer_id:
                return first_offset
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn, last_stable_offset: int
                     ) -> AbortedTxn | None:
        """Mark ``completed`` as decided (Kafka's ``completeTxn``), after the append that
        carried its marker was committed; returns the entry to append to the segment's
        ``.txnindex`` when it was aborted. ValueError for a transaction not ongoing."""
        if self.ongoing_txns.pop(completed.first_offset, None) is None:
            raise ValueError(f"attempted to complete transaction {completed} which is not "
                             f"ongoing")
        self.unreplicated_txns[completed.first_offset] = completed
        if not completed.is_aborted:
            return None
        return AbortedTxn(completed.producer_id, completed.first_offset,
                          completed.last_offset, last_stable_offset)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is below the high watermark (Kafka's
        ``onHighWatermarkUpdated``)."""
        if self.unreplicated_txns:
            self._remove_unreplicated(high_watermark)

    def _remove_unreplicated(self, offset: int) -> None:
        self.unreplicated_txns = {first: txn for first, txn in self.unreplicated_txns.items()
                                  if txn.last_offset >= offset}

    def _reset_txns(self) -> None:
        """Rebuild the ongoing transactions from the producers (Kafka's
        ``loadProducerEntry``); completed ones are forgotten, as on truncation in Kafka."""
        self.ongoing_txns = dict(sorted(
            (entry.current_txn_first_offset, pid) for pid, entry in self.producers.items()
            if entry.current_txn_first_offset is not None))
        self.unreplicated_txns = {}

    # ------------------------------------------------------------------ snapshots

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for name in os.listdir(self.directory):
            if name.endswith(SNAPSHOT_SUFFIX) and name[:-len(SNAPSHOT_SUFFIX)].isdigit():
                offsets.append(int(name[:-len(SNAPSHOT_SUFFIX)]))
        return sorted(offsets)

    def _snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{filename_prefix(offset)}{SNAPSHOT_SUFFIX}"

    def take_snapshot(self) -> None:
        """Write the state at ``map_end_offset`` unless a snapshot already covers it."""
        if self.map_end_offset <= self._last_snapshot_offset:
            return
        body = bytearray(_SNAPSHOT_HEAD.size)
        for pid, entry in self.producers.items():
            last = entry.batches[-1] if entry.batches else None
            body += _SNAPSHOT_ENTRY.pack(
                pid, entry.producer_epoch, last.last_seq if last else NO_SEQUENCE,
                last.last_offset if last else -1,
                last.last_offset - last.first_offset if last else 0,
                entry.last_timestamp, entry.coordinator_epoch,
                -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset)
        struct.pack_into(">i", body, 6, len(self.producers))
        struct.pack_into(">hI", body, 0, _SNAPSHOT_VERSION, crc32c.crc32c(memoryview(body)[6:]))
        write_atomically(self._snapshot_path(self.map_end_offset), bytes(body))
        self._last_snapshot_offset = self.map_end_offset

    def _read_snapshot(self, offset: int) -> dict[int, ProducerStateEntry]:
        return read_snapshot(self._snapshot_path(offset))

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int,
                            now_ms: int) -> int:
        """Drop snapshots outside ``(log_start, log_end]`` and, unless the state already
        matches ``log_end_offset``, reload the latest remaining snapshot. Returns the offset
        from which the caller must :meth:`replay` batches to reach ``log_end_offset``."""
        for offset in self.snapshot_offsets():
            if offset > log_end_offset or offset < log_start_offset:
                self._delete_snapshot(offset)
        if log_end_offset == self.map_end_offset:
            # Kafka's onLogStartOffsetIncremented: markers below the log start are gone.
            self._remove_unreplicated(log_start_offset)
            return log_end_offset
        self.producers = {}
        self._reset_txns()
        for offset in reversed(self.snapshot_offsets()):
            try:
                loaded = self._read_snapshot(offset)
            except (OSError, ValueError, struct.error) as e:
                log.warning("discarding producer snapshot %s: %s", self._snapshot_path(offset), e)
                self._delete_snapshot(offset)
                continue
            self.producers = {pid: e for pid, e in loaded.items()
                              if not self._expired(e, now_ms)}
            self._reset_txns()
            self.map_end_offset = self._last_snapshot_offset = offset
            return offset
        self.map_end_offset = self._last_snapshot_offset = log_start_offset
        return log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything, including snapshots."""
        self.producers = {}
        self._reset_txns()
        for snapshot in self.snapshot_offsets():
            self._delete_snapshot(snapshot)
        self.map_end_offset = offset
        self._last_snapshot_offset = 0

    def delete_snapshots_before(self, offset: int) -> None:
        """Remove snapshots older than ``offset`` except the newest one."""
        offsets = self.snapshot_offsets()
        for snapshot in offsets[:-1]:
            if snapshot < offset:
                self._delete_snapshot(snapshot)

    def _delete_snapshot(self, offset: int) -> None:
        try:
            os.unlink(self._snapshot_path(offset))
        except FileNotFoundError:
            pass


def read_snapshot(path: Path) -> dict[int, ProducerStateEntry]:
    """The producers of one snapshot file, in file order (Kafka's
    ``ProducerStateManager.readSnapshot``); ValueError with Kafka's message for a corrupt one."""
    data = path.read_bytes()
    if len(data) < _SNAPSHOT_HEAD.size:
        raise ValueError("Snapshot failed schema validation: the file is truncated")
    version, crc, count = _SNAPSHOT_HEAD.unpack_from(data)
    if version != _SNAPSHOT_VERSION:
        raise ValueError(f"Snapshot contained an unknown file version {version}")
    computed = crc32c.crc32c(memoryview(data)[6:])
    if computed != crc:
        raise ValueError(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}")
    if len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
        raise ValueError("Snapshot failed schema validation: its size does not match its entry count")
    producers = {}
    for pid, epoch, last_seq, last_offset, delta, ts, coordinator_epoch, txn_first in \
            _SNAPSHOT_ENTRY.iter_unpack(data[_SNAPSHOT_HEAD.size:]):
        entry = ProducerStateEntry(
            pid, epoch, last_timestamp=ts, coordinator_epoch=coordinator_epoch,
            current_txn_first_offset=txn_first if txn_first >= 0 else None)
        if last_offset >= 0:
            first_seq = (last_seq - delta) % (_INT32_MAX + 1)
            entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset, ts))
        producers[pid] = entry
    return producers
