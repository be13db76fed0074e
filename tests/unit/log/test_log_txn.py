"""Transactions in Log (Kafka 2.8's Log.append / loadProducerState / collectAbortedTransactions
with KIP-890 part 1): markers, the last stable offset, the per-segment .txnindex, truncation,
restarts and recovery, client rules and verification guards."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from log_helpers import T0, batch, config

from odradek.log.log import NO_GUARD_CHECK, AbortedTxn, AppendOrigin, Log
from odradek.log.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from odradek.log.segment import LogSegment, filename_prefix
from odradek.protocol.control_records import (
    ControlRecordType,
    build_end_txn_marker_batch,
    encode_control_record_key,
)
from odradek.protocol.errors import InvalidRecordError
from odradek.protocol.records import (
    HEADER_SIZE,
    SimpleRecord,
    build_batch,
    encode_batch,
    iter_batches,
)

OpenLog = Callable[..., Log]
COMMIT, ABORT = ControlRecordType.COMMIT, ControlRecordType.ABORT
COORD = AppendOrigin.COORDINATOR


def txn_batch(pid: int, seq: int, count: int = 1, epoch: int = 0) -> bytes:
    return batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                 is_transactional=True)


def marker(kind: ControlRecordType, pid: int, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return build_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=epoch,
                                      coordinator_epoch=coordinator_epoch, timestamp=T0)


def write_marker(lg: Log, kind: ControlRecordType, pid: int, **kwargs: int) -> int:
    return lg.append_as_leader(marker(kind, pid, **kwargs), 0, origin=COORD).first_offset


def txn_files(lg: Log) -> list[str]:
    return sorted(n for n in os.listdir(lg.dir) if ".txnindex" in n)


def test_ongoing_transaction_holds_the_last_stable_offset(open_log: OpenLog) -> None:
    lg = open_log()
    lg.append_as_leader(batch(2), 0)  # offsets 0-1, not transactional
    lg.append_as_leader(txn_batch(7, 0, 3), 0)  # 2-4
    assert lg.has_ongoing_transaction(7, 0) and not lg.has_ongoing_transaction(7, 1)
    assert not lg.has_ongoing_transaction(8, 0)
    lg.update_high_watermark(5)
    assert lg.first_unstable_offset == 2 and lg.last_stable_offset == 2
    at = write_marker(lg, COMMIT, 7)
    assert at == 5 and not lg.has_ongoing_transaction(7, 0)
    # Decided, but the marker is not yet below the high watermark: still unstable.
    assert lg.first_unstable_offset == 2 and lg.last_stable_offset == 2
    lg.maybe_increment_high_watermark(6)
    assert lg.first_unstable_offset is None and lg.last_stable_offset == 6
    assert txn_files(lg) == []  # a commit indexes nothing; the file is created lazily


def test_abort_marker_fills_the_txnindex_with_its_last_stable_offset(open_log: OpenLog) -> None:
    lg = open_log()
    lg.append_as_leader(txn_batch(1, 0), 0)  # 0
    lg.append_as_leader(txn_batch(2, 0), 0)  # 1
    lg.append_as_leader(txn_batch(1, 1), 0)  # 2
    assert write_marker(lg, ABORT, 1) == 3
    # producer 2's transaction is still ongoing: it bounds the last stable offset.
    assert lg.collect_aborted_transactions(0, 10) == [AbortedTxn(1, 0, 3, 1)]
    assert write_marker(lg, ABORT, 2) == 4
    assert lg.collect_aborted_transactions(0, 10) == [AbortedTxn(1, 0, 3, 1), AbortedTxn(2, 1, 4, 5)]
    assert txn_files(lg) == [f"{filename_prefix(0)}.txnindex"]
    lg.update_high_watermark(5)
    assert lg.last_stable_offset == 5
    # Range filter: transactions overlapping [start, upper).
    assert lg.collect_aborted_transactions(4, 10) == [AbortedTxn(2, 1, 4, 5)]
    assert lg.collect_aborted_transactions(0, 1) == [AbortedTxn(1, 0, 3, 1)]


def test_collect_aborted_transactions_across_segments(open_log: OpenLog) -> None:
    lg = open_log(config(segment_bytes=10_000))
    lg.append_as_leader(txn_batch(1, 0), 0)  # 0, segment 0
    write_marker(lg, ABORT, 1)  # 1
    lg.roll()
    lg.append_as_leader(txn_batch(2, 0), 0)  # 2, segment 2
    lg.roll()
    lg.append_as_leader(batch(1), 0)  # 3, segment 3
    write_marker(lg, ABORT, 2)  # 4
    assert [s.base_offset for s in lg.segments] == [0, 2, 3]
    assert lg.segments[0].txn_index.all_aborted_txns() == [AbortedTxn(1, 0, 1, 2)]
    assert lg.segments[1].txn_index.all_aborted_txns() == []
    assert lg.segments[2].txn_index.all_aborted_txns() == [AbortedTxn(2, 2, 4, 5)]
    assert lg.collect_aborted_transactions(0, 5) == [AbortedTxn(1, 0, 1, 2), AbortedTxn(2, 2, 4, 5)]
    # From the middle segment on: the transaction ending in a later segment is found.
    assert lg.collect_aborted_transactions(2, 3) == [AbortedTxn(2, 2, 4, 5)]
    # The first segment's entry is complete for an upper bound at its LSO: no later search.
    assert lg.collect_aborted_transactions(0, 1) == [AbortedTxn(1, 0, 1, 2)]
    assert txn_files(lg) == [f"{filename_prefix(0)}.txnindex", f"{filename_prefix(3)}.txnindex"]


def test_truncation_below_a_marker(open_log: OpenLog) -> None:
    lg = open_log()
    lg.append_as_leader(txn_batch(1, 0), 0)  # 0
    lg.append_as_leader(txn_batch(1, 1), 0)  # 1
    write_marker(lg, ABORT, 1)  # 2
    lg.append_as_leader(batch(1), 0)  # 3
    lg.update_high_watermark(4)
    assert lg.last_stable_offset == 4 and lg.collect_aborted_transactions(0, 4)
    lg.truncate_to(2)  # the marker goes: the transaction is ongoing again
    assert lg.log_end_offset == 2
    assert lg.collect_aborted_transactions(0, 10) == []
    assert lg.segments[0].txn_index.all_aborted_txns() == []
    assert lg.has_ongoing_transaction(1, 0)
    assert lg.first_unstable_offset == 0 and lg.last_stable_offset == 0
    # The follower gets the leader's commit instead.
    follower_marker = build_end_txn_marker_batch(COMMIT, producer_id=1, producer_epoch=0,
                                                 coordinator_epoch=0, timestamp=T0, base_offset=2)
    lg.append_as_follower(follower_marker)
    lg.update_high_watermark(3)
    assert lg.last_stable_offset == 3 and lg.collect_aborted_transactions(0, 10) == []


def test_truncation_below_a_transaction_start(open_log: OpenLog) -> None:
    lg = open_log()
    lg.append_as_leader(batch(1), 0)  # 0
    lg.append_as_leader(txn_batch(1, 0), 0)  # 1
    lg.update_high_watermark(2)
    assert lg.last_stable_offset == 1
    lg.truncate_to(1)
    assert not lg.has_ongoing_transaction(1, 0)
    assert lg.first_unstable_offset is None and lg.last_stable_offset == 1


def test_segments_deleted_by_truncation_take_their_txnindex(open_log: OpenLog) -> None:
    lg = open_log()
    lg.append_as_leader(batch(1), 0)  # 0
    lg.roll()
    lg.append_as_leader(txn_batch(1, 0), 0)  # 1
    write_marker(lg, ABORT, 1)  # 2
    assert txn_files(lg) == [f"{filename_prefix(1)}.txnindex"]
    lg.truncate_to(0)  # segment 1 leaves the log: its index goes with it
    assert txn_files(lg) == [f"{filename_prefix(1)}.txnindex.deleted"]
    lg.delete_pending_segments(T0 + 1)
    assert txn_files(lg) == []
    assert lg.collect_aborted_transactions(0, 10) == []


def test_clean_restart_keeps_ongoing_txn_and_txnindex(open_log: OpenLog, tmp_path: Path) -> None:
    lg = open_log()
    lg.append_as_leader(txn_batch(1, 0), 0)  # 0
    lg.append_as_leader(txn_batch(2, 0), 0)  # 1
    write_marker(lg, ABORT, 1)  # 2
    lg.update_high_watermark(3)
    lg.flush()
    lg.close()
    lg = open_log(high_watermark=3, recovery_point=3)
    assert lg.has_ongoing_transaction(2, 0) and not lg.has_ongoing_transaction(1, 0)
    assert lg.first_unstable_offset == 1 and lg.last_stable_offset == 1
    assert lg.collect_aborted_transactions(0, 10) == [AbortedTxn(1, 0, 2, 1)]
    write_marker(lg, COMMIT, 2)  # 3
    lg.update_high_watermark(4)
    assert lg.last_stable_offset == 4


def test_reopen_without_snapshot_replays_markers(open_log: OpenLog) -> None:
    lg = open_log()
    lg.append_as_leader(txn_batch(1, 0), 0)  # 0
    write_marker(lg, COMMIT, 1)  # 1
    lg.append_as_leader(txn_batch(2, 0), 0)  # 2
    lg.flush()
    for segment in lg.segments:
        segment.close()  # a crash: no snapshot at close
    lg = open_log(high_watermark=3, recovery_point=3)
    assert not lg.has_ongoing_transaction(1, 0) and lg.has_ongoing_transaction(2, 0)
    assert lg.first_unstable_offset == 2


def test_unclean_reopen_rebuilds_txnindex(open_log: OpenLog) -> None:
    lg = open_log(config(segment_bytes=10_000))
    lg.append_as_leader(txn_batch(1, 0), 0)  # 0
    lg.append_as_leader(txn_batch(2, 0), 0)  # 1
    lg.roll()
    write_marker(lg, ABORT, 1)  # 2, segment 2
    lg.append_as_leader(txn_batch(3, 0), 0)  # 3
    write_marker(lg, ABORT, 3)  # 4
    expected = [AbortedTxn(1, 0, 2, 1), AbortedTxn(3, 3, 4, 1)]
    assert lg.collect_aborted_transactions(0, 10) == expected
    lg.flush()
    index = lg.segments[1].txn_index.path
    for segment in lg.segments:
        segment.close()
    index.unlink()  # lost in the crash
    lg = open_log(config(segment_bytes=10_000), high_watermark=5, recovery_point=0,
                  had_clean_shutdown=False)
    assert lg.collect_aborted_transactions(0, 10) == expected
    assert index.exists()
    assert lg.has_ongoing_transaction(2, 0) and lg.first_unstable_offset == 1


def test_unclean_reopen_drops_entries_of_a_torn_marker(open_log: OpenLog) -> None:
    lg = open_log()
    lg.append_as_leader(txn_batch(1, 0), 0)  # 0
    write_marker(lg, ABORT, 1)  # 1
    lg.flush()
    segment = lg.segments[0]
    size, path = segment.size, segment.log_path
    for s in lg.segments:
        s.close()
    with open(path, "r+b") as f:
        f.truncate(size - 3)  # the marker was torn
    lg = open_log(high_watermark=0, recovery_point=0, had_clean_shutdown=False)
    assert lg.log_end_offset == 1
    assert lg.collect_aborted_transactions(0, 10) == []
    assert lg.has_ongoing_transaction(1, 0)


def test_corrupt_txnindex_is_rebuilt(open_log: OpenLog) -> None:
    lg = open_log()
    lg.append_as_leader(txn_batch(1, 0), 0)
    write_marker(lg, ABORT, 1)
    path = lg.segments[0].txn_index.path
    lg.flush()
    lg.close()
    with open(path, "ab") as f:
        f.write(b"\x00" * 5)  # not a whole entry
    lg = open_log(high_watermark=2, recovery_point=2)
    assert lg.collect_aborted_transactions(0, 10) == [AbortedTxn(1, 0, 1, 2)]
    assert path.stat().st_size == 34


def test_client_may_not_write_control_batches(open_log: OpenLog) -> None:
    lg = open_log()
    with pytest.raises(InvalidRecordError, match="Clients are not allowed to write control records"):
        lg.append_as_leader(marker(COMMIT, 1), 0)
    assert lg.log_end_offset == 0


def test_non_transactional_write_during_txn_is_refused(open_log: OpenLog) -> None:
    lg = open_log()
    lg.append_as_leader(txn_batch(1, 0), 0)
    with pytest.raises(InvalidTxnStateError):
        lg.append_as_leader(batch(1, producer_id=1, producer_epoch=0, base_sequence=1), 0)
    assert lg.log_end_offset == 1


def test_coordinator_append_skips_sequences_but_checks_fencing(open_log: OpenLog) -> None:
    lg = open_log()
    # The group coordinator's TxnOffsetCommit: transactional, any sequence.
    lg.append_as_leader(txn_batch(5, 17, epoch=2), 0, origin=COORD)
    assert lg.has_ongoing_transaction(5, 2)
    with pytest.raises(InvalidProducerEpochError):
        write_marker(lg, COMMIT, 5, epoch=1)
    write_marker(lg, COMMIT, 5, epoch=2, coordinator_epoch=4)
    lg.append_as_leader(txn_batch(5, 0, epoch=2), 0, origin=COORD)
    with pytest.raises(TransactionCoordinatorFencedError):
        write_marker(lg, ABORT, 5, epoch=2, coordinator_epoch=3)
    assert lg.log_end_offset == 3 and lg.has_ongoing_transaction(5, 2)


def test_marker_without_data_completes_nothing(open_log: OpenLog) -> None:
    lg = open_log()
    write_marker(lg, ABORT, 9)
    lg.update_high_watermark(1)
    assert lg.last_stable_offset == 1 and lg.collect_aborted_transactions(0, 1) == []


def test_verification_guard(open_log: OpenLog) -> None:
    lg = open_log()
    state = lg.producer_state
    with pytest.raises(InvalidTxnStateError):
        lg.append_as_leader(txn_batch(1, 0), 0, verification_guard=None)
    guard = state.create_verification_guard(1)
    assert state.verification_guard_for(1) is guard
    with pytest.raises(InvalidTxnStateError):  # not the current guard
        lg.append_as_leader(txn_batch(1, 0), 0, verification_guard=object())
    # Concurrent produce requests of one transaction share the guard (computeIfAbsent).
    assert state.create_verification_guard(1) is guard
    assert lg.log_end_offset == 0
    lg.append_as_leader(txn_batch(1, 0), 0, verification_guard=guard)
    assert state.verification_guard_for(1) is None  # a transaction start clears it
    # Within the transaction no guard is needed.
    lg.append_as_leader(txn_batch(1, 1), 0, verification_guard=None)
    # A marker clears a guard created meanwhile: a late append of the ended txn is refused.
    late = state.create_verification_guard(1)
    write_marker(lg, ABORT, 1)
    assert state.verification_guard_for(1) is None
    with pytest.raises(InvalidTxnStateError):
        lg.append_as_leader(txn_batch(1, 2), 0, verification_guard=late)
    # NO_GUARD_CHECK skips the check.
    lg.append_as_leader(txn_batch(1, 2), 0, verification_guard=NO_GUARD_CHECK)
    assert lg.has_ongoing_transaction(1, 0)


def test_follower_append_of_markers(open_log: OpenLog) -> None:
    leader = open_log(name="t-0")
    leader.append_as_leader(txn_batch(1, 0, 2), 3)  # 0-1
    leader.append_as_leader(txn_batch(2, 0), 3)  # 2
    write_marker(leader, ABORT, 1)  # 3
    leader.append_as_leader(marker(COMMIT, 2), 3, origin=COORD)  # 4
    data = leader.read(0, 1 << 20).read_bytes()
    assert len(list(iter_batches(data))) == 4
    follower = open_log(name="t-1")
    follower.append_as_follower(data)
    assert follower.log_end_offset == 5
    assert follower.collect_aborted_transactions(0, 10) == [AbortedTxn(1, 0, 3, 2)]
    assert follower.first_unstable_offset == 0
    follower.update_high_watermark(5)
    assert follower.last_stable_offset == 5 and follower.first_unstable_offset is None


def test_hw_does_not_pass_ongoing_txn(open_log: OpenLog) -> None:
    lg = open_log()
    lg.append_as_leader(txn_batch(1, 0), 0)  # 0
    lg.append_as_leader(batch(3), 0)  # 1-3
    lg.update_high_watermark(2)
    assert lg.last_stable_offset == 0
    write_marker(lg, COMMIT, 1)  # 4
    lg.update_high_watermark(4)  # the marker itself not yet replicated
    assert lg.last_stable_offset == 0
    lg.update_high_watermark(5)
    assert lg.last_stable_offset == 5


def test_change_suffix_renames_txnindex(open_log: OpenLog) -> None:
    lg = open_log()
    lg.append_as_leader(txn_batch(1, 0), 0)
    write_marker(lg, ABORT, 1)
    segment = lg.segments[0]
    segment.change_suffix("", ".swap")
    assert txn_files(lg) == [f"{filename_prefix(0)}.txnindex.swap"]
    segment.change_suffix(".swap", "")
    assert txn_files(lg) == [f"{filename_prefix(0)}.txnindex"]
    assert segment.txn_index.all_aborted_txns() == [AbortedTxn(1, 0, 1, 2)]
    # A segment without entries only changes the path.
    lg.roll()
    lg.active_segment.change_suffix("", ".deleted")
    assert lg.active_segment.txn_index.path.name == f"{filename_prefix(2)}.txnindex.deleted"
    assert txn_files(lg) == [f"{filename_prefix(0)}.txnindex"]


def _log_with_aborted_txn_and_swap(open_log: OpenLog, suffix: str) -> Log:
    """A log whose first segment holds an aborted transaction, plus a copy of that segment
    left under ``suffix`` (``.swap`` or ``.cleaned``) by a cleaning a crash interrupted;
    the copy's .txnindex says last stable offset 99."""
    cfg = config(segment_bytes=400)
    lg = open_log(cfg)
    lg.append_as_leader(txn_batch(1, 0), 0)  # 0
    write_marker(lg, ABORT, 1)  # 1
    while len(lg.segments) < 3:
        lg.append_as_leader(batch(1), 0)
    lg.update_high_watermark(lg.log_end_offset)
    first = lg.segments[0]
    copy = LogSegment(lg.dir, 0, index_interval_bytes=100, max_index_size=4096, now_ms=0,
                      suffix=suffix)
    data = first.read_bytes(0, first.size)
    copy.append(data, [(pos, h.size, h.last_offset, h.max_timestamp)
                       for pos, h in iter_batches(data)])
    copy.update_txn_index(AbortedTxn(1, 0, 1, 99))
    copy.on_become_inactive()
    copy.flush()
    copy.close()
    lg.flush()
    lg.close()
    return lg


