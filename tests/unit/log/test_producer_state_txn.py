"""Transactions in the producer state (Kafka 2.8's ProducerAppendInfo/ProducerStateManager):
ongoing transactions, end markers, the first unstable and last stable offsets, coordinator
epoch fencing, snapshots and replay. Sans-IO: a tiny in-test "log" assigns offsets and keeps
the batch bytes, the way ``Log`` will drive the manager."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.log.producer_state import (
    NO_GUARD_CHECK,
    CompletedTxn,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
    last_stable_offset,
)
from odradek.log.transaction_index import AbortedTxn
from odradek.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
from odradek.protocol.records import (
    RecordBatchHeader,
    SimpleRecord,
    build_batch,
    encode_batch,
    parse_header,
)
from support.examples import examples

COMMIT, ABORT = ControlRecordType.COMMIT, ControlRecordType.ABORT
T0 = 1_700_000_000_000


class TxnLog:
    """Offsets, stored batches and the producer state of one partition, no files but
    snapshots: appends go through prepare/add/commit/complete_txn as Kafka's Log does."""

    def __init__(self, directory: Path) -> None:
        self.state = ProducerStateManager(directory)
        self.next_offset = 0
        self.batches: dict[int, bytes] = {}
        self.headers: list[RecordBatchHeader] = []
        self.aborted: list[AbortedTxn] = []
        self.seqs: dict[int, int] = {}

    def _append(self, raw: bytes, from_client: bool) -> CompletedTxn | None:
        header = parse_header(raw)
        update = self.state.prepare(from_client)
        completed = update.add(header, header.base_offset, header.last_offset,
                               header.max_timestamp, raw if header.is_control else None)
        update.commit(header.next_offset)
        self.next_offset = header.next_offset
        self.batches[header.base_offset] = raw
        self.headers.append(header)
        if completed is not None:
            txn = self.state.complete_txn(completed, self.state.last_stable_offset_for(completed))
            if txn is not None:
                self.aborted.append(txn)
        return completed

    def data(self, pid: int, *, count: int = 2, epoch: int = 0, transactional: bool = True,
             from_client: bool = True) -> int:
        """Append the producer's next batch; returns its first offset."""
        seq = self.seqs.get(pid, 0)
        raw = build_batch([SimpleRecord(b"v")] * count, base_offset=self.next_offset,
                          timestamp=T0, producer_id=pid, producer_epoch=epoch,
                          base_sequence=seq, is_transactional=transactional)
        first = self.next_offset
        self._append(raw, from_client)
        self.seqs[pid] = seq + count
        return first

    def marker(self, pid: int, kind: ControlRecordType, *, epoch: int = 0,
               coordinator_epoch: int = 0, from_client: bool = True) -> CompletedTxn | None:
        raw = build_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=epoch,
                                         coordinator_epoch=coordinator_epoch, timestamp=T0,
                                         base_offset=self.next_offset)
        return self._append(raw, from_client)

    def read_batch(self, header: RecordBatchHeader) -> bytes:
        return self.batches[header.base_offset]


def test_transaction_starts_with_its_first_transactional_batch_and_ends_at_its_marker(
        tmp_path: Path) -> None:
    lg = TxnLog(tmp_path)
    assert lg.state.first_unstable_offset() is None
    lg.data(7, transactional=False)  # offsets 0-1: an idempotent write, no transaction
    assert lg.state.first_unstable_offset() is None
    first = lg.data(7)  # 2-3 start the transaction
    lg.data(7)  # 4-5 continue it
    assert lg.state.producers[7].current_txn_first_offset == first == 2
    assert lg.state.ongoing_txns == {2: 7}
    assert lg.state.first_unstable_offset() == lg.state.first_undecided_offset() == 2
    completed = lg.marker(7, COMMIT, coordinator_epoch=3)  # offset 6
    assert completed == CompletedTxn(7, 2, 6, is_aborted=False)
    entry = lg.state.producers[7]
    assert entry.current_txn_first_offset is None and entry.coordinator_epoch == 3
    assert lg.state.ongoing_txns == {} and lg.state.first_undecided_offset() is None
    assert lg.aborted == []  # a commit leaves nothing for the .txnindex
    # Until the marker is below the high watermark the transaction stays unstable.
    assert lg.state.first_unstable_offset() == 2
    lg.state.on_high_watermark_updated(6)
    assert lg.state.first_unstable_offset() == 2
    lg.state.on_high_watermark_updated(7)
    assert lg.state.first_unstable_offset() is None
    # The next transactional batch starts a new transaction; its sequences continue.
    assert lg.data(7) == 7 and lg.state.ongoing_txns == {7: 7}


