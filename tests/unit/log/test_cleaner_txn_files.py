"""The cleaner process's .txnindex.cleaned files (odradek.log.cleaner.cleaner): segment files
written by hand, cleaned, and the cleaned transaction index read back."""

from __future__ import annotations

from pathlib import Path

from odradek.log.cleaner.cleaner import clean, remove_cleaned
from odradek.log.cleaner.job import CLEANED_SUFFIX, CleanJob, SegmentRef
from odradek.log.segment import LOG_SUFFIX, filename_prefix
from odradek.log.transaction_index import TXN_INDEX_SUFFIX, AbortedTxn, TransactionIndex
from odradek.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
from odradek.protocol.records import SimpleRecord, build_batch, iter_batches

T0 = 1_700_000_000_000
DAY = 86_400_000


def data(base: int, key: bytes, pid: int = -1, txn: bool = False) -> bytes:
    return build_batch([SimpleRecord(b"v", key)], base_offset=base, timestamp=T0,
                       producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                       base_sequence=0 if pid >= 0 else -1, is_transactional=txn)


def marker(base: int, kind: ControlRecordType, pid: int) -> bytes:
    return build_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0,
                                      coordinator_epoch=0, timestamp=T0, base_offset=base)


def write_segments(directory: Path, segments: list[tuple[int, list[bytes], int]]
                   ) -> tuple[SegmentRef, ...]:
    """``(base, batches, next offset)`` per segment -> files and SegmentRefs."""
    refs = []
    for base, batches, nxt in segments:
        path = directory / f"{filename_prefix(base)}{LOG_SUFFIX}"
        blob = b"".join(batches)
        path.write_bytes(blob)
        refs.append(SegmentRef(base, str(path), len(blob), nxt, T0))
    return tuple(refs)


def job(directory: Path, refs: tuple[SegmentRef, ...], aborted: tuple[AbortedTxn, ...],
        segment_bytes: int = 1 << 20) -> CleanJob:
    return CleanJob(topic="t", partition=0, directory=str(directory), segments=refs,
                    first_dirty_offset=0, first_uncleanable_offset=refs[-1].next_offset,
                    now_ms=T0, delete_retention_ms=DAY, segment_bytes=segment_bytes,
                    max_index_bytes=1 << 20, index_interval_bytes=4096, max_map_entries=100,
                    io_max_bytes_per_second=float("inf"), aborted_txns=aborted)


def txn_index_path(directory: Path, base: int) -> Path:
    return directory / f"{filename_prefix(base)}{TXN_INDEX_SUFFIX}{CLEANED_SUFFIX}"


def test_retained_abort_markers_are_written_to_the_cleaned_txnindex(tmp_path: Path) -> None:
    first = AbortedTxn(producer_id=1, first_offset=0, last_offset=2, last_stable_offset=0)
    second = AbortedTxn(producer_id=2, first_offset=3, last_offset=5, last_stable_offset=3)
    refs = write_segments(tmp_path, [
        (0, [data(0, b"a", 1, True), data(1, b"b"), marker(2, ControlRecordType.ABORT, 1)], 3),
        (3, [data(3, b"c", 2, True), data(4, b"d"), marker(5, ControlRecordType.ABORT, 2)], 6),
    ])
    result = clean(job(tmp_path, refs, (first, second)))
    assert [g.base_offset for g in result.groups] == [0]
    assert result.stats.aborted_batches == 2
    index = TransactionIndex(txn_index_path(tmp_path, 0), 0)
    assert index.all_aborted_txns() == [first, second]
    cleaned = (tmp_path / f"{filename_prefix(0)}{LOG_SUFFIX}{CLEANED_SUFFIX}").read_bytes()
    assert [h.base_offset for _, h in iter_batches(cleaned)] == [1, 2, 4, 5]


def test_each_group_gets_the_entries_of_its_own_markers(tmp_path: Path) -> None:
    txn = AbortedTxn(producer_id=1, first_offset=3, last_offset=4, last_stable_offset=3)
    refs = write_segments(tmp_path, [
        (0, [data(0, b"a"), data(1, b"b"), data(2, b"c")], 3),
        (3, [data(3, b"c", 1, True), marker(4, ControlRecordType.ABORT, 1)], 5),
    ])
    result = clean(job(tmp_path, refs, (txn,), segment_bytes=refs[0].size))
    assert [g.base_offset for g in result.groups] == [0, 3]
    assert not txn_index_path(tmp_path, 0).exists()  # no entry, no file
    assert TransactionIndex(txn_index_path(tmp_path, 3), 3).all_aborted_txns() == [txn]


def test_no_aborted_transaction_no_txnindex(tmp_path: Path) -> None:
    refs = write_segments(tmp_path, [
        (0, [data(0, b"a", 1, True), marker(1, ControlRecordType.COMMIT, 1), data(2, b"a")], 3),
    ])
    clean(job(tmp_path, refs, ()))
    assert not txn_index_path(tmp_path, 0).exists()
    assert (tmp_path / f"{filename_prefix(0)}{LOG_SUFFIX}{CLEANED_SUFFIX}").exists()


def test_remove_cleaned_removes_the_cleaned_txnindex(tmp_path: Path) -> None:
    path = txn_index_path(tmp_path, 7)
    TransactionIndex(path, 7).append(AbortedTxn(1, 7, 8, 7))
    assert path.exists()
    remove_cleaned(tmp_path, 7)
    assert not path.exists()
