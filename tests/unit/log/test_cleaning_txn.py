"""Transactions in the log cleaner's sans-IO core (Kafka 2.8's CleanedTransactionMetadata and
cleanInto's discard rules): aborted data, markers, the offset map, the cleaned .txnindex."""

from __future__ import annotations

from dataclasses import replace

from odradek.log.cleaner.cleaning import Cleaning
from odradek.log.cleaner.job import CleanerStats, CleanJob, CleanResult, SegmentRef
from odradek.log.cleaner.transaction_metadata import CleanedTransactionMetadata
from odradek.log.transaction_index import AbortedTxn
from odradek.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
from odradek.protocol.records import (
    HEADER_SIZE,
    RecordBatchHeader,
    SimpleRecord,
    build_batch,
    decode_batch,
    encode_batch,
    iter_batches,
    parse_header,
)

T0 = 1_700_000_000_000
DAY = 86_400_000
ABORT, COMMIT = ControlRecordType.ABORT, ControlRecordType.COMMIT


def data(base: int, *records: tuple[bytes, bytes | None], pid: int = -1, epoch: int = 0,
         txn: bool = False) -> bytes:
    """A batch of ``(key, value)`` records; transactional for ``txn``."""
    return build_batch([SimpleRecord(v, k, timestamp=T0 + i) for i, (k, v) in enumerate(records)],
                       base_offset=base, timestamp=T0, producer_id=pid, producer_epoch=epoch,
                       base_sequence=0 if pid >= 0 else -1, is_transactional=txn)


def marker(base: int, kind: ControlRecordType, pid: int, epoch: int = 0) -> bytes:
    return build_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=epoch,
                                      coordinator_epoch=0, timestamp=T0, base_offset=base)


def empty_control(base: int, pid: int, epoch: int = 0) -> bytes:
    return encode_batch(b"", base_offset=base, last_offset_delta=0, records_count=0,
                        attributes=0x30, base_timestamp=T0, max_timestamp=T0,
                        partition_leader_epoch=0, producer_id=pid, producer_epoch=epoch,
                        base_sequence=-1)


class Result:
    """A cleaning's outcome: its CleanResult, each group's bytes and .txnindex entries."""

    def __init__(self, result: CleanResult, out: dict[int, bytes],
                 aborted: dict[int, list[AbortedTxn]]) -> None:
        self.result, self.out, self.aborted = result, out, aborted

    @property
    def stats(self) -> CleanerStats:
        return self.result.stats

    def batches(self) -> list[tuple[RecordBatchHeader, list[tuple[int, bytes | None, bytes | None]]]]:
        found = []
        for group in sorted(self.out):
            buf = self.out[group]
            for pos, header in iter_batches(buf):
                _, records = decode_batch(buf[pos:pos + header.size])
                found.append((header, [(r.offset, r.key, r.value) for r in records]))
        return found

    def offsets(self) -> list[int]:
        return [o for _, records in self.batches() for o, _, _ in records]

    def batch_bases(self) -> list[int]:
        return [h.base_offset for h, _ in self.batches()]


def clean(segments: list[list[bytes]], aborted: list[AbortedTxn], *,
          mtimes: list[int] | None = None, first_dirty: int | None = None,
          **overrides: object) -> Result:
    """Clean in-memory ``segments`` (lists of batches), each its own group unless
    ``segment_bytes`` says otherwise."""
    refs = []
    blobs = {}
    for i, batches in enumerate(segments):
        base = parse_header(batches[0]).base_offset
        nxt = (parse_header(segments[i + 1][0]).base_offset if i + 1 < len(segments)
               else parse_header(batches[-1]).next_offset)
        blob = b"".join(batches)
        refs.append(SegmentRef(base, str(base), len(blob), nxt,
                               mtimes[i] if mtimes else T0))
        blobs[base] = blob
    job = CleanJob(
        topic="t", partition=0, directory="/nowhere", segments=tuple(refs),
        first_dirty_offset=refs[0].base_offset if first_dirty is None else first_dirty,
        first_uncleanable_offset=refs[-1].next_offset, now_ms=T0 + 1000,
        delete_retention_ms=DAY, segment_bytes=1, max_index_bytes=1 << 20,
        index_interval_bytes=4096, max_map_entries=1000, io_max_bytes_per_second=float("inf"),
        aborted_txns=tuple(aborted))
    job = replace(job, **overrides)
    cleaning = Cleaning(job)
    for ref in cleaning.dirty_segments:
        if cleaning.map(blobs[ref.base_offset]):
            break
    out: dict[int, bytes] = {}
    entries: dict[int, list[AbortedTxn]] = {}
    for group in cleaning.groups:
        buf = bytearray()
        group_entries: list[AbortedTxn] = []
        for ref in group:
            chunk = cleaning.clean(ref, blobs[ref.base_offset])
            assert chunk.batches == [(pos, h.size, h.last_offset, h.max_timestamp)
                                     for pos, h in iter_batches(chunk.data)]
            buf += chunk.data
            group_entries += chunk.aborted
        out[group[0].base_offset] = bytes(buf)
        entries[group[0].base_offset] = group_entries
    result = cleaning.result({base: len(d) for base, d in out.items()})
    return Result(result, out, entries)