def test_abort_yields_the_txnindex_entry_with_the_last_stable_offset(tmp_path: Path) -> None:
    lg = TxnLog(tmp_path)
    lg.data(1)  # 0-1, producer 1's transaction
    lg.data(2)  # 2-3, producer 2's transaction
    lg.data(1)  # 4-5
    assert lg.state.first_unstable_offset() == 0
    assert lg.marker(1, ABORT) == CompletedTxn(1, 0, 6, is_aborted=True)
    # Producer 2's transaction, still ongoing, bounds the last stable offset.
    assert lg.aborted == [AbortedTxn(1, 0, 6, last_stable_offset=2)]
    assert lg.state.first_undecided_offset() == 2
    assert lg.marker(2, ABORT) == CompletedTxn(2, 2, 7, is_aborted=True)
    assert lg.aborted[-1] == AbortedTxn(2, 2, 7, last_stable_offset=8)  # none other ongoing
    lg.state.on_high_watermark_updated(8)
    assert lg.state.first_unstable_offset() is None


def test_marker_without_data_completes_nothing(tmp_path: Path) -> None:
    # Kafka 2.8: a transaction with no data here leaves the LSO and the .txnindex alone.
    lg = TxnLog(tmp_path)
    lg.data(1)
    assert lg.marker(5, ABORT, epoch=2, coordinator_epoch=7) is None
    assert lg.state.ongoing_txns == {0: 1} and lg.aborted == []
    entry = lg.state.producers[5]
    assert (entry.producer_epoch, entry.coordinator_epoch) == (2, 7)
    assert entry.current_txn_first_offset is None


def test_interleaved_producers_and_first_unstable_offset(tmp_path: Path) -> None:
    lg = TxnLog(tmp_path)
    a = lg.data(10)  # 0
    b = lg.data(20)  # 2
    lg.data(10)
    c = lg.data(30)  # 6
    lg.data(20)
    assert list(lg.state.ongoing_txns.items()) == [(a, 10), (b, 20), (c, 30)]
    lg.marker(20, COMMIT)  # the middle one ends first
    lg.state.on_high_watermark_updated(lg.next_offset)
    assert lg.state.first_unstable_offset() == a
    lg.marker(10, COMMIT)
    lg.state.on_high_watermark_updated(lg.next_offset)
    assert lg.state.first_unstable_offset() == c
    d = lg.data(10)  # producer 10 begins again, after producer 30
    assert list(lg.state.ongoing_txns) == [c, d]
    lg.marker(30, ABORT)
    lg.state.on_high_watermark_updated(lg.next_offset)
    assert lg.state.first_unstable_offset() == d


@pytest.mark.parametrize(("first_unstable", "high_watermark", "expected"), [
    (None, 10, 10), (4, 10, 4), (10, 10, 10), (12, 10, 10), (0, 0, 0)])
def test_last_stable_offset_is_the_smaller(first_unstable: int | None, high_watermark: int,
                                           expected: int) -> None:
    assert last_stable_offset(first_unstable, high_watermark) == expected


def test_marker_from_an_older_coordinator_is_fenced(tmp_path: Path) -> None:
    lg = TxnLog(tmp_path)
    lg.data(1)
    lg.marker(1, COMMIT, coordinator_epoch=5)
    lg.data(1)  # offset 3
    with pytest.raises(TransactionCoordinatorFencedError):
        lg.marker(1, ABORT, coordinator_epoch=4)
    assert lg.state.producers[1].current_txn_first_offset == 3  # the refused marker left no trace
    assert lg.state.producers[1].coordinator_epoch == 5
    assert lg.marker(1, ABORT, coordinator_epoch=5) == CompletedTxn(1, 3, 5, is_aborted=True)
    # A replica takes what its leader wrote, even from an older coordinator (Kafka logs it).
    lg.data(1)
    assert lg.marker(1, COMMIT, coordinator_epoch=2, from_client=False) is not None
    assert lg.state.producers[1].coordinator_epoch == 2