@pytest.mark.parametrize("renamed", [False, True])
def test_loader_completes_an_interrupted_swap_with_its_txnindex(open_log: OpenLog,
                                                               renamed: bool) -> None:
    lg = _log_with_aborted_txn_and_swap(open_log, ".swap")
    if renamed:  # the crash hit after the .txnindex.swap took its live name
        os.rename(lg.dir / f"{filename_prefix(0)}.txnindex.swap",
                  lg.dir / f"{filename_prefix(0)}.txnindex")
    (lg.dir / f"{filename_prefix(1)}.txnindex.deleted").write_bytes(b"x")
    (lg.dir / f"{filename_prefix(5000)}.txnindex").write_bytes(b"")  # no log file
    lg = open_log(config(segment_bytes=400), high_watermark=lg.log_end_offset,
                  recovery_point=lg.log_end_offset)
    # Rebuilt from the swapped-in log, whichever file survived.
    assert lg.segments[0].txn_index.all_aborted_txns() == [AbortedTxn(1, 0, 1, 2)]
    assert txn_files(lg) == [f"{filename_prefix(0)}.txnindex"]
    assert not [n for n in os.listdir(lg.dir) if n.endswith(".swap")]
    assert lg.collect_aborted_transactions(0, 10) == [AbortedTxn(1, 0, 1, 2)]