OLD = T0 - 2 * DAY  # past delete.retention.ms (one day) at now = T0 + 1000


# ---------------------------------------------------------------------- aborted data


def test_an_aborted_transactions_batches_are_discarded_and_its_marker_kept_with_an_entry() -> None:
    txn = AbortedTxn(producer_id=1, first_offset=0, last_offset=3, last_stable_offset=0)
    r = clean([[data(0, (b"a", b"1"), pid=1, txn=True),
                data(1, (b"b", b"2"), pid=2, txn=True),
                marker(2, COMMIT, 2),
                marker(3, ABORT, 1),
                data(4, (b"c", b"3"))]], [txn])
    assert r.batch_bases() == [1, 2, 3, 4]
    assert r.aborted == {0: [txn]}  # the ABORT marker stays while its data was here
    assert r.stats.aborted_batches == 1
    assert r.stats.markers_removed == 0


def test_aborted_data_spanning_segments_goes_with_entries_in_the_markers_group() -> None:
    txn = AbortedTxn(producer_id=1, first_offset=0, last_offset=3, last_stable_offset=0)
    r = clean([[data(0, (b"a", b"1"), pid=1, txn=True), data(1, (b"b", b"1"))],
               [data(2, (b"a", b"2"), pid=1, txn=True), marker(3, ABORT, 1)]], [txn])
    assert r.batch_bases() == [1, 3]
    assert r.aborted == {0: [], 2: [txn]}
    assert r.stats.aborted_batches == 2


def test_committed_transactional_records_are_compacted_and_keep_their_producer_fields() -> None:
    r = clean([[data(0, (b"a", b"1"), (b"b", b"1"), pid=5, epoch=3, txn=True),
                marker(2, COMMIT, 5, 3),
                data(3, (b"a", b"2"))]], [])
    batches = r.batches()
    header, records = batches[0]
    assert records == [(1, b"b", b"1")]
    assert header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_offset) == (5, 3, 0)
    # the COMMIT marker stays: its transaction still has a batch
    assert batches[1][0].is_control
    assert r.offsets() == [1, 2, 3]


def test_an_aborted_newer_value_never_shadows_a_committed_older_one() -> None:
    txn = AbortedTxn(producer_id=1, first_offset=1, last_offset=2, last_stable_offset=1)
    r = clean([[data(0, (b"k", b"committed")),
                data(1, (b"k", b"aborted"), pid=1, txn=True),
                marker(2, ABORT, 1)]], [txn])
    values = [(o, v) for h, records in r.batches() if not h.is_control for o, _, v in records]
    assert values == [(0, b"committed")]


def test_the_offset_map_skips_aborted_batches_and_markers() -> None:
    txn = AbortedTxn(producer_id=1, first_offset=1, last_offset=2, last_stable_offset=1)
    seg = [data(0, (b"k", b"v")), data(1, (b"k", b"x"), (b"j", b"y"), pid=1, txn=True),
           marker(2, ABORT, 1)]
    refs = (SegmentRef(0, "0", sum(map(len, seg)), 3, T0),)
    job = CleanJob(topic="t", partition=0, directory="/", segments=refs, first_dirty_offset=0,
                   first_uncleanable_offset=3, now_ms=T0, delete_retention_ms=DAY,
                   segment_bytes=1 << 30, max_index_bytes=1 << 20, index_interval_bytes=4096,
                   max_map_entries=10, io_max_bytes_per_second=float("inf"),
                   aborted_txns=(txn,))
    cleaning = Cleaning(job)
    cleaning.map(b"".join(seg))
    assert cleaning.offset_map.entries == {b"k": 0}