def test_marker_with_an_older_producer_epoch_is_fenced(tmp_path: Path) -> None:
    lg = TxnLog(tmp_path)
    lg.data(1, epoch=3)
    with pytest.raises(InvalidProducerEpochError):
        lg.marker(1, ABORT, epoch=2)
    assert lg.state.ongoing_txns == {0: 1}
    # The coordinator's marker after an epoch bump carries the new epoch.
    assert lg.marker(1, ABORT, epoch=4) == CompletedTxn(1, 0, 2, is_aborted=True)
    assert lg.state.producers[1].producer_epoch == 4


def test_non_transactional_write_while_a_transaction_is_ongoing_is_refused(
        tmp_path: Path) -> None:
    lg = TxnLog(tmp_path)
    lg.data(1)
    with pytest.raises(InvalidTxnStateError):
        lg.data(1, transactional=False)
    assert lg.next_offset == 2 and lg.state.producers[1].last_seq == 1  # nothing applied
    lg.data(2, transactional=False)  # other producers are not affected
    lg.marker(1, COMMIT)
    assert lg.data(1, transactional=False) == 5  # allowed once the transaction ended
    assert 5 not in lg.state.ongoing_txns


def test_snapshot_keeps_an_ongoing_transaction(tmp_path: Path) -> None:
    lg = TxnLog(tmp_path)
    lg.data(1)  # 0-1: committed below
    lg.data(2)  # 2-3: ongoing at the snapshot
    lg.marker(1, COMMIT, coordinator_epoch=9)
    lg.state.take_snapshot()
    raw = (tmp_path / "00000000000000000005.snapshot").read_bytes()
    fields = {e[0]: e for e in struct.iter_unpack(">qhiqiqiq", raw[10:])}
    assert fields[1][6:] == (9, -1) and fields[2][6:] == (-1, 2)  # coordinator epoch, txn first

    again = ProducerStateManager(tmp_path)
    assert again.truncate_and_reload(0, 5, now_ms=T0) == 5
    assert again.producers[2].current_txn_first_offset == 2
    assert again.producers[1].coordinator_epoch == 9
    assert again.ongoing_txns == {2: 2} and again.first_unstable_offset() == 2
    # An idle producer with an ongoing transaction does not expire.
    again.remove_expired_producers(T0 + 10 * again.producer_id_expiration_ms)
    assert list(again.producers) == [2]

    lg.state = again
    lg.seqs[2] = 2
    assert lg.marker(2, ABORT) == CompletedTxn(2, 2, 5, is_aborted=True)
    assert lg.aborted == [AbortedTxn(2, 2, 5, last_stable_offset=6)]


def test_snapshot_reload_skips_expired_producers_without_transactions(tmp_path: Path) -> None:
    lg = TxnLog(tmp_path)
    lg.data(1, transactional=False)
    lg.data(2)
    lg.state.take_snapshot()
    again = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    again.truncate_and_reload(0, 4, now_ms=T0 + 5000)
    assert list(again.producers) == [2] and again.ongoing_txns == {2: 2}