def test_loader_discards_a_swap_that_had_not_begun(open_log: OpenLog) -> None:
    lg = _log_with_aborted_txn_and_swap(open_log, ".swap")
    # A .cleaned file left: the swap had not begun for the whole cleaning.
    (lg.dir / f"{filename_prefix(7)}.log.cleaned").write_bytes(b"")
    lg = open_log(config(segment_bytes=400), high_watermark=lg.log_end_offset,
                  recovery_point=lg.log_end_offset)
    assert lg.segments[0].txn_index.all_aborted_txns() == [AbortedTxn(1, 0, 1, 2)]
    assert txn_files(lg) == [f"{filename_prefix(0)}.txnindex"]


def test_first_unstable_offset_never_below_log_start(open_log: OpenLog) -> None:
    lg = open_log()
    lg.append_as_leader(txn_batch(1, 0), 0)  # 0
    lg.append_as_leader(batch(2), 0)  # 1-2
    lg.update_high_watermark(3)
    lg.maybe_increment_log_start_offset(2)
    assert lg.first_unstable_offset == 2 and lg.last_stable_offset == 2


def _leader_change_batch(pid: int, base_offset: int) -> bytes:
    """A control batch with a LEADER_CHANGE record: not an end-transaction marker."""
    plain = build_batch([SimpleRecord(b"", encode_control_record_key(
        ControlRecordType.LEADER_CHANGE))], timestamp=T0)
    return encode_batch(plain[HEADER_SIZE:], base_offset=base_offset, last_offset_delta=0,
                        records_count=1, attributes=0x30, base_timestamp=T0, max_timestamp=T0,
                        partition_leader_epoch=0, producer_id=pid, producer_epoch=0,
                        base_sequence=-1)


def test_other_control_batches_complete_nothing(open_log: OpenLog) -> None:
    lg = open_log()
    with pytest.raises(InvalidRecordError):
        lg.append_as_leader(_leader_change_batch(1, 0), 0, origin=COORD)
    lg.append_as_follower(txn_batch(1, 0))
    lg.append_as_follower(_leader_change_batch(1, 1))  # a replica keeps going
    assert lg.log_end_offset == 2 and lg.has_ongoing_transaction(1, 0)
    lg.flush()
    for segment in lg.segments:
        segment.close()
    lg = open_log(high_watermark=2, recovery_point=0, had_clean_shutdown=False)
    assert lg.log_end_offset == 2 and lg.has_ongoing_transaction(1, 0)
