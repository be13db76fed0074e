"""Setup steps a case takes before the request it is about, at fixed versions both sides
speak: produced records, a joined group member, a producer id, an ongoing transaction.
A step that fails on one side fails the case there (its message names the side)."""

from __future__ import annotations

from typing import Any

from oracle import requests as rq
from oracle.side import Closed, Session

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

__all__ = ["committed", "coordinator", "ended", "joined", "ongoing_transaction", "produced", "producer", "txn_offsets"]

GROUP, TRANSACTION = 0, 1


def _ok(s: Session, response: Any, what: str) -> Any:
    assert not isinstance(response, Closed), f"{s.side.name}: {what}: connection closed"
    return response


def coordinator(s: Session, key: str, key_type: int = GROUP) -> int:
    """The coordinator of a group or transactional id, once it is available (the internal
    topic may be created by this very request)."""
    def ask() -> Any:
        r = _ok(s, s.call(rq.find_coordinator(s.at(ApiKey.FIND_COORDINATOR, 3), key, key_type)), "FindCoordinator")
        return r if r.error_code == ErrorCode.none else None
    return s.wait(ask, f"a coordinator for {key}").node_id


def produced(s: Session, topic: str, *values: bytes, partition: int = 0, **batch: Any) -> int:
    """Produce one batch of ``values`` with acks=-1 (Produce v9); its base offset."""
    r = _ok(s, s.call(rq.produce(s.at(ApiKey.PRODUCE, 9), topic, rq.batch(*values, **batch), partition),
                      broker=s.leader(topic, partition)), "Produce")
    p = r.responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.none, f"{s.side.name}: produce to {topic}: {p.error_code}"
    return p.base_offset


def joined(s: Session, group: str, *, instance_id: str | None = None) -> tuple[str, int]:
    """A member that has joined ``group`` (JoinGroup v5, retried with the id it is given)
    and synced as its leader (SyncGroup v3): (member id, generation)."""
    broker = coordinator(s, group)
    join = s.at(ApiKey.JOIN_GROUP, 5)
    r = _ok(s, s.call(rq.join_group(join, group, instance_id=instance_id), broker), "JoinGroup")
    if r.error_code == ErrorCode.member_id_required:
        r = _ok(s, s.call(rq.join_group(join, group, r.member_id, instance_id=instance_id), broker), "JoinGroup")
    assert r.error_code == ErrorCode.none, f"{s.side.name}: join {group}: {r.error_code}"
    sync = _ok(s, s.call(rq.sync_group(s.at(ApiKey.SYNC_GROUP, 3), group, r.generation_id, r.member_id,
                                       {r.member_id: b"\x00\x01assignment"}, instance_id=instance_id), broker),
               "SyncGroup")
    assert sync.error_code == ErrorCode.none, f"{s.side.name}: sync {group}: {sync.error_code}"
    return r.member_id, r.generation_id


def committed(s: Session, group: str, topic: str, offset: int, partition: int = 0) -> None:
    """Commit an offset for a group with no members (OffsetCommit v8, generation -1)."""
    r = _ok(s, s.call(rq.offset_commit(s.at(ApiKey.OFFSET_COMMIT, 8), group, {(topic, partition): offset}),
                      coordinator(s, group)), "OffsetCommit")
    error = r.topics[0].partitions[0].error_code
    assert error == ErrorCode.none, f"{s.side.name}: commit for {group}: {error}"


def producer(s: Session, transactional_id: str | None = None, timeout_ms: int = 60_000) -> tuple[int, int]:
    """(producer id, epoch) from InitProducerId v2, at the coordinator of ``transactional_id``."""
    broker = 0 if transactional_id is None else coordinator(s, transactional_id, TRANSACTION)
    r = s.wait(lambda: _retriable(_ok(s, s.call(rq.init_producer_id(
        s.at(ApiKey.INIT_PRODUCER_ID, 2), transactional_id, timeout_ms), broker), "InitProducerId")),
        f"a producer id for {transactional_id}")
    return r.producer_id, r.producer_epoch


def _retriable(response: Any) -> Any:
    if response.error_code in (ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions,
                               ErrorCode.coordinator_not_available, ErrorCode.not_coordinator):
        return None
    assert response.error_code == ErrorCode.none, response.error_code
    return response


class _Coded:
    def __init__(self, error_code: ErrorCode) -> None:
        self.error_code = error_code


def ongoing_transaction(s: Session, transactional_id: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """A transaction with ``topic``'s partition added (AddPartitionsToTxn v3) and one
    transactional batch written to it: (producer id, epoch)."""
    pid, epoch = producer(s, transactional_id)
    broker = coordinator(s, transactional_id, TRANSACTION)
    def add() -> Any:
        r = _ok(s, s.call(rq.add_partitions_to_txn(s.at(ApiKey.ADD_PARTITIONS_TO_TXN, 3), transactional_id, pid,
                                                   epoch, {topic: [partition]}), broker), "AddPartitionsToTxn")
        error = r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
        return None if error == ErrorCode.concurrent_transactions else _retriable(_Coded(error))
    s.wait(add, f"{topic} added to {transactional_id}")
    r = _ok(s, s.call(rq.produce(s.at(ApiKey.PRODUCE, 9), topic, rq.batch(
        b"txn", producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True), partition,
        transactional_id=transactional_id), s.leader(topic, partition)), "Produce")
    error = r.responses[0].partition_responses[0].error_code
    assert error == ErrorCode.none, f"{s.side.name}: transactional produce: {error}"
    return pid, epoch


def ended(s: Session, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> None:
    """EndTxn v3, then wait until the markers are written (DescribeTransactions shows the
    transaction complete)."""
    broker = coordinator(s, transactional_id, TRANSACTION)
    r = _ok(s, s.call(rq.end_txn(s.at(ApiKey.END_TXN, 3), transactional_id, producer_id, producer_epoch, commit),
                      broker), "EndTxn")
    assert r.error_code == ErrorCode.none, f"{s.side.name}: EndTxn: {r.error_code}"
    wanted = "CompleteCommit" if commit else "CompleteAbort"
    describe = s.at(ApiKey.DESCRIBE_TRANSACTIONS, 0)

    def complete() -> bool:
        d = _ok(s, s.call(describe.DescribeTransactionsRequest(transactional_ids=[transactional_id]), broker),
                "DescribeTransactions")
        return d.transaction_states[0].transaction_state == wanted
    s.wait(complete, f"{transactional_id} {wanted}")


def txn_offsets(s: Session, transactional_id: str, group: str, producer_id: int, producer_epoch: int, topic: str,
                offset: int) -> None:
    """The group's offsets added to the transaction and committed in it (not yet final)."""
    broker = coordinator(s, transactional_id, TRANSACTION)
    added = _ok(s, s.call(rq.add_offsets_to_txn(s.at(ApiKey.ADD_OFFSETS_TO_TXN, 3), transactional_id, producer_id,
                                                producer_epoch, group), broker), "AddOffsetsToTxn")
    assert added.error_code == ErrorCode.none, f"{s.side.name}: AddOffsetsToTxn: {added.error_code}"
    r = _ok(s, s.call(rq.txn_offset_commit(s.at(ApiKey.TXN_OFFSET_COMMIT, 3), transactional_id, group, producer_id,
                                           producer_epoch, {(topic, 0): offset}), coordinator(s, group)),
            "TxnOffsetCommit")
    error = r.topics[0].partitions[0].error_code
    assert error == ErrorCode.none, f"{s.side.name}: TxnOffsetCommit: {error}"