def test_an_aborted_producers_last_batch_is_kept_empty() -> None:
    txn = AbortedTxn(producer_id=1, first_offset=0, last_offset=1, last_stable_offset=0)
    r = clean([[data(0, (b"a", b"1"), pid=1, txn=True), marker(1, ABORT, 1)]], [txn],
              producer_last_offsets={1: 0})
    (empty, records), (mark, _) = r.batches()
    assert (empty.base_offset, empty.records_count, records) == (0, 0, [])
    assert empty.is_transactional and empty.producer_id == 1
    assert mark.is_control


def test_an_aborted_transaction_starting_past_the_cleaning_is_left_alone() -> None:
    # The map is full with offset 0 (the aborted batch is not mapped): the cleaning ends at
    # 1, so the transaction starting at 1 (in the same segment) is not known to it and its
    # batch stays for a later cleaning, as Kafka keeps records past the map's latest offset.
    txn = AbortedTxn(producer_id=1, first_offset=1, last_offset=2, last_stable_offset=1)
    r = clean([[data(0, (b"a", b"1")), data(1, (b"b", b"1"), pid=1, txn=True),
                marker(2, ABORT, 1), data(3, (b"c", b"1"))]], [txn], max_map_entries=1)
    assert r.result.end_offset == 1
    assert r.batch_bases() == [0, 1, 2, 3]
    assert r.aborted == {0: []}


# ---------------------------------------------------------------------- markers


def test_markers_of_transactions_with_no_data_left_go_once_past_the_horizon() -> None:
    # Both markers lie in the clean section (cleaned before) in a segment older than
    # delete.retention.ms; their transactions' data is gone.
    abort = AbortedTxn(producer_id=1, first_offset=0, last_offset=0, last_stable_offset=0)
    r = clean([[marker(0, ABORT, 1), marker(1, COMMIT, 2), data(2, (b"a", b"1"))],
               [data(3, (b"b", b"1"))]], [abort], mtimes=[OLD, T0], first_dirty=3)
    assert r.batch_bases() == [2, 3]
    assert r.stats.markers_removed == 2
    assert r.aborted == {0: [], 3: []}


def test_markers_stay_before_the_horizon_and_the_log_is_due_for_cleaning_then() -> None:
    young = T0 - 1000
    r = clean([[marker(0, ABORT, 1), marker(1, COMMIT, 2), data(2, (b"a", b"1"))],
               [data(3, (b"b", b"1"))]],
              [AbortedTxn(1, 0, 0, 0)], mtimes=[young, T0], first_dirty=3)
    assert r.batch_bases() == [0, 1, 2, 3]
    assert r.stats.markers_removed == 0
    assert r.aborted == {0: [], 3: []}  # no data left: no entry needed
    assert r.result.tombstone_due_ms == young + DAY


def test_markers_in_the_dirty_section_stay() -> None:
    r = clean([[marker(0, COMMIT, 2), data(1, (b"a", b"1"))]], [], mtimes=[OLD])
    assert r.batch_bases() == [0, 1]


def test_markers_of_transactions_with_data_left_stay_past_the_horizon() -> None:
    abort = AbortedTxn(producer_id=1, first_offset=0, last_offset=2, last_stable_offset=0)
    r = clean([[data(0, (b"a", b"1"), pid=1, txn=True), data(1, (b"b", b"1"), pid=2, txn=True),
                marker(2, ABORT, 1), marker(3, COMMIT, 2)],
               [data(4, (b"c", b"1"))]], [abort], mtimes=[OLD, T0], first_dirty=4)
    assert r.batch_bases() == [1, 2, 3, 4]
    assert r.aborted == {0: [abort], 4: []}
    assert r.stats.markers_removed == 0


