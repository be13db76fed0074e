"""Kafka's ``TransactionIndex``: the aborted transactions of one segment (``.txnindex``).

When an ABORT marker is appended, the log records the aborted transaction here, in the
segment that holds the marker. A READ_COMMITTED fetch asks the segments from the fetch offset
on for the aborted transactions overlapping the fetched range (:meth:`collect_aborted_txns`)
and returns them to the consumer, which drops their records. Each log segment owns one
of these (``LogSegment.txn_index``) beside its offset and time indexes; the log rebuilds it
by replaying the producer state when the segment is recovered.

File format (``<base offset>.txnindex``), Kafka's ``AbortedTxn``: 34-byte entries, all
big-endian::

    version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 |
    lastStableOffset int64

Entries are in increasing ``lastOffset`` order. Aborts are rare, so each append is written to
the file at once (as Kafka does; fsync waits for :meth:`flush`), and the entries are kept in
memory after the first read. As for the other indexes, the file is read on first use and no
descriptor is held between uses.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from odradek.log.abstract_index import IndexCorruptError, _pwrite_all

__all__ = ["ABORTED_TXN_SIZE", "TXN_INDEX_SUFFIX", "AbortedTxn", "TransactionIndex"]

TXN_INDEX_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0  # Kafka's AbortedTxn.CurrentVersion

_ENTRY = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = _ENTRY.size  # 34, Kafka's AbortedTxn.TotalSize


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction: the producer, its first and last offsets (the last is the
    ABORT marker's), and the partition's last stable offset when the marker was written."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(ABORTED_TXN_VERSION, self.producer_id, self.first_offset,
                           self.last_offset, self.last_stable_offset)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, pos: int = 0) -> AbortedTxn:
        """The entry at ``pos``; IndexCorruptError for a version this broker does not know."""
        version, producer_id, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != ABORTED_TXN_VERSION:
            raise IndexCorruptError(f"unexpected aborted transaction version {version}, "
                                    f"current version is {ABORTED_TXN_VERSION}")
        return cls(producer_id, first, last, lso)


class TransactionIndex:
    """The aborted transactions of the segment starting at ``start_offset``."""

    def __init__(self, path: Path, start_offset: int) -> None:
        self.path = path
        self.start_offset = start_offset
        self._entries: list[AbortedTxn] | None = None  # None until first read
        self._file_size = 0  # bytes of whole entries in the file

    def _load(self) -> list[AbortedTxn]:
        if self._entries is not None:
            return self._entries
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        # A torn last entry is left on disk for sanity_check to report; the next append
        # overwrites it.
        usable = len(data) - len(data) % ABORTED_TXN_SIZE
        self._entries = [AbortedTxn.decode(data, pos)
                         for pos in range(0, usable, ABORTED_TXN_SIZE)]
        self._file_size = usable
        return self._entries

    @property
    def last_offset(self) -> int | None:
        """The last offset of the last aborted transaction, None when empty."""
        entries = self._load()
        return entries[-1].last_offset if entries else None

    def append(self, aborted_txn: AbortedTxn) -> None:
        """Record an aborted transaction; last offsets must increase (Kafka's
        IllegalArgumentException otherwise)."""
        entries = self._load()
        if entries and aborted_txn.last_offset <= entries[-1].last_offset:
            raise ValueError(f"the last offset of appended transactions must increase: "
                             f"{aborted_txn.last_offset} is not greater than the current last "
                             f"offset {entries[-1].last_offset} of {self.path}")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            # At the end of the whole entries: a torn tail (shorter than one) is overwritten.
            _pwrite_all(fd, aborted_txn.encode(), self._file_size)
        finally:
            os.close(fd)
        self._file_size += ABORTED_TXN_SIZE
        entries.append(aborted_txn)

    def flush(self) -> None:
        """fsync the file (entries are written at append)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Forget the loaded entries (read again on next use)."""
        self._entries = None

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return list(self._load())

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int
                             ) -> tuple[list[AbortedTxn], bool]:
        """Kafka's ``collectAbortedTxns`` (a ``TxnIndexSearchResult``): the aborted
        transactions overlapping ``[fetch_offset, upper_bound_offset)``, and whether the
        search is complete.

        It is complete at the first entry whose last stable offset is >= the upper bound: a
        transaction aborted after that one was either not yet begun or still open when its
        marker was written, so it starts at or after that LSO, past the range, and the
        caller need not search later entries or segments.
        """
        found = []
        for txn in self._load():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose last offset is >= ``offset``."""
        entries = self._load()
        keep = next((i for i, txn in enumerate(entries) if txn.last_offset >= offset),
                    len(entries))
        if keep == len(entries) and self._file_size == _size_on_disk(self.path):
            return
        del entries[keep:]
        self._file_size = keep * ABORTED_TXN_SIZE
        if self.path.exists():
            os.truncate(self.path, self._file_size)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        self._entries = []
        self._file_size = 0

    def delete(self) -> None:
        """Unlink the file."""
        self._entries = None
        self._file_size = 0
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def rename(self, path: Path) -> None:
        os.rename(self.path, path)
        self.path = path

    def sanity_check(self) -> None:
        """Raise IndexCorruptError unless the file holds whole entries of a known version,
        in increasing last-offset order, none ending before the segment starts (Kafka's
        ``sanityCheck`` checks the last; the first transaction may begin in an earlier
        segment, its ABORT marker is in this one)."""
        data = self.path.read_bytes() if self.path.exists() else b""
        if len(data) % ABORTED_TXN_SIZE:
            raise IndexCorruptError(f"{self.path}: size {len(data)} is not a multiple of "
                                    f"the entry size {ABORTED_TXN_SIZE}")
        previous: AbortedTxn | None = None
        for pos in range(0, len(data), ABORTED_TXN_SIZE):
            txn = AbortedTxn.decode(data, pos)
            if txn.last_offset < self.start_offset:
                raise IndexCorruptError(f"{self.path}: aborted transaction {txn} ends before "
                                        f"the segment's start offset {self.start_offset}")
            if previous is not None and txn.last_offset <= previous.last_offset:
                raise IndexCorruptError(f"{self.path}: aborted transaction {txn} does not "
                                        f"follow {previous} in last-offset order")
            previous = txn


def _size_on_disk(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
