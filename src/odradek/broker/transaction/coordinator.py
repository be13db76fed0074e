"""TransactionCoordinator: the request logic of Kafka 2.8's coordinator of the same name.

InitProducerId (with KIP-360's expected producer id and epoch), AddPartitionsToTxn,
AddOffsetsToTxn (via the same path), EndTxn, KIP-890's verification of partitions, the
abort of timed-out transactions and the expiry of idle transactional ids.  Every change is
a prepared :class:`~odradek.broker.transaction.transaction_state.TxnTransitMetadata`
written to ``__transaction_state`` by the :class:`TransactionStateManager` and applied once
replicated.  After PrepareCommit/PrepareAbort the answer goes out and the markers are
handed to the :class:`MarkerSender`; once all are written, CompleteCommit/CompleteAbort is
written.  No sockets here: the clock, producer ids, log and marker sender are injected.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from odradek import tasks
from odradek.broker.transaction.state_manager import (
    CoordinatorEpochAndMetadata,
    TransactionStateManager,
)
from odradek.broker.transaction.state_topic import TRANSACTION_STATE_TOPIC
from odradek.broker.transaction.transaction_state import (
    NO_PRODUCER_EPOCH,
    IllegalStateError,
    ProducerFencedError,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
)
from odradek.broker.transaction.txn_config import TxnConfig
from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.partition import Partition

log = logging.getLogger(__name__)

__all__ = ["InitProducerIdResult", "MarkerSender", "TransactionCoordinator"]

S = TransactionState
E = ErrorCode
_RETRY_BACKOFF_S = 0.1


class MarkerSender(Protocol):
    async def send_markers(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                           coordinator_epoch: int, partitions: Iterable[TopicPartition]) -> bool:
        """Write the end-transaction marker to every partition (retrying leader changes);
        True once all are written (or their topics are gone), False when the coordinator
        was fenced and must not complete the transaction."""
        ...


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator:
    def __init__(self, config: TxnConfig, manager: TransactionStateManager,
                 next_producer_id: Callable[[], Awaitable[int]], marker_sender: MarkerSender,
                 now_ms: Callable[[], int] | None = None) -> None:
        self.config = config
        self.manager = manager
        self.next_producer_id = next_producer_id
        self.marker_sender = marker_sender
        self.now_ms = now_ms or manager.now_ms
        # transactional id -> the task writing its markers, then its Complete* record
        self.completions: dict[str, asyncio.Task[None]] = {}
        self._loops: list[asyncio.Task[None]] = []
        # FindCoordinator's creation of __transaction_state, while one is under way.
        self.topic_creation: asyncio.Future[object] | None = None
        self.marker_failure_backoff_s = 1.0
        # How long an AddPartitionsToTxn waits for the previous transaction to complete.
        self.completion_wait_s = 1.0
        # The adds so held, per transactional id. Kafka reads one request of a connection at a
        # time, so the EndTxn a client pipelines behind an add is decided after it; a client's
        # EndTxn waits for these first (librdkafka's abort right after a produce would
        # otherwise find the previous transaction's PrepareCommit: INVALID_TXN_STATE).
        self._held_adds: dict[str, set[asyncio.Future[None]]] = {}

    # ------------------------------------------------------------------ life cycle

    async def startup(self, zk: Any) -> None:
        """Use the partition count of an existing ``__transaction_state`` and start the
        timeout and expiry loops."""
        try:
            got = await zk.get_topic_assignment(TRANSACTION_STATE_TOPIC)
        except Exception as e:
            log.warning("Could not read the partition count of %s: %s", TRANSACTION_STATE_TOPIC, e)
            got = None
        if got is not None and got[0].partitions:
            self.manager.num_partitions = len(got[0].partitions)
        self._loops = [
            tasks.start(self._every(self.config.abort_timed_out_interval_ms, self.abort_timed_out_transactions,
                                    "abort timed-out transactions"), "txn-abort-timed-out"),
            tasks.start(self._every(self.config.remove_expired_interval_ms, self.remove_expired_transactional_ids,
                                    "remove expired transactional ids"), "txn-expire-ids"),
        ]

    async def shutdown(self) -> None:
        pending = [*self._loops, *self.completions.values()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self._loops.clear()
        self.completions.clear()
        self.manager.shutdown()

    async def _every(self, interval_ms: int, action: Callable[[], Awaitable[Any]], what: str) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await action()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Failed to %s", what)

    # ------------------------------------------------------------------ leadership of __transaction_state

    def became_leader(self, partitions: list[Partition]) -> None:
        for p in partitions:
            if p.topic == TRANSACTION_STATE_TOPIC:
                self.on_election(p.partition, p.leader_epoch)

    def became_follower(self, partitions: list[Partition]) -> None:
        for p in partitions:
            if p.topic == TRANSACTION_STATE_TOPIC:
                self.on_resignation(p.partition)

    def replicas_stopped(self, stopped: list[tuple[Partition | None, TopicPartition, bool]]) -> None:
        for _, tp, _ in stopped:
            if tp.topic == TRANSACTION_STATE_TOPIC:
                self.on_resignation(tp.partition)

    def on_election(self, partition: int, coordinator_epoch: int) -> None:
        if self.manager.owned.get(partition, coordinator_epoch) != coordinator_epoch:
            # A new leader epoch: the partition is reloaded and its markers resent with it.
            self._cancel_completions(partition)
        self.manager.schedule_load(partition, coordinator_epoch, self._on_loaded)

    def on_resignation(self, partition: int) -> None:
        self.manager.unload(partition)
        self._cancel_completions(partition)

    def _cancel_completions(self, partition: int) -> None:
        for txn_id in [t for t in self.completions if self.manager.partition_for(t) == partition]:
            self.completions.pop(txn_id).cancel()

    def _on_loaded(self, partition: int, coordinator_epoch: int, loaded: list[TransactionMetadata]) -> None:
        """Resume what a previous coordinator left half done: the markers of PrepareCommit
        and PrepareAbort transactions (Kafka's loadTransactionsForTxnTopicPartition)."""
        for md in loaded:
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._start_completion(md, coordinator_epoch)

    # ------------------------------------------------------------------ InitProducerId

    async def init_producer_id(self, transactional_id: str, txn_timeout_ms: int,
                               expected: tuple[int, int] | None = None) -> InitProducerIdResult:
        """InitProducerId for a transactional id (Kafka's handleInitProducerId).
        ``expected`` is KIP-360's (producer id, epoch) when the request carries one."""
        if not transactional_id:
            return InitProducerIdResult(E.invalid_request)
        if not 0 < txn_timeout_ms <= self.config.max_timeout_ms:
            return InitProducerIdResult(E.invalid_transaction_timeout)
        error, found = self.manager.get(transactional_id)
        if error is not None:
            return InitProducerIdResult(error)
        if found is None:
            producer_id = await self.next_producer_id()
            error, found = self.manager.get(transactional_id)
            if error is not None:
                return InitProducerIdResult(error)
            if found is None:
                self.manager.put_if_absent(TransactionMetadata.new(transactional_id, producer_id, NO_PRODUCER_EPOCH,
                                                                   txn_timeout_ms, self.now_ms()))
                error, found = self.manager.get(transactional_id)
                assert found is not None
        md, coordinator_epoch = found.metadata, found.coordinator_epoch

        if md.pending_transition_in_progress:
            return InitProducerIdResult(E.concurrent_transactions)
        if expected is not None and not _is_valid_producer_id(md, expected):
            return InitProducerIdResult(E.producer_fenced)
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return InitProducerIdResult(E.concurrent_transactions)
        if md.state is S.ONGOING:
            # Fence the producer of the open transaction and abort it; the client retries.
            try:
                fence = md.prepare_fence_producer_epoch()
            except IllegalStateError as e:
                log.error("%s", e)
                return InitProducerIdResult(E.invalid_txn_state)
            error = await self._abort_fenced(md, fence.producer_id, fence.producer_epoch)
            return InitProducerIdResult(E.concurrent_transactions if error == E.none else error)
        if md.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            log.error("InitProducerId for %s in unexpected state %s", transactional_id, md.state)
            return InitProducerIdResult(E.concurrent_transactions)

        now = self.now_ms()
        try:
            if md.is_producer_epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                new_id = await self.next_producer_id()
                if md.pending_transition_in_progress:  # something moved while we waited for the id
                    return InitProducerIdResult(E.concurrent_transactions)
                transit = md.prepare_producer_id_rotation(new_id, txn_timeout_ms, now, expected is not None)
            else:
                transit = md.prepare_incr_producer_epoch(txn_timeout_ms, expected[1] if expected else None, now)
        except ProducerFencedError:
            return InitProducerIdResult(E.producer_fenced)
        except IllegalStateError as e:
            log.error("%s", e)
            return InitProducerIdResult(E.concurrent_transactions)
        error = await self.manager.append_transition(md, transit, coordinator_epoch)
        if error != E.none:
            return InitProducerIdResult(error)
        log.info("Initialized transactional id %s with producer id %d and epoch %d on partition %s-%d",
                 transactional_id, transit.producer_id, transit.producer_epoch, TRANSACTION_STATE_TOPIC,
                 self.manager.partition_for(transactional_id))
        return InitProducerIdResult(E.none, transit.producer_id, transit.producer_epoch)

    # ------------------------------------------------------------------ AddPartitionsToTxn

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> ErrorCode:
        """AddPartitionsToTxn / AddOffsetsToTxn (Kafka's handleAddPartitionsToTransaction).

        The first add of a transaction usually arrives while the previous one's markers are
        still being written. Kafka answers CONCURRENT_TRANSACTIONS at once and the client
        retries after a backoff (20 ms in librdkafka and the Java client), a fixed cost per
        transaction. Here the request waits up to ``completion_wait_s`` for that completion
        first, then is decided as Kafka decides it. The client sees the same answers, sooner."""
        wanted = frozenset(partitions)
        error = await self._add_partitions(transactional_id, producer_id, producer_epoch, wanted)
        completion = self.completions.get(transactional_id)
        if error == E.concurrent_transactions and completion is not None:
            held: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._held_adds.setdefault(transactional_id, set()).add(held)
            try:
                await asyncio.wait({completion}, timeout=self.completion_wait_s)
                error = await self._add_partitions(transactional_id, producer_id, producer_epoch, wanted)
            finally:
                held.set_result(None)
                others = self._held_adds[transactional_id]
                others.discard(held)
                if not others:
                    del self._held_adds[transactional_id]
        return error

    async def _add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              wanted: frozenset[TopicPartition]) -> ErrorCode:
        error, found = self._check_producer(transactional_id, producer_id, producer_epoch)
        if found is None:
            return error or E.invalid_producer_id_mapping
        md = found.metadata
        if md.state is S.ONGOING and wanted <= md.topic_partitions:
            return E.none
        try:
            transit = md.prepare_add_partitions(wanted, self.now_ms())
        except IllegalStateError as e:
            log.error("%s", e)
            return E.invalid_txn_state
        return await self.manager.append_transition(md, transit, found.coordinator_epoch)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 verification (AddPartitionsToTxn v4 verify_only): NONE for partitions in
        the ongoing transaction of that producer, INVALID_TXN_STATE for the others, one
        error for all when the transaction cannot be checked (Kafka 3.6's
        handleVerifyPartitionsInTransaction)."""
        wanted = list(partitions)
        error, found = self._check_producer(transactional_id, producer_id, producer_epoch)
        if found is None:
            return dict.fromkeys(wanted, error or E.invalid_producer_id_mapping)
        in_txn = found.metadata.topic_partitions if found.metadata.state is S.ONGOING else set()
        return {tp: E.none if tp in in_txn else E.invalid_txn_state for tp in wanted}

    def _check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int
                        ) -> tuple[ErrorCode | None, CoordinatorEpochAndMetadata | None]:
        """What adding and verifying partitions check first: the id is served here and known,
        the producer id and epoch are its current ones, no change is under way. Returns
        (error, None) or (None, its metadata)."""
        if not transactional_id:
            return E.invalid_request, None
        error, found = self.manager.get(transactional_id)
        if error is not None or found is None:
            return error, None
        md = found.metadata
        if md.producer_id != producer_id:
            return E.invalid_producer_id_mapping, None
        if md.producer_epoch != producer_epoch:
            return E.producer_fenced, None
        if md.pending_transition_in_progress or md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.concurrent_transactions, None
        return None, found

    # ------------------------------------------------------------------ EndTxn

    async def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, *,
                              commit: bool, from_client: bool = True) -> ErrorCode:
        """EndTxn (Kafka's endTransaction); also the abort of a fenced or timed-out
        transaction (``from_client=False``, with the bumped epoch of the pending fence)."""
        held = self._held_adds.get(transactional_id) if from_client else None
        if held:
            await asyncio.wait(set(held))
        if not transactional_id:
            return E.invalid_request
        error, found = self.manager.get(transactional_id)
        if error is not None:
            return error
        if found is None:
            return E.invalid_producer_id_mapping
        md, coordinator_epoch = found.metadata, found.coordinator_epoch
        fencing = md.pending_state is S.PREPARE_EPOCH_FENCE
        if md.producer_id != producer_id:
            return E.invalid_producer_id_mapping
        if (from_client and producer_epoch != md.producer_epoch) or producer_epoch < md.producer_epoch:
            return E.producer_fenced
        if md.pending_transition_in_progress and not fencing:
            return E.concurrent_transactions
        state = md.state
        if state is S.ONGOING:
            if fencing and not commit:
                # The fence continues as PrepareAbort with the bumped epoch.
                md.pending_state = None
                md.producer_epoch = producer_epoch
                md.last_producer_epoch = NO_PRODUCER_EPOCH
            elif fencing:
                return E.concurrent_transactions
            transit = md.prepare_abort_or_commit(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, self.now_ms())
        elif state is S.COMPLETE_COMMIT:
            return E.none if commit else self._invalid(md, commit)
        elif state is S.COMPLETE_ABORT:
            return E.none if not commit else self._invalid(md, commit)
        elif state is S.PREPARE_COMMIT:
            return E.concurrent_transactions if commit else self._invalid(md, commit)
        elif state is S.PREPARE_ABORT:
            return E.concurrent_transactions if not commit else self._invalid(md, commit)
        else:  # Empty (nothing to end), or Dead/PrepareEpochFence (never a resting state)
            return self._invalid(md, commit)
        error = await self.manager.append_transition(md, transit, coordinator_epoch)
        if error != E.none:
            if fencing:
                _, again = self.manager.get(transactional_id)
                if again is not None and again.coordinator_epoch == coordinator_epoch:
                    # The bumped epoch may never have reached the log: the next fence reuses it.
                    again.metadata.has_failed_epoch_fence = True
            return error
        self._start_completion(md, coordinator_epoch)
        return E.none

    async def _abort_fenced(self, md: TransactionMetadata, producer_id: int, fenced_epoch: int) -> ErrorCode:
        """The abort that continues a prepared epoch fence; a fence that could not even be
        started is dropped so it does not block the id."""
        error = await self.end_transaction(md.transactional_id, producer_id, fenced_epoch, commit=False,
                                           from_client=False)
        if md.pending_state is TransactionState.PREPARE_EPOCH_FENCE:
            md.pending_state = None
        return error

    @staticmethod
    def _invalid(md: TransactionMetadata, commit: bool) -> ErrorCode:
        log.info("EndTxn(%s) for transactional id %s in state %s: INVALID_TXN_STATE",
                 "commit" if commit else "abort", md.transactional_id, md.state)
        return E.invalid_txn_state

    # ------------------------------------------------------------------ markers and completion

    def _start_completion(self, md: TransactionMetadata, coordinator_epoch: int) -> None:
        txn_id = md.transactional_id
        previous = self.completions.pop(txn_id, None)
        if previous is not None:
            previous.cancel()
        task = tasks.start(self._complete(md, coordinator_epoch), f"txn-markers-{txn_id}")
        self.completions[txn_id] = task
        task.add_done_callback(lambda t: self.completions.pop(txn_id, None) if self.completions.get(txn_id) is t
                               else None)

    async def _complete(self, md: TransactionMetadata, coordinator_epoch: int) -> None:
        """Write the markers of a PrepareCommit/PrepareAbort transaction, then its
        CompleteCommit/CompleteAbort record (Kafka's TransactionMarkerChannelManager:
        retried while this broker is still the coordinator with that epoch)."""
        commit = md.state is S.PREPARE_COMMIT
        producer_id, epoch = md.producer_id, md.producer_epoch
        partitions = frozenset(md.topic_partitions)
        if partitions:
            while True:
                try:
                    written = await self.marker_sender.send_markers(md.transactional_id, producer_id, epoch, commit,
                                                                    coordinator_epoch, partitions)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception:  # a bug or a surprise: retried, the transaction must not hang in Prepare*
                    log.exception("Sending the markers of transactional id %s failed; retrying", md.transactional_id)
                    await asyncio.sleep(self.marker_failure_backoff_s)
            if not written:
                log.info("Stopped sending markers of transactional id %s: coordinator fenced", md.transactional_id)
                return
        while True:
            error, found = self.manager.get(md.transactional_id)
            if (error is not None or found is None or found.metadata is not md
                    or found.coordinator_epoch != coordinator_epoch
                    or md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
                    or md.producer_epoch != epoch):
                log.info("Not completing transactional id %s: no longer its coordinator with epoch %d "
                         "or the transaction moved on", md.transactional_id, coordinator_epoch)
                return
            if md.pending_transition_in_progress:
                await asyncio.sleep(_RETRY_BACKOFF_S)
                continue
            transit = md.prepare_complete(self.now_ms())
            error = await self.manager.append_transition(md, transit, coordinator_epoch)
            if error == E.none:
                log.debug("Completed transaction of %s: %s", md.transactional_id, md.state)
                return
            if error == E.not_coordinator:
                return
            await asyncio.sleep(_RETRY_BACKOFF_S)

    # ------------------------------------------------------------------ timeouts and expiry

    async def abort_timed_out_transactions(self) -> list[tuple[str, ErrorCode]]:
        """Fence and abort the transactions open longer than their timeout (Kafka's
        abortTimedOutTransactions); returns (id, outcome) for each attempted."""
        outcomes = []
        for txn_id, producer_id, _epoch in self.manager.timed_out_transactions(self.now_ms()):
            error, found = self.manager.get(txn_id)
            if error is not None or found is None:
                continue
            md = found.metadata
            if md.producer_id != producer_id or md.pending_transition_in_progress:
                continue
            try:
                fence = md.prepare_fence_producer_epoch()
            except IllegalStateError as e:
                log.error("Cannot abort timed-out transaction of %s: %s", txn_id, e)
                continue
            log.info("Aborting the transaction of %s (producer id %d): open longer than its timeout of %d ms",
                     txn_id, producer_id, md.txn_timeout_ms)
            outcomes.append((txn_id, await self._abort_fenced(md, fence.producer_id, fence.producer_epoch)))
        return outcomes

    async def remove_expired_transactional_ids(self) -> list[str]:
        """Remove ids idle past transactional.id.expiration.ms: a tombstone each."""
        removed = []
        for md in self.manager.expirable(self.now_ms()):
            error, found = self.manager.get(md.transactional_id)
            if error is not None or found is None or found.metadata is not md:
                continue
            try:
                transit = md.prepare_dead()
            except IllegalStateError:
                continue
            if await self.manager.append_transition(md, transit, found.coordinator_epoch) == E.none:
                log.info("Removed expired transactional id %s", md.transactional_id)
                removed.append(md.transactional_id)
        return removed

    # ------------------------------------------------------------------ describe and list

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        """DescribeTransactions: TRANSACTIONAL_ID_NOT_FOUND for an id unknown here."""
        if not transactional_id:
            return E.transactional_id_not_found, None
        error, found = self.manager.get(transactional_id)
        if error is not None:
            return error, None
        if found is None:
            return E.transactional_id_not_found, None
        return E.none, found.metadata

    def list_transactions(self, states: Iterable[str], producer_ids: Iterable[int]
                          ) -> tuple[ErrorCode, list[TransactionMetadata], list[str]]:
        if self.manager.loading:
            return E.coordinator_load_in_progress, [], []
        found, unknown = self.manager.list_transactions(states, producer_ids)
        return E.none, found, unknown


def _is_valid_producer_id(md: TransactionMetadata, expected: tuple[int, int]) -> bool:
    """KIP-360: a request's producer id and epoch are accepted when the metadata is brand new
    (epoch -1), the id is the current one (the epoch is checked later), or it is the previous
    id with an exhausted epoch (a retry after a rotation whose answer was lost)."""
    producer_id, epoch = expected
    return (md.producer_epoch == NO_PRODUCER_EPOCH or producer_id == md.producer_id
            or (producer_id == md.last_producer_id and is_epoch_exhausted(epoch)))
