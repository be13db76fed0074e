"""TransactionCoordinator against an in-memory __transaction_state and a recording marker
sender: request -> state decisions, markers and completion, fencing, KIP-360, loading,
timeouts, expiry, verification."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from txn_fakes import FakeTxnTopic, Harness

from odradek.broker.peer_connections import PeerConnections
from odradek.broker.transaction.transaction_state import TransactionMetadata, TransactionState
from odradek.broker.transaction.txn_config import TxnConfig
from odradek.broker.transaction.verifier import TxnVerifier, produce_error_for
from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode as E

S = TransactionState
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
TIMEOUT = 60_000


def run(test: Callable[[Harness], Awaitable[None]], harness: Harness | None = None) -> None:
    async def main() -> None:
        h = harness or Harness()
        await h.elect()
        await test(h)
        await h.coordinator.shutdown()
    asyncio.run(main())


async def begin(h: Harness, txn_id: str = "tx", partitions: tuple[TopicPartition, ...] = (TP0,)) -> tuple[int, int]:
    r = await h.coordinator.init_producer_id(txn_id, TIMEOUT)
    assert r.error == E.none
    assert await h.coordinator.add_partitions(txn_id, r.producer_id, r.producer_epoch, partitions) == E.none
    return r.producer_id, r.producer_epoch


def md(h: Harness, txn_id: str = "tx") -> TransactionMetadata:
    return h.manager.txns[txn_id]


# ----------------------------------------------------------------------------- InitProducerId


def test_init_producer_id_allocates_then_bumps_the_epoch() -> None:
    async def t(h: Harness) -> None:
        first = await h.coordinator.init_producer_id("tx", TIMEOUT)
        assert (first.error, first.producer_id, first.producer_epoch) == (E.none, 1000, 0)
        second = await h.coordinator.init_producer_id("tx", TIMEOUT)
        assert (second.error, second.producer_id, second.producer_epoch) == (E.none, 1000, 1)
        written = h.topic.records()
        assert [(k, v.state, v.producer_id, v.producer_epoch) for k, v in written] == [
            ("tx", S.EMPTY, 1000, 0), ("tx", S.EMPTY, 1000, 1)]
    run(t)


def test_init_producer_id_refuses_bad_timeouts_and_empty_ids() -> None:
    async def t(h: Harness) -> None:
        too_long = await h.coordinator.init_producer_id("tx", h.config.max_timeout_ms + 1)
        assert too_long.error == E.invalid_transaction_timeout
        assert (await h.coordinator.init_producer_id("tx", 0)).error == E.invalid_transaction_timeout
        assert (await h.coordinator.init_producer_id("", TIMEOUT)).error == E.invalid_request
        assert h.topic.records() == []
    run(t)


def test_not_coordinator_and_load_in_progress() -> None:
    async def main() -> None:
        h = Harness(TxnConfig(num_partitions=1))
        assert (await h.coordinator.init_producer_id("tx", TIMEOUT)).error == E.not_coordinator
        h.coordinator.on_election(0, 1)
        assert (await h.coordinator.init_producer_id("tx", TIMEOUT)).error == E.coordinator_load_in_progress
        assert await h.coordinator.add_partitions("tx", 1, 0, [TP0]) == E.coordinator_load_in_progress
        await asyncio.gather(*h.manager.loading.values())
        assert (await h.coordinator.init_producer_id("tx", TIMEOUT)).error == E.none
        h.coordinator.on_resignation(0)
        assert await h.coordinator.end_transaction("tx", 1000, 0, commit=True) == E.not_coordinator
    asyncio.run(main())


def test_kip360_expected_epoch_bumps_retries_and_fences() -> None:
    async def t(h: Harness) -> None:
        r = await h.coordinator.init_producer_id("tx", TIMEOUT)
        bumped = await h.coordinator.init_producer_id("tx", TIMEOUT, (r.producer_id, r.producer_epoch))
        assert (bumped.error, bumped.producer_epoch) == (E.none, 1)
        # The same request again (its answer was lost): the current epoch, no second bump.
        retried = await h.coordinator.init_producer_id("tx", TIMEOUT, (r.producer_id, r.producer_epoch))
        assert (retried.error, retried.producer_id, retried.producer_epoch) == (E.none, 1000, 1)
        assert (await h.coordinator.init_producer_id("tx", TIMEOUT, (r.producer_id, 7))).error == E.producer_fenced
        assert (await h.coordinator.init_producer_id("tx", TIMEOUT, (4242, 1))).error == E.producer_fenced
    run(t)


def test_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    async def t(h: Harness) -> None:
        await h.coordinator.init_producer_id("tx", TIMEOUT)
        md(h).producer_epoch = 32766  # Short.MaxValue - 1
        r = await h.coordinator.init_producer_id("tx", TIMEOUT, (1000, 32766))
        assert (r.error, r.producer_id, r.producer_epoch) == (E.none, 1001, 0)
        assert md(h).last_producer_id == 1000
        # A retry with the old id and its exhausted epoch gets the new id again.
        again = await h.coordinator.init_producer_id("tx", TIMEOUT, (1000, 32766))
        assert (again.error, again.producer_id, again.producer_epoch) == (E.none, 1001, 0)
    run(t)


def test_init_producer_id_fences_and_aborts_an_ongoing_transaction() -> None:
    async def t(h: Harness) -> None:
        pid, epoch = await begin(h)
        r = await h.coordinator.init_producer_id("tx", TIMEOUT)
        assert r.error == E.concurrent_transactions
        await h.settle()
        assert h.markers.calls == [("tx", pid, epoch + 1, False, 5, frozenset({TP0}))]
        assert md(h).state is S.COMPLETE_ABORT
        # The old producer is fenced; the retried InitProducerId bumps once more.
        assert await h.coordinator.end_transaction("tx", pid, epoch, commit=True) == E.producer_fenced
        again = await h.coordinator.init_producer_id("tx", TIMEOUT)
        assert (again.error, again.producer_epoch) == (E.none, epoch + 2)
    run(t)


def test_a_failed_fence_is_not_bumped_twice() -> None:
    async def t(h: Harness) -> None:
        _, epoch = await begin(h)
        h.topic.fail_with = E.not_enough_replicas
        assert (await h.coordinator.init_producer_id("tx", TIMEOUT)).error == E.coordinator_not_available
        assert md(h).has_failed_epoch_fence and md(h).pending_state is None
        h.topic.fail_with = None
        assert (await h.coordinator.init_producer_id("tx", TIMEOUT)).error == E.concurrent_transactions
        await h.settle()
        assert h.markers.calls[-1][2] == epoch + 1
        assert md(h).state is S.COMPLETE_ABORT and md(h).producer_epoch == epoch + 1
    run(t)


# ----------------------------------------------------------------------------- AddPartitionsToTxn


def test_add_partitions_checks_the_producer() -> None:
    async def t(h: Harness) -> None:
        assert await h.coordinator.add_partitions("nope", 1, 0, [TP0]) == E.invalid_producer_id_mapping
        r = await h.coordinator.init_producer_id("tx", TIMEOUT)
        assert await h.coordinator.add_partitions("tx", 999, 0, [TP0]) == E.invalid_producer_id_mapping
        assert await h.coordinator.add_partitions("tx", r.producer_id, 3, [TP0]) == E.producer_fenced
        h.clock.now += 10
        assert await h.coordinator.add_partitions("tx", r.producer_id, 0, [TP0]) == E.none
        assert md(h).state is S.ONGOING and md(h).topic_partitions == {TP0}
        assert md(h).txn_start_timestamp == h.clock.now
        writes = len(h.topic.records())
        assert await h.coordinator.add_partitions("tx", r.producer_id, 0, [TP0]) == E.none
        assert len(h.topic.records()) == writes  # already in: nothing written
        assert await h.coordinator.add_partitions("tx", r.producer_id, 0, [TP1]) == E.none
        assert md(h).topic_partitions == {TP0, TP1}
        assert h.topic.records()[-1][1].topic_partitions == frozenset({TP0, TP1})
    run(t)


def test_append_errors_are_mapped_and_clear_the_pending_state() -> None:
    async def t(h: Harness) -> None:
        r = await h.coordinator.init_producer_id("tx", TIMEOUT)
        h.topic.fail_with = E.not_leader_or_follower
        assert await h.coordinator.add_partitions("tx", r.producer_id, 0, [TP0]) == E.not_coordinator
        h.topic.fail_with = E.message_too_large
        assert await h.coordinator.add_partitions("tx", r.producer_id, 0, [TP0]) == E.unknown_server_error
        assert md(h).pending_state is None and md(h).state is S.EMPTY
        h.topic.fail_with = None
        assert await h.coordinator.add_partitions("tx", r.producer_id, 0, [TP0]) == E.none
    run(t)


def test_a_request_during_a_pending_write_gets_concurrent_transactions() -> None:
    async def t(h: Harness) -> None:
        r = await h.coordinator.init_producer_id("tx", TIMEOUT)
        h.topic.hold = True
        adding = asyncio.ensure_future(h.coordinator.add_partitions("tx", r.producer_id, 0, [TP0]))
        await asyncio.sleep(0)
        assert await h.coordinator.add_partitions("tx", r.producer_id, 0, [TP1]) == E.concurrent_transactions
        assert (await h.coordinator.init_producer_id("tx", TIMEOUT)).error == E.concurrent_transactions
        h.topic.release()
        assert await adding == E.none
    run(t)


def test_losing_the_partition_during_a_write_answers_not_coordinator() -> None:
    async def t(h: Harness) -> None:
        r = await h.coordinator.init_producer_id("tx", TIMEOUT)
        h.topic.hold = True
        adding = asyncio.ensure_future(h.coordinator.add_partitions("tx", r.producer_id, 0, [TP0]))
        await asyncio.sleep(0)
        h.coordinator.on_resignation(0)
        h.topic.release()
        assert await adding == E.not_coordinator
    run(t)


# ----------------------------------------------------------------------------- EndTxn


def test_commit_writes_prepare_markers_then_complete() -> None:
    async def t(h: Harness) -> None:
        pid, epoch = await begin(h, partitions=(TP0, TP1))
        h.markers.gate = asyncio.Event()
        h.coordinator.completion_wait_s = 0.01  # markers stuck: an add gives up waiting
        assert await h.coordinator.end_transaction("tx", pid, epoch, commit=True) == E.none
        assert md(h).state is S.PREPARE_COMMIT
        await asyncio.sleep(0)
        # While the markers are out: retries and new work wait, an abort is invalid.
        assert await h.coordinator.end_transaction("tx", pid, epoch, commit=True) == E.concurrent_transactions
        assert await h.coordinator.end_transaction("tx", pid, epoch, commit=False) == E.invalid_txn_state
        assert await h.coordinator.add_partitions("tx", pid, epoch, [TP0]) == E.concurrent_transactions
        assert (await h.coordinator.init_producer_id("tx", TIMEOUT)).error == E.concurrent_transactions
        h.markers.gate.set()
        await h.settle()
        assert h.markers.calls == [("tx", pid, epoch, True, 5, frozenset({TP0, TP1}))]
        assert [v.state for _, v in h.topic.records()][-2:] == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
        assert md(h).state is S.COMPLETE_COMMIT and not md(h).topic_partitions
        assert await h.coordinator.end_transaction("tx", pid, epoch, commit=True) == E.none  # a retry
        assert await h.coordinator.end_transaction("tx", pid, epoch, commit=False) == E.invalid_txn_state
    run(t)


async def held_add(h: Harness) -> tuple[int, int, asyncio.Future[E]]:
    """A committed transaction whose markers are held, and the next transaction's first add,
    sent and held for that completion: (producer id, epoch, the add)."""
    pid, epoch = await begin(h, partitions=(TP0,))
    h.markers.gate = asyncio.Event()
    assert await h.coordinator.end_transaction("tx", pid, epoch, commit=True) == E.none
    await asyncio.sleep(0)
    add = asyncio.ensure_future(h.coordinator.add_partitions("tx", pid, epoch, [TP1]))
    await asyncio.sleep(0.01)
    return pid, epoch, add


def test_the_next_transactions_first_add_waits_for_the_previous_completion() -> None:
    async def t(h: Harness) -> None:
        _, _, add = await held_add(h)
        assert not add.done() and md(h).state is S.PREPARE_COMMIT  # held, not refused
        h.markers.gate.set()
        assert await asyncio.wait_for(add, 5) == E.none
        assert md(h).state is S.ONGOING and md(h).topic_partitions == {TP1}
        assert [v.state for _, v in h.topic.records()][-3:] == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT, S.ONGOING]
    run(t)


def test_an_end_txn_pipelined_behind_a_held_add_is_decided_after_it() -> None:
    """librdkafka aborts right after a produce: its AddPartitionsToTxn (held for the previous
    commit's markers) and EndTxn(abort) arrive back to back on one connection. Kafka decides
    them in that order; deciding the abort first would find PrepareCommit: INVALID_TXN_STATE."""
    async def t(h: Harness) -> None:
        pid, epoch, add = await held_add(h)
        abort = asyncio.ensure_future(h.coordinator.end_transaction("tx", pid, epoch, commit=False))
        await asyncio.sleep(0.01)
        assert not add.done() and not abort.done() and md(h).state is S.PREPARE_COMMIT
        h.markers.gate.set()
        assert await asyncio.wait_for(add, 5) == E.none
        assert await asyncio.wait_for(abort, 5) == E.none
        await h.settle()
        assert md(h).state is S.COMPLETE_ABORT
        assert [v.state for _, v in h.topic.records()][-4:] == [
            S.COMPLETE_COMMIT, S.ONGOING, S.PREPARE_ABORT, S.COMPLETE_ABORT]
        assert h.coordinator._held_adds == {}  # nothing kept once no add is held
    run(t)


def test_end_txn_errors() -> None:
    async def t(h: Harness) -> None:
        assert await h.coordinator.end_transaction("nope", 1, 0, commit=True) == E.invalid_producer_id_mapping
        r = await h.coordinator.init_producer_id("tx", TIMEOUT)
        assert await h.coordinator.end_transaction("tx", r.producer_id, 0, commit=True) == E.invalid_txn_state
        assert await h.coordinator.end_transaction("tx", 77, 0, commit=True) == E.invalid_producer_id_mapping
        assert await h.coordinator.end_transaction("tx", r.producer_id, 1, commit=True) == E.producer_fenced
    run(t)


def test_a_fenced_marker_send_leaves_the_transaction_prepared() -> None:
    async def t(h: Harness) -> None:
        pid, epoch = await begin(h)
        h.markers.result = False
        assert await h.coordinator.end_transaction("tx", pid, epoch, commit=False) == E.none
        await h.settle()
        assert md(h).state is S.PREPARE_ABORT
    run(t)


# ----------------------------------------------------------------------------- loading


def test_loading_replays_the_log_and_resumes_markers() -> None:
    async def main() -> None:
        old = Harness()
        await old.elect(epoch=5)
        pid, epoch = await begin(old)
        await begin(old, "other")
        old.markers.result = False  # the old coordinator dies before its markers are written
        assert await old.coordinator.end_transaction("tx", pid, epoch, commit=True) == E.none
        await old.settle()
        await old.coordinator.shutdown()

        new = Harness(topic=old.topic)
        await new.elect(epoch=6)
        await new.settle()
        assert new.markers.calls == [("tx", pid, epoch, True, 6, frozenset({TP0}))]
        assert new.manager.txns["tx"].state is S.COMPLETE_COMMIT
        assert new.manager.txns["other"].state is S.ONGOING
        assert new.manager.txns["other"].topic_partitions == {TP0}
        await new.coordinator.shutdown()
    asyncio.run(main())


def test_a_new_leader_epoch_reloads_and_resigning_unloads() -> None:
    async def t(h: Harness) -> None:
        await begin(h)
        await h.elect(epoch=9)
        assert h.manager.owned == {0: 9} and md(h).state is S.ONGOING
        h.coordinator.on_resignation(0)
        assert h.manager.owned == {} and "tx" not in h.manager.txns
    run(t)


# ----------------------------------------------------------------------------- timeouts and expiry


def test_timed_out_transactions_are_fenced_and_aborted() -> None:
    async def t(h: Harness) -> None:
        pid, epoch = await begin(h, "old")
        h.clock.now += TIMEOUT - 1
        await begin(h, "young")
        assert await h.coordinator.abort_timed_out_transactions() == []
        h.clock.now += 1
        assert await h.coordinator.abort_timed_out_transactions() == [("old", E.none)]
        await h.settle()
        assert h.markers.calls == [("old", pid, epoch + 1, False, 5, frozenset({TP0}))]
        assert md(h, "old").state is S.COMPLETE_ABORT and md(h, "young").state is S.ONGOING
    run(t)


def test_idle_transactional_ids_expire_with_a_tombstone() -> None:
    async def t(h: Harness) -> None:
        await h.coordinator.init_producer_id("idle", TIMEOUT)
        await begin(h, "busy")
        h.clock.now += h.config.transactional_id_expiration_ms
        assert await h.coordinator.remove_expired_transactional_ids() == ["idle"]
        assert "idle" not in h.manager.txns and "busy" in h.manager.txns
        assert h.topic.records()[-1] == ("idle", None)
        reloaded = Harness(topic=h.topic)
        await reloaded.elect()
        assert set(reloaded.manager.txns) == {"busy"}
    run(t)


# ----------------------------------------------------------------------------- verification


def test_verify_partitions_decisions() -> None:
    async def t(h: Harness) -> None:
        pid, epoch = await begin(h)
        assert h.coordinator.verify_partitions("tx", pid, epoch, [TP0, TP1]) == {TP0: E.none, TP1: E.invalid_txn_state}
        assert h.coordinator.verify_partitions("tx", pid, epoch + 1, [TP0]) == {TP0: E.producer_fenced}
        assert h.coordinator.verify_partitions("tx", pid + 1, epoch, [TP0]) == {TP0: E.invalid_producer_id_mapping}
        assert h.coordinator.verify_partitions("nope", pid, epoch, [TP0]) == {TP0: E.invalid_producer_id_mapping}
        await h.coordinator.end_transaction("tx", pid, epoch, commit=True)
        await h.settle()
        assert h.coordinator.verify_partitions("tx", pid, epoch, [TP0]) == {TP0: E.invalid_txn_state}
        verifier = TxnVerifier(lambda: h.coordinator, 0, None, "INTERNAL")  # type: ignore[arg-type]
        assert await verifier.verify("tx", pid, epoch + 1, [TP0]) == {TP0: E.invalid_producer_epoch}
        h.coordinator.on_election(0, 7)  # reloading: retriable for the producer
        assert await verifier.verify("tx", pid, epoch, [TP0]) == {TP0: E.not_enough_replicas}
    run(t)


def test_produce_error_mapping() -> None:
    assert produce_error_for(E.concurrent_transactions) == E.not_enough_replicas
    assert produce_error_for(E.not_coordinator) == E.not_enough_replicas
    assert produce_error_for(E.producer_fenced) == E.invalid_producer_epoch
    assert produce_error_for(E.invalid_txn_state) == E.invalid_txn_state
    assert produce_error_for(E.none) == E.none


# ----------------------------------------------------------------------------- describe and list


def test_describe_and_list() -> None:
    async def t(h: Harness) -> None:
        pid, _ = await begin(h, "a")
        await h.coordinator.init_producer_id("b", TIMEOUT)
        error, found = h.coordinator.describe("a")
        assert error == E.none and found is not None and found.topic_partitions == {TP0}
        assert h.coordinator.describe("zz") == (E.transactional_id_not_found, None)
        error, listed, unknown = h.coordinator.list_transactions([], [])
        assert (error, [m.transactional_id for m in listed], unknown) == (E.none, ["a", "b"], [])
        _, listed, unknown = h.coordinator.list_transactions(["Ongoing", "Bogus"], [])
        assert [m.transactional_id for m in listed] == ["a"] and unknown == ["Bogus"]
        _, listed, _ = h.coordinator.list_transactions([], [pid + 1])
        assert [m.transactional_id for m in listed] == ["b"]
    run(t, Harness(TxnConfig(num_partitions=1), FakeTxnTopic()))


def test_a_new_leader_epoch_resends_markers_with_it() -> None:
    async def t(h: Harness) -> None:
        pid, epoch = await begin(h)
        h.markers.gate = asyncio.Event()
        assert await h.coordinator.end_transaction("tx", pid, epoch, commit=False) == E.none
        await asyncio.sleep(0)
        first = h.coordinator.completions["tx"]
        await h.elect(epoch=8)
        await asyncio.sleep(0)
        assert first.cancelled()
        h.markers.gate.set()
        await h.settle()
        assert [c[4] for c in h.markers.calls] == [5, 8]
        assert md(h).state is S.COMPLETE_ABORT
    run(t)


class _Leader:
    leader = 1


class _Cache:
    def partition(self, topic: str, partition: int) -> _Leader:
        return _Leader()


class _RecordingConnection:
    """Answers verify-only AddPartitionsToTxn v4: partition 0 of any topic is in the transaction."""

    def __init__(self) -> None:
        self.requests: list[object] = []

    async def send(self, request: object, response_type: type, timeout_s: float = 30.0) -> object:
        from kio.schema.add_partitions_to_txn.v4 import response as r

        from odradek.protocol.messages import build
        self.requests.append(request)
        return build(r.AddPartitionsToTxnResponse, throttle_time=0, error_code=E.none, results_by_transaction=tuple(
            build(r.AddPartitionsToTxnResult, transactional_id=txn.transactional_id, topic_results=tuple(
                build(r.AddPartitionsToTxnTopicResult, name=t.name, results_by_partition=tuple(
                    build(r.AddPartitionsToTxnPartitionResult, partition_index=p,
                          partition_error_code=E.none if p == 0 else E.invalid_txn_state) for p in t.partitions))
                for t in txn.topics))
            for txn in request.transactions))  # type: ignore[attr-defined]


def test_remote_verification_is_batched_per_coordinator() -> None:
    async def main() -> None:
        h = Harness()  # owns nothing: every id's coordinator is broker 1
        conn = _RecordingConnection()

        class Peers(PeerConnections):
            async def get(self, broker_id: int) -> _RecordingConnection:  # type: ignore[override]
                assert broker_id == 1
                return conn

        verifier = TxnVerifier(lambda: h.coordinator, 0, _Cache(), "INTERNAL")  # type: ignore[arg-type]
        verifier.peers = Peers(0, _Cache(), "INTERNAL", "txn-verifier")  # type: ignore[arg-type]
        a, b, c = await asyncio.gather(verifier.verify("x", 1, 0, [TP0]), verifier.verify("x", 1, 0, [TP1]),
                                       verifier.verify("y", 2, 0, [TP0]))
        assert (a, b, c) == ({TP0: E.none}, {TP1: E.invalid_txn_state}, {TP0: E.none})
        (request,) = conn.requests
        sent = {txn.transactional_id: {(t.name, p) for t in txn.topics for p in t.partitions}
                for txn in request.transactions}  # type: ignore[attr-defined]
        assert sent == {"x": {("t", 0), ("t", 1)}, "y": {("t", 0)}}
        assert all(txn.verify_only for txn in request.transactions)  # type: ignore[attr-defined]
    asyncio.run(main())


def test_a_marker_sender_failure_is_retried() -> None:
    async def t(h: Harness) -> None:
        pid, epoch = await begin(h)
        failures = [RuntimeError("boom")]
        send = h.markers.send_markers

        async def flaky(*args: object) -> bool:
            if failures:
                raise failures.pop()
            return await send(*args)  # type: ignore[arg-type]

        h.markers.send_markers = flaky  # type: ignore[method-assign]
        h.coordinator.marker_failure_backoff_s = 0
        assert await h.coordinator.end_transaction("tx", pid, epoch, commit=True) == E.none
        await h.settle()
        assert not failures and md(h).state is S.COMPLETE_COMMIT
    run(t)
