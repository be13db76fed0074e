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
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
from kio.schema.errors import ErrorCode

from odradek.log.checkpoints import write_atomically
from odradek.log.segment import filename_prefix
from odradek.protocol.errors import for_code
from odradek.protocol.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, RecordBatchHeader

InvalidProducerEpochError = for_code(ErrorCode.invalid_producer_epoch)
OutOfOrderSequenceError = for_code(ErrorCode.out_of_order_sequence_number)

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

    def __init__(self, manager: ProducerStateManager, from_client: bool) -> None:
        self._manager = manager
        self._from_client = from_client
        self._staged: dict[int, ProducerStateEntry] = {}

    def add(self, header: RecordBatchHeader, first_offset: int, last_offset: int,
            timestamp: int) -> None:
        """Check one batch against the producer's state; raises on a fenced epoch or a
        sequence gap (client appends only)."""
        pid = header.producer_id
        current = self._manager.producers.get(pid)
        staged = self._staged.get(pid)
        if staged is None:
            staged = ProducerStateEntry(pid, current.producer_epoch if current else NO_PRODUCER_EPOCH,
                                        last_timestamp=current.last_timestamp if current else -1)
            self._staged[pid] = staged
        epoch = header.producer_epoch
        if epoch < staged.producer_epoch:
            message = (f"epoch of producer {pid} at offset {first_offset} is {epoch}, smaller "
                       f"than the last seen epoch {staged.producer_epoch}")
            if self._from_client:
                raise InvalidProducerEpochError(message)
            log.warning(message)
        if self._from_client and not header.is_control:
            self._check_sequence(current, staged, epoch, header.base_sequence, first_offset)
        staged.set_epoch(epoch)
        if not header.is_control:  # markers move the epoch but carry no sequences
            staged.batches.append(BatchMetadata(header.base_sequence, header.last_sequence,
                                                first_offset, last_offset, timestamp))
        staged.last_timestamp = timestamp

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
        self._manager.map_end_offset = end_offset


class ProducerStateManager:
    """All producers of one partition plus its snapshot files."""

    def __init__(self, directory: Path, producer_id_expiration_ms: int = 86_400_000) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0  # the log end offset the state reflects
        self._last_snapshot_offset = 0

    def find_duplicate(self, header: RecordBatchHeader) -> BatchMetadata | None:
        """The metadata of an already-appended batch with this epoch and sequence range."""
        entry = self.producers.get(header.producer_id)
        return entry.find_duplicate(header) if entry is not None else None

    def prepare(self, from_client: bool) -> ProducerAppend:
        """Start validating an append (``from_client=False`` for replication and replay)."""
        return ProducerAppend(self, from_client)

    def replay(self, headers: Iterable[RecordBatchHeader], end_offset: int) -> None:
        """Rebuild state from stored batch headers (no sequence checks), up to ``end_offset``."""
        update = self.prepare(from_client=False)
        for header in headers:
            if header.has_producer_id:
                update.add(header, header.base_offset, header.last_offset, header.max_timestamp)
        update.commit(end_offset)

    def remove_expired_producers(self, now_ms: int) -> None:
        """Forget producers idle for ``producer.id.expiration.ms`` (Kafka's expiry)."""
        limit = now_ms - self.producer_id_expiration_ms
        for pid in [pid for pid, e in self.producers.items() if e.last_timestamp <= limit]:
            del self.producers[pid]

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
                entry.last_timestamp, entry.coordinator_epoch, -1)
        struct.pack_into(">i", body, 6, len(self.producers))
        struct.pack_into(">hI", body, 0, _SNAPSHOT_VERSION, crc32c.crc32c(memoryview(body)[6:]))
        write_atomically(self._snapshot_path(self.map_end_offset), bytes(body))
        self._last_snapshot_offset = self.map_end_offset

    def _read_snapshot(self, offset: int) -> dict[int, ProducerStateEntry]:
        data = self._snapshot_path(offset).read_bytes()
        if len(data) < _SNAPSHOT_HEAD.size:
            raise ValueError("snapshot is truncated")
        version, crc, count = _SNAPSHOT_HEAD.unpack_from(data)
        if version != _SNAPSHOT_VERSION:
            raise ValueError(f"unknown snapshot version {version}")
        if crc32c.crc32c(memoryview(data)[6:]) != crc:
            raise ValueError("snapshot CRC mismatch")
        if len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
            raise ValueError("snapshot size does not match its entry count")
        producers = {}
        for pid, epoch, last_seq, last_offset, delta, ts, coordinator_epoch, _ in \
                _SNAPSHOT_ENTRY.iter_unpack(data[_SNAPSHOT_HEAD.size:]):
            entry = ProducerStateEntry(pid, epoch, last_timestamp=ts,
                                       coordinator_epoch=coordinator_epoch)
            if last_offset >= 0:
                first_seq = (last_seq - delta) % (_INT32_MAX + 1)
                entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta,
                                                   last_offset, ts))
            producers[pid] = entry
        return producers

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int,
                            now_ms: int) -> int:
        """Drop snapshots outside ``(log_start, log_end]`` and, unless the state already
        matches ``log_end_offset``, reload the latest remaining snapshot. Returns the offset
        from which the caller must :meth:`replay` batches to reach ``log_end_offset``."""
        for offset in self.snapshot_offsets():
            if offset > log_end_offset or offset < log_start_offset:
                self._delete_snapshot(offset)
        if log_end_offset == self.map_end_offset:
            return log_end_offset
        self.producers = {}
        for offset in reversed(self.snapshot_offsets()):
            try:
                loaded = self._read_snapshot(offset)
            except (OSError, ValueError, struct.error) as e:
                log.warning("discarding producer snapshot %s: %s", self._snapshot_path(offset), e)
                self._delete_snapshot(offset)
                continue
            limit = now_ms - self.producer_id_expiration_ms
            self.producers = {pid: e for pid, e in loaded.items() if e.last_timestamp > limit}
            self.map_end_offset = self._last_snapshot_offset = offset
            return offset
        self.map_end_offset = self._last_snapshot_offset = log_start_offset
        return log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything, including snapshots."""
        self.producers = {}
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