def test_replay_with_markers_rebuilds_transactions_and_aborted_txns(tmp_path: Path) -> None:
    lg = TxnLog(tmp_path)
    lg.data(1)
    lg.data(2)
    lg.marker(1, ABORT, coordinator_epoch=1)
    lg.data(3)
    lg.data(2)
    lg.marker(2, COMMIT, coordinator_epoch=2)
    lg.data(1)
    lg.marker(3, ABORT, coordinator_epoch=1)
    lg.data(4, transactional=False)

    replayed = ProducerStateManager(tmp_path / "none")
    aborted = replayed.replay(lg.headers, lg.next_offset, read_batch=lg.read_batch)
    assert aborted == lg.aborted == [AbortedTxn(1, 0, 4, 2), AbortedTxn(3, 5, 12, 10)]
    assert replayed.ongoing_txns == lg.state.ongoing_txns == {10: 1}
    assert replayed.map_end_offset == lg.next_offset
    for pid, entry in lg.state.producers.items():
        again = replayed.producers[pid]
        assert (again.producer_epoch, again.last_seq, again.coordinator_epoch,
                again.current_txn_first_offset) == (
            entry.producer_epoch, entry.last_seq, entry.coordinator_epoch,
            entry.current_txn_first_offset)

    # From a snapshot taken mid-transaction, replaying the rest reaches the same state.
    part = TxnLog(tmp_path / "part")
    (tmp_path / "part").mkdir()
    for header in lg.headers[:4]:
        part._append(lg.batches[header.base_offset], from_client=False)
    part.state.take_snapshot()
    reloaded = ProducerStateManager(tmp_path / "part")
    start = reloaded.truncate_and_reload(0, lg.next_offset, now_ms=T0)
    assert start == part.next_offset == 7 and reloaded.ongoing_txns == {2: 2, 5: 3}
    rest = [h for h in lg.headers if h.base_offset >= start]
    assert reloaded.replay(rest, lg.next_offset, read_batch=lg.read_batch) == [
        AbortedTxn(3, 5, 12, 10)]
    assert reloaded.ongoing_txns == {10: 1}


def test_replay_without_a_reader_only_moves_epochs(tmp_path: Path) -> None:
    lg = TxnLog(tmp_path)
    lg.data(1)
    lg.marker(1, COMMIT, epoch=1)
    replayed = ProducerStateManager(tmp_path)
    assert replayed.replay(lg.headers, lg.next_offset) == []
    assert replayed.producers[1].producer_epoch == 1
    assert replayed.ongoing_txns == {0: 1}  # the header alone cannot end it


def test_empty_control_batch_completes_nothing(tmp_path: Path) -> None:
    # What the cleaner leaves of a marker whose transaction it removed entirely.
    raw = encode_batch(b"", base_offset=0, last_offset_delta=0, records_count=0,
                       attributes=0x30, base_timestamp=T0, max_timestamp=T0,
                       partition_leader_epoch=0, producer_id=1, producer_epoch=0,
                       base_sequence=-1)
    state = ProducerStateManager(tmp_path)
    header = parse_header(raw)
    assert state.replay([header], 1, read_batch=lambda _: raw) == []
    assert state.ongoing_txns == {} and state.producers[1].current_txn_first_offset is None


# ------------------------------------------------------------------ property

_ops = st.lists(st.tuples(st.sampled_from(["data", "plain", "commit", "abort", "hw"]),
                          st.integers(0, 3)), max_size=40)


@settings(max_examples=examples(150), deadline=None)
@given(_ops)
def test_first_unstable_offset_is_the_brute_force_minimum(tmp_path_factory: pytest.TempPathFactory,
                                                          ops: list[tuple[str, int]]) -> None:
    lg = TxnLog(tmp_path_factory.mktemp("prop"))
    ongoing: dict[int, int] = {}  # pid -> first offset, the model
    completed: list[tuple[int, int]] = []  # (first offset, marker offset)
    high_watermark = 0
    for op, pid in ops:
        if op == "data":
            first = lg.data(pid)
            ongoing.setdefault(pid, first)
        elif op == "plain":
            if pid in ongoing:
                with pytest.raises(InvalidTxnStateError):
                    lg.data(pid, transactional=False)
            else:
                lg.data(pid, transactional=False)
        elif op in ("commit", "abort"):
            marker_offset = lg.next_offset
            done = lg.marker(pid, COMMIT if op == "commit" else ABORT)
            if pid in ongoing:
                first = ongoing.pop(pid)
                assert done == CompletedTxn(pid, first, marker_offset, op == "abort")
                completed.append((first, marker_offset))
            else:
                assert done is None
        else:
            high_watermark = lg.next_offset - pid  # may move back: the state only forgets
            lg.state.on_high_watermark_updated(high_watermark)
            completed = [(f, m) for f, m in completed if m >= high_watermark]
        assert lg.state.first_undecided_offset() == min(ongoing.values(), default=None)
        unstable = [*ongoing.values(), *(f for f, _ in completed)]
        assert lg.state.first_unstable_offset() == min(unstable, default=None)
        assert list(lg.state.ongoing_txns) == sorted(ongoing.values())
        if op != "hw":  # there pid is an offset step
            assert lg.state.producers[pid].current_txn_first_offset == ongoing.get(pid)