def test_a_second_cleaning_removes_the_abort_marker_the_first_kept() -> None:
    abort = AbortedTxn(producer_id=1, first_offset=0, last_offset=1, last_stable_offset=0)
    first = clean([[data(0, (b"a", b"1"), pid=1, txn=True), marker(1, ABORT, 1)],
                   [data(2, (b"b", b"1"))]], [abort], mtimes=[OLD, T0])
    assert first.batch_bases() == [1, 2]
    second = clean([[first.out[0]], [first.out[2]]], [abort], mtimes=[OLD, T0], first_dirty=2)
    assert second.batch_bases() == [2]
    assert second.stats.markers_removed == 1


def test_an_empty_control_batch_is_discarded_past_the_horizon() -> None:
    r = clean([[empty_control(0, 1), data(1, (b"a", b"1"))], [data(2, (b"b", b"1"))]], [],
              mtimes=[OLD, T0], first_dirty=2)
    assert r.batch_bases() == [1, 2]


def test_the_marker_of_a_producer_without_data_is_kept_empty() -> None:
    # Kafka's LastRecord without a lastDataOffset: the producer's epoch needs the marker.
    r = clean([[marker(0, COMMIT, 1, epoch=4), data(1, (b"a", b"1"))],
               [data(2, (b"b", b"1"))]], [], mtimes=[OLD, T0], first_dirty=2,
              marker_only_producers={1: 4})
    (header, _), *_ = r.batches()
    assert (header.base_offset, header.is_control, header.records_count) == (0, True, 0)
    assert header.producer_epoch == 4
    # an older epoch's marker is no longer needed
    r = clean([[marker(0, COMMIT, 1, epoch=3), data(1, (b"a", b"1"))],
               [data(2, (b"b", b"1"))]], [], mtimes=[OLD, T0], first_dirty=2,
              marker_only_producers={1: 4})
    assert r.batch_bases() == [1, 2]


# ---------------------------------------------------------------------- the tracker


def _header(batch: bytes) -> RecordBatchHeader:
    return parse_header(batch)


def test_tracker_starts_an_aborted_transaction_at_its_first_offset() -> None:
    t = CleanedTransactionMetadata([AbortedTxn(1, 5, 9, 5)])
    assert t.on_batch_read(_header(data(3, (b"a", b"1"), pid=1, txn=True))) is False
    assert t.on_batch_read(_header(data(5, (b"a", b"1"), pid=1, txn=True))) is True
    assert t.on_control_batch_read(_header(marker(9, ABORT, 1)), ABORT) == (
        False, AbortedTxn(1, 5, 9, 5))


def test_tracker_commit_marker_is_discardable_only_without_data() -> None:
    t = CleanedTransactionMetadata([])
    assert t.on_control_batch_read(_header(marker(0, COMMIT, 1)), COMMIT) == (True, None)
    t.on_batch_read(_header(data(1, (b"a", b"1"), pid=1, txn=True)))
    assert t.on_control_batch_read(_header(marker(2, COMMIT, 1)), COMMIT) == (False, None)
    assert t.on_control_batch_read(_header(marker(3, COMMIT, 1)), COMMIT) == (True, None)


def test_tracker_ignores_non_transactional_batches_and_other_control_records() -> None:
    t = CleanedTransactionMetadata([AbortedTxn(1, 0, 9, 0)])
    assert t.on_batch_read(_header(data(0, (b"a", b"1"), pid=1))) is False
    leader_change = ControlRecordType.LEADER_CHANGE
    assert t.on_control_batch_read(_header(marker(1, COMMIT, 1)), leader_change) == (False, None)


def test_tracker_dedupes_entries_given_twice() -> None:
    txn = AbortedTxn(1, 0, 2, 0)
    t = CleanedTransactionMetadata([txn, txn])
    assert t.on_batch_read(_header(data(0, (b"a", b"1"), pid=1, txn=True))) is True
    assert t.on_control_batch_read(_header(marker(2, ABORT, 1)), ABORT) == (False, txn)
    # the duplicate does not reopen it
    assert t.on_batch_read(_header(data(3, (b"a", b"1"), pid=1, txn=True))) is False


def test_helpers_build_what_they_claim() -> None:
    h = _header(empty_control(7, 3))
    assert (h.is_control, h.records_count, h.producer_id) == (True, 0, 3)
    assert len(empty_control(7, 3)) == HEADER_SIZE
