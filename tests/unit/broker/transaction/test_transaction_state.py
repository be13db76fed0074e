"""TransactionMetadata against Kafka 2.8's TransactionMetadata: the transition table over all
8x8 state pairs, the prepare/complete protocol, epoch bumps (KIP-360) and the partition of a
transactional id in ``__transaction_state``."""

from __future__ import annotations

import copy
import dataclasses
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.broker.transaction.transaction_state import (
    NO_PRODUCER_EPOCH,
    IllegalStateError,
    PendingTransitionError,
    ProducerFencedError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    coordinator_partition,
    is_epoch_exhausted,
    is_valid_transition,
)
from odradek.common import TopicPartition

S = TransactionState
ALL_PAIRS = list(itertools.product(S, S))
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)

# Written out pair by pair from Kafka 2.8's validPreviousStates, independently of the module.
ALLOWED = {
    (S.EMPTY, S.EMPTY), (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_ABORT, S.EMPTY),
    (S.ONGOING, S.ONGOING), (S.EMPTY, S.ONGOING), (S.COMPLETE_COMMIT, S.ONGOING), (S.COMPLETE_ABORT, S.ONGOING),
    (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.EMPTY, S.DEAD), (S.COMPLETE_ABORT, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
}
# Valid moves that are prepared but never completed (Kafka's completeTransitionTo refuses them).
NEVER_COMPLETED = {S.DEAD, S.PREPARE_EPOCH_FENCE}


def metadata(state: TransactionState = S.EMPTY, epoch: int = 5, partitions: frozenset = frozenset(),
             start: int = 1000) -> TransactionMetadata:
    return TransactionMetadata("txn", producer_id=7, last_producer_id=-1, producer_epoch=epoch,
                               last_producer_epoch=NO_PRODUCER_EPOCH, txn_timeout_ms=60000, state=state,
                               topic_partitions=set(partitions), txn_start_timestamp=start,
                               txn_last_update_timestamp=1000)


def test_state_bytes_are_kafkas() -> None:
    assert [(str(s), s.value) for s in S] == [
        ("Empty", 0), ("Ongoing", 1), ("PrepareCommit", 2), ("PrepareAbort", 3),
        ("CompleteCommit", 4), ("CompleteAbort", 5), ("Dead", 6), ("PrepareEpochFence", 7)]


def test_expiration_allowed_only_when_idle() -> None:
    assert {s for s in S if s.is_expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


@pytest.mark.parametrize(("old", "new"), ALL_PAIRS, ids=[f"{a}->{b}" for a, b in ALL_PAIRS])
def test_table(old: TransactionState, new: TransactionState) -> None:
    assert is_valid_transition(old, new) == ((old, new) in ALLOWED)


def consistent_transit(md: TransactionMetadata, to: TransactionState) -> TxnTransitMetadata:
    """A transit to ``to`` that keeps every per-state invariant, so only the table can refuse it."""
    transit = dataclasses.replace(md.prepare_no_transit(), state=to, txn_last_update_timestamp=2000)
    if to is S.EMPTY:
        transit = dataclasses.replace(transit, topic_partitions=frozenset(), txn_start_timestamp=-1)
    return transit


@pytest.mark.parametrize(("old", "new"), ALL_PAIRS, ids=[f"{a}->{b}" for a, b in ALL_PAIRS])
def test_complete_transition_every_pair(old: TransactionState, new: TransactionState) -> None:
    md = metadata(old, partitions=frozenset({TP0}))
    md.pending_state = new
    transit = consistent_transit(md, new)
    before = copy.deepcopy(md)
    if (old, new) in ALLOWED and new not in NEVER_COMPLETED:
        md.complete_transition(transit)
        assert md.state is new and md.pending_state is None and md.txn_last_update_timestamp == 2000
        return
    with pytest.raises(IllegalStateError) as err:
        md.complete_transition(transit)
    assert str(old) in str(err.value) and str(new) in str(err.value)
    if (old, new) not in ALLOWED:
        assert "invalid transition" in str(err.value)
    assert md == before  # refused: nothing changed


def prepare_to(md: TransactionMetadata, target: TransactionState) -> TxnTransitMetadata:
    """Reach ``target`` through the public prepare method the coordinator would call."""
    if target is S.EMPTY:
        return md.prepare_incr_producer_epoch(60000, None, 2000)
    if target is S.ONGOING:
        return md.prepare_add_partitions({TP1}, 2000)
    if target in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return md.prepare_abort_or_commit(target, 2000)
    if target is S.DEAD:
        return md.prepare_dead()
    assert target is S.PREPARE_EPOCH_FENCE
    return md.prepare_fence_producer_epoch()


PREPARABLE = [(a, b) for a, b in ALL_PAIRS if b not in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)]


@pytest.mark.parametrize(("old", "new"), PREPARABLE, ids=[f"{a}->{b}" for a, b in PREPARABLE])
def test_prepare_every_pair(old: TransactionState, new: TransactionState) -> None:
    md = metadata(old)
    if (old, new) in ALLOWED:
        assert prepare_to(md, new).state is new
        assert md.pending_state is new and md.state is old
    else:
        with pytest.raises(IllegalStateError, match=f"from {old} to {new}"):
            prepare_to(md, new)
        assert md.pending_state is None


@pytest.mark.parametrize(("old", "expected"), [
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT), (S.PREPARE_ABORT, S.COMPLETE_ABORT)])
def test_prepare_complete_follows_prepare(old: TransactionState, expected: TransactionState) -> None:
    md = metadata(old, partitions=frozenset({TP0}))
    md.has_failed_epoch_fence = True
    transit = md.prepare_complete(3000)
    assert transit.state is expected and transit.topic_partitions == frozenset()
    assert not md.has_failed_epoch_fence
    md.complete_transition(transit)
    assert md.state is expected and md.topic_partitions == set() and md.txn_start_timestamp == 1000