def test_truncation_and_log_start_forget_transactions(tmp_path: Path) -> None:
    lg = TxnLog(tmp_path)
    lg.data(1)  # 0-1
    lg.marker(1, COMMIT)  # 2
    lg.data(2)  # 3-4
    assert lg.state.first_unstable_offset() == 0  # the commit is not yet replicated
    # The log start moved past the marker (no reload): the completed transaction is gone.
    assert lg.state.truncate_and_reload(3, lg.next_offset, now_ms=T0) == lg.next_offset
    assert lg.state.first_unstable_offset() == 3 and lg.state.ongoing_txns == {3: 2}
    # Truncated below producer 2's data with no snapshot: rebuilt from scratch.
    assert lg.state.truncate_and_reload(0, 3, now_ms=T0) == 0
    assert lg.state.ongoing_txns == {} and lg.state.first_unstable_offset() is None
    lg.state.replay(lg.headers[:2], 3, read_batch=lg.read_batch)
    assert lg.state.first_unstable_offset() == 0  # committed, marker above the high watermark
    lg.state.truncate_fully_and_start_at(10)
    assert lg.state.first_unstable_offset() is None and lg.state.producers == {}


def test_verification_guards_kip_890(tmp_path: Path) -> None:
    lg = TxnLog(tmp_path)
    state = lg.state
    assert state.verification_guard_for(4) is None
    second = state.create_verification_guard(4)
    assert state.create_verification_guard(4) is second  # shared, not replaced
    assert state.verification_guard_for(4) is second
    first = object()  # a guard that is not the producer's
    raw = build_batch([SimpleRecord(b"v")], timestamp=T0, producer_id=4, producer_epoch=0,
                      base_sequence=0, is_transactional=True)
    header = parse_header(raw)
    for guard in (None, first, object()):
        with pytest.raises(InvalidTxnStateError):
            state.prepare(True, verification_guard=guard).add(header, 0, 0, T0)
    # A replica's or the coordinator's append (no guard check) is never refused for it.
    state.prepare(False).add(header, 0, 0, T0)
    update = state.prepare(True, verification_guard=second)
    update.add(header, 0, 0, T0)
    assert state.verification_guard_for(4) is second  # not before commit
    update.commit(1)
    assert state.verification_guard_for(4) is None and state.has_ongoing_transaction(4, 0)
    assert not state.has_ongoing_transaction(4, 1) and not state.has_ongoing_transaction(5, 0)
    lg.next_offset = 1
    state.create_verification_guard(4)
    lg.marker(4, ABORT)
    assert state.verification_guard_for(4) is None  # the marker cleared it
    assert not state.has_ongoing_transaction(4, 0)
    raw = build_batch([SimpleRecord(b"v")], timestamp=T0, producer_id=4, producer_epoch=0,
                      base_sequence=1, is_transactional=True)
    update = state.prepare(True, verification_guard=NO_GUARD_CHECK)  # no check at all
    update.add(parse_header(raw), 2, 2, T0)
    update.commit(3)
    assert state.has_ongoing_transaction(4, 0)


def test_coordinator_appends_skip_sequence_checks(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    for offset, seq in ((0, 5), (1, 99)):
        raw = build_batch([SimpleRecord(b"v")], timestamp=T0, producer_id=3, producer_epoch=1,
                          base_sequence=seq, is_transactional=True)
        update = state.prepare(True, check_sequences=False)
        update.add(parse_header(raw), offset, offset, T0)
        update.commit(offset + 1)
    assert state.has_ongoing_transaction(3, 1)
    raw = build_batch([SimpleRecord(b"v")], timestamp=T0, producer_id=3, producer_epoch=0,
                      base_sequence=0, is_transactional=True)
    with pytest.raises(InvalidProducerEpochError):  # fencing still applies
        state.prepare(True, check_sequences=False).add(parse_header(raw), 2, 2, T0)