@pytest.mark.parametrize("old", [s for s in S if s not in (S.PREPARE_COMMIT, S.PREPARE_ABORT)])
def test_prepare_complete_refused_elsewhere(old: TransactionState) -> None:
    md = metadata(old)
    with pytest.raises(IllegalStateError, match=f"from {old} to CompleteAbort"):
        md.prepare_complete(3000)
    assert md.pending_state is None


def test_a_whole_transaction() -> None:
    md = TransactionMetadata.new("txn", producer_id=7, producer_epoch=-1, txn_timeout_ms=60000, timestamp=100)
    md.complete_transition(md.prepare_incr_producer_epoch(30000, None, 200))
    assert (md.state, md.producer_epoch, md.txn_timeout_ms, md.txn_start_timestamp) == (S.EMPTY, 0, 30000, 100)
    md.complete_transition(md.prepare_add_partitions({TP0}, 300))
    md.complete_transition(md.prepare_add_partitions({TP1}, 400))
    assert md.state is S.ONGOING and md.topic_partitions == {TP0, TP1} and md.txn_start_timestamp == 300
    md.complete_transition(md.prepare_abort_or_commit(S.PREPARE_COMMIT, 500))
    md.complete_transition(md.prepare_complete(600))
    assert (md.state, md.topic_partitions, md.txn_last_update_timestamp) == (S.COMPLETE_COMMIT, set(), 600)
    # The next transaction starts on the next add.
    md.complete_transition(md.prepare_add_partitions({TP1}, 700))
    assert md.txn_start_timestamp == 700 and md.topic_partitions == {TP1}


def test_a_second_prepare_while_pending_is_refused() -> None:
    md = metadata(S.ONGOING, partitions=frozenset({TP0}))
    transit = md.prepare_abort_or_commit(S.PREPARE_COMMIT, 2000)
    with pytest.raises(PendingTransitionError, match="PrepareCommit is pending"):
        md.prepare_abort_or_commit(S.PREPARE_ABORT, 2000)
    with pytest.raises(PendingTransitionError):
        md.prepare_add_partitions({TP1}, 2000)
    assert md.pending_transition_in_progress and md.pending_state is S.PREPARE_COMMIT
    md.complete_transition(transit)
    assert not md.pending_transition_in_progress and md.state is S.PREPARE_COMMIT


def test_complete_without_pending_or_with_another_target_is_refused() -> None:
    md = metadata(S.ONGOING, partitions=frozenset({TP0}))
    transit = consistent_transit(md, S.PREPARE_COMMIT)
    with pytest.raises(IllegalStateError, match="without a pending state"):
        md.complete_transition(transit)
    md.prepare_abort_or_commit(S.PREPARE_ABORT, 2000)
    with pytest.raises(IllegalStateError, match="pending state is PrepareAbort"):
        md.complete_transition(transit)
    assert md.state is S.ONGOING and md.pending_state is S.PREPARE_ABORT


@pytest.mark.parametrize("change", [
    {"producer_epoch": 6}, {"producer_id": 8}, {"txn_timeout_ms": 1}, {"topic_partitions": frozenset()},
])
def test_complete_refuses_inconsistent_ongoing(change: dict) -> None:
    md = metadata(S.ONGOING, partitions=frozenset({TP0}))
    transit = dataclasses.replace(md.prepare_add_partitions({TP1}, 2000), **change)
    with pytest.raises(IllegalStateError, match="unexpected metadata"):
        md.complete_transition(transit)
    assert md.state is S.ONGOING and md.topic_partitions == {TP0}


# ---------------------------------------------------------------------- epochs (KIP-360)


def test_bump_without_expected_epoch_clears_last_epoch() -> None:
    md = metadata(S.COMPLETE_COMMIT)
    t = md.prepare_incr_producer_epoch(1234, None, 2000)
    assert (t.producer_epoch, t.last_producer_epoch, t.txn_timeout_ms) == (6, NO_PRODUCER_EPOCH, 1234)
    assert (t.producer_id, t.last_producer_id, t.txn_start_timestamp, t.topic_partitions) == (7, 7, -1, frozenset())


def test_bump_with_current_epoch_keeps_it_as_last() -> None:
    md = metadata(S.EMPTY)
    t = md.prepare_incr_producer_epoch(60000, 5, 2000)
    assert (t.producer_epoch, t.last_producer_epoch) == (6, 5)
    md.complete_transition(t)
    # The producer retries after a lost response: same epoch again, no second bump.
    t2 = md.prepare_incr_producer_epoch(60000, 5, 3000)
    assert (t2.producer_epoch, t2.last_producer_epoch) == (6, 5)


def test_bump_for_a_new_producer() -> None:
    md = metadata(S.EMPTY, epoch=NO_PRODUCER_EPOCH)
    t = md.prepare_incr_producer_epoch(60000, 3, 2000)
    assert (t.producer_epoch, t.last_producer_epoch) == (0, NO_PRODUCER_EPOCH)


def test_stale_epoch_is_fenced() -> None:
    md = metadata(S.EMPTY)
    md.last_producer_epoch = 4
    with pytest.raises(ProducerFencedError, match="expected producer epoch 3"):
        md.prepare_incr_producer_epoch(60000, 3, 2000)
    assert md.pending_state is None


@pytest.mark.parametrize(("epoch", "exhausted"), [(0, False), (32764, False), (32765, False), (32766, True),
                                                  (32767, True)])
def test_epoch_exhaustion(epoch: int, exhausted: bool) -> None:
    assert is_epoch_exhausted(epoch) is exhausted
    md = metadata(S.EMPTY, epoch=epoch)
    assert md.is_producer_epoch_exhausted is exhausted
    if exhausted:
        with pytest.raises(IllegalStateError, match="cannot allocate any more producer epochs"):
            md.prepare_incr_producer_epoch(60000, None, 2000)
    else:
        assert md.prepare_incr_producer_epoch(60000, None, 2000).producer_epoch == epoch + 1


def test_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    md = metadata(S.COMPLETE_ABORT, epoch=32766)
    t = md.prepare_producer_id_rotation(99, 60000, 2000, record_last_epoch=True)
    assert (t.producer_id, t.last_producer_id, t.producer_epoch, t.last_producer_epoch) == (99, 7, 0, 32766)
    md.complete_transition(t)
    assert (md.producer_id, md.producer_epoch, md.state) == (99, 0, S.EMPTY)
    assert not md.is_producer_epoch_exhausted


@pytest.mark.parametrize("state", [S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_no_rotation_during_a_transaction(state: TransactionState) -> None:
    md = metadata(state)
    with pytest.raises(IllegalStateError, match=f"while a transaction is {state}"):
        md.prepare_producer_id_rotation(99, 60000, 2000, record_last_epoch=False)


def test_fence_bumps_once_and_aborts() -> None:
    md = metadata(S.ONGOING, partitions=frozenset({TP0}))
    t = md.prepare_fence_producer_epoch()
    assert (t.state, t.producer_epoch, t.last_producer_epoch) == (S.PREPARE_EPOCH_FENCE, 6, NO_PRODUCER_EPOCH)
    # A failed fence is retried without a second bump.
    md.pending_state = None
    md.has_failed_epoch_fence = True
    assert md.prepare_fence_producer_epoch().producer_epoch == 5


def test_fence_at_short_max_is_refused() -> None:
    md = metadata(S.ONGOING, epoch=32767)
    with pytest.raises(IllegalStateError, match="overflow"):
        md.prepare_fence_producer_epoch()


# ---------------------------------------------------------------------- coordinator partition


def java_hash(s: str) -> int:
    """String.hashCode, written independently: sum of c * 31^(n-1-i) over UTF-16 units, as int32."""
    units = [int.from_bytes(s.encode("utf-16-be")[i:i + 2], "big") for i in range(0, len(s.encode("utf-16-be")), 2)]
    h = sum(u * pow(31, len(units) - 1 - i, 2**32) for i, u in enumerate(units)) % 2**32
    return h - 2**32 if h >= 2**31 else h


@pytest.mark.parametrize(("tid", "java_hashcode"), [
    ("hello", 99162322), ("", 0), ("a", 97), ("polygenelubricants", -2**31), ("my-txn", None),
])
def test_coordinator_partition(tid: str, java_hashcode: int | None) -> None:
    if java_hashcode is not None:
        assert java_hash(tid) == java_hashcode
    expected_abs = 0 if java_hash(tid) == -2**31 else abs(java_hash(tid))
    assert coordinator_partition(tid, 50) == expected_abs % 50
    assert coordinator_partition("hello", 50) == 22


@given(st.text(), st.integers(1, 200))
def test_coordinator_partition_in_range(tid: str, n: int) -> None:
    p = coordinator_partition(tid, n)
    assert 0 <= p < n
