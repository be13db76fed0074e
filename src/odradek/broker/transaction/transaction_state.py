"""Kafka's TransactionState and TransactionMetadata (kafka.coordinator.transaction, 2.8).

A transactional id moves through eight states.  The valid moves are one table,
:data:`VALID_PREVIOUS_STATES` (for each state, the states it may be entered from).  Every change
is two-phase, as in Kafka: a ``prepare_*`` method checks the move against the table, records it
as the *pending state* and returns an immutable :class:`TxnTransitMetadata`; the coordinator
writes that to ``__transaction_state`` and, once the write is replicated, applies it with
:meth:`TransactionMetadata.complete_transition`.  While a move is pending a second ``prepare_*``
is refused with :class:`PendingTransitionError` (the coordinator answers
CONCURRENT_TRANSACTIONS).  An invalid move raises :class:`IllegalStateError` naming both states
and changes nothing.

Sans-IO: no clock, no log, no locks.  Used by the transaction coordinator (InitProducerId,
AddPartitionsToTxn, EndTxn, marker completion and transactional id expiration) and by the
``__transaction_state`` loader (:mod:`odradek.broker.transaction.transaction_log`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from odradek.broker.group.hashing import partition_for_group
from odradek.common import TopicPartition

__all__ = [
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "VALID_PREVIOUS_STATES",
    "IllegalStateError",
    "PendingTransitionError",
    "ProducerFencedError",
    "TransactionMetadata",
    "TransactionState",
    "TxnTransitMetadata",
    "coordinator_partition",
    "is_epoch_exhausted",
    "is_valid_transition",
]

# RecordBatch.NO_PRODUCER_ID / NO_PRODUCER_EPOCH
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
_SHORT_MAX = 0x7FFF


class TransactionState(Enum):
    """The states with the byte Kafka writes as ``TransactionStatus`` in ``__transaction_state``."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7  # bumping the epoch to fence an older producer (never written)

    def __str__(self) -> str:
        return "".join(word.capitalize() for word in self.name.split("_"))

    @property
    def is_expiration_allowed(self) -> bool:
        """Whether an idle transactional id in this state may expire (Kafka's isExpirationAllowed)."""
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


_S = TransactionState

VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalStateError(Exception):
    """A transition the state machine does not allow; the metadata is left unchanged."""


class PendingTransitionError(IllegalStateError):
    """A transition was prepared while another is still pending (CONCURRENT_TRANSACTIONS)."""


class ProducerFencedError(Exception):
    """InitProducerId named an epoch that is neither the current nor the last one (PRODUCER_FENCED)."""


def is_valid_transition(old: TransactionState, new: TransactionState) -> bool:
    return old in VALID_PREVIOUS_STATES[new]


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Kafka keeps ``Short.MaxValue`` back so the coordinator can always fence a producer:
    from ``Short.MaxValue - 1`` on, the producer needs a new producer id (KIP-360)."""
    return producer_epoch >= _SHORT_MAX - 1


def coordinator_partition(transactional_id: str, num_partitions: int) -> int:
    """The ``__transaction_state`` partition of a transactional id (Kafka's
    ``Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount``): the rule that
    places a group in ``__consumer_offsets``."""
    return partition_for_group(transactional_id, num_partitions)


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The target of a prepared transition: what is written to the log, then applied."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


@dataclass(slots=True)
class TransactionMetadata:
    """One transactional id as the coordinator caches it (mutated only by
    :meth:`complete_transition`, and by ``pending_state``/``has_failed_epoch_fence``)."""

    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    # The state a prepared transition is heading to; blocks a second prepare until completed.
    pending_state: TransactionState | None = None
    # A fence whose bumped epoch may not have reached the log: fence again without bumping.
    has_failed_epoch_fence: bool = False

    @classmethod
    def new(cls, transactional_id: str, producer_id: int, producer_epoch: int, txn_timeout_ms: int,
            timestamp: int) -> TransactionMetadata:
        """A fresh transactional id in Empty (Kafka's ``TransactionMetadata.apply``)."""
        return cls(transactional_id, producer_id, NO_PRODUCER_ID, producer_epoch, NO_PRODUCER_EPOCH,
                   txn_timeout_ms, _S.EMPTY, set(), timestamp, timestamp)

    # ------------------------------------------------------------------ queries

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (_S.ONGOING, _S.PREPARE_ABORT, _S.PREPARE_COMMIT)

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current metadata as a transit, without preparing anything."""
        return TxnTransitMetadata(self.producer_id, self.last_producer_id, self.producer_epoch,
                                  self.last_producer_epoch, self.txn_timeout_ms, self.state,
                                  frozenset(self.topic_partitions), self.txn_start_timestamp,
                                  self.txn_last_update_timestamp)

    # ------------------------------------------------------------------ prepare

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch to fence the producer of an ongoing transaction, which is then aborted.
        After a failed fence the epoch is not bumped again (it was never handed out)."""
        if self.producer_epoch == _SHORT_MAX:
            raise IllegalStateError("cannot fence a producer whose epoch is Short.MaxValue: it would overflow")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare_transition_to(_S.PREPARE_EPOCH_FENCE, self.producer_id, epoch, NO_PRODUCER_EPOCH,
                                           self.txn_timeout_ms, frozenset(self.topic_partitions),
                                           self.txn_start_timestamp, self.txn_last_update_timestamp)

    def prepare_incr_producer_epoch(self, new_txn_timeout_ms: int, expected_producer_epoch: int | None,
                                    update_timestamp: int) -> TxnTransitMetadata:
        """InitProducerId on an existing producer id: to Empty with the epoch bumped (KIP-360).

        Without an expected epoch the epoch is bumped and the last epoch cleared.  With one that
        matches the current epoch (or no epoch yet) it is bumped and the current epoch kept as
        the last; one that matches the last epoch is a retry and gets the current epoch again;
        any other is fenced (:class:`ProducerFencedError`).  Raises :class:`IllegalStateError`
        when the epochs are exhausted: the caller must rotate to a new producer id instead.
        """
        if self.is_producer_epoch_exhausted:
            raise IllegalStateError(f"cannot allocate any more producer epochs for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            raise ProducerFencedError(
                f"expected producer epoch {expected_producer_epoch} matches neither the current epoch "
                f"{self.producer_epoch} nor the last epoch {self.last_producer_epoch}")
        return self._prepare_transition_to(_S.EMPTY, self.producer_id, epoch, last_epoch, new_txn_timeout_ms,
                                           frozenset(), -1, update_timestamp)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_txn_timeout_ms: int, update_timestamp: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        """A new producer id at epoch 0 (first use, or epochs exhausted); keeps the old epoch as
        the last one when ``record_last_epoch`` so a retried InitProducerId is recognised."""
        if self.has_pending_transaction:
            raise IllegalStateError(f"cannot rotate producer ids while a transaction is {self.state}")
        last_epoch = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare_transition_to(_S.EMPTY, new_producer_id, 0, last_epoch, new_txn_timeout_ms,
                                           frozenset(), -1, update_timestamp)

    def prepare_add_partitions(self, added: Iterable[TopicPartition], update_timestamp: int) -> TxnTransitMetadata:
        """AddPartitionsToTxn: to Ongoing with the partitions added; the first add starts the transaction."""
        starting = self.state in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT)
        start = update_timestamp if starting else self.txn_start_timestamp
        return self._prepare_transition_to(_S.ONGOING, self.producer_id, self.producer_epoch,
                                           self.last_producer_epoch, self.txn_timeout_ms,
                                           frozenset(self.topic_partitions).union(added), start, update_timestamp)

    def prepare_abort_or_commit(self, new_state: TransactionState, update_timestamp: int) -> TxnTransitMetadata:
        """EndTxn: to PrepareCommit or PrepareAbort."""
        if new_state not in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            raise ValueError(f"{new_state} is neither PrepareCommit nor PrepareAbort")
        return self._prepare_transition_to(new_state, self.producer_id, self.producer_epoch,
                                           self.last_producer_epoch, self.txn_timeout_ms,
                                           frozenset(self.topic_partitions), self.txn_start_timestamp,
                                           update_timestamp)

    def prepare_complete(self, update_timestamp: int) -> TxnTransitMetadata:
        """All markers written: CompleteCommit after PrepareCommit, otherwise CompleteAbort."""
        new_state = _S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        transit = self._prepare_transition_to(new_state, self.producer_id, self.producer_epoch,
                                              self.last_producer_epoch, self.txn_timeout_ms, frozenset(),
                                              self.txn_start_timestamp, update_timestamp)
        # The markers reached the log, so any failed fence before them is settled.
        self.has_failed_epoch_fence = False
        return transit

    def prepare_dead(self) -> TxnTransitMetadata:
        """Expiration: the transactional id is about to be removed (a tombstone is written)."""
        return self._prepare_transition_to(_S.DEAD, self.producer_id, self.producer_epoch,
                                           self.last_producer_epoch, self.txn_timeout_ms, frozenset(),
                                           self.txn_start_timestamp, self.txn_last_update_timestamp)

    def _prepare_transition_to(self, new_state: TransactionState, new_producer_id: int, new_epoch: int,
                               new_last_epoch: int, new_txn_timeout_ms: int,
                               new_partitions: frozenset[TopicPartition], new_txn_start_timestamp: int,
                               update_timestamp: int) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise PendingTransitionError(
                f"transactional id {self.transactional_id}: cannot prepare a transition to {new_state} "
                f"while a transition to {self.pending_state} is pending")
        if new_producer_id < 0:
            raise ValueError(f"illegal new producer id {new_producer_id}")
        if new_epoch < 0:
            raise ValueError(f"illegal new producer epoch {new_epoch}")
        self._check_transition(new_state)
        # The transit's last producer id is the current one, as Kafka records it.
        transit = TxnTransitMetadata(new_producer_id, self.producer_id, new_epoch, new_last_epoch,
                                     new_txn_timeout_ms, new_state, new_partitions, new_txn_start_timestamp,
                                     update_timestamp)
        self.pending_state = new_state
        return transit

    def _check_transition(self, new_state: TransactionState) -> None:
        if not is_valid_transition(self.state, new_state):
            raise IllegalStateError(
                f"transactional id {self.transactional_id}: invalid transition from {self.state} to "
                f"{new_state}; {new_state} may only follow "
                f"{sorted(str(s) for s in VALID_PREVIOUS_STATES[new_state])}")

    # ------------------------------------------------------------------ complete

    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """Apply a prepared transition once its record is in the log.

        The transit must target the pending state, be a valid move from the current state, and
        keep Kafka's invariants: the same producer id and epoch (a bumped epoch, or epoch 0 of a
        new producer id, only on the way to Empty), an unchanged timeout except on the way to
        Empty, partitions only ever added while Ongoing.  PrepareEpochFence and Dead are never
        completed: the fence continues as PrepareAbort, and a Dead id is removed from the cache.
        Otherwise :class:`IllegalStateError` is raised and nothing changes.
        """
        to_state = self.pending_state
        if to_state is None:
            raise IllegalStateError(
                f"transactional id {self.transactional_id}: completing a transition to {transit.state} "
                f"from {self.state} without a pending state")
        if transit.state is not to_state:
            raise IllegalStateError(
                f"transactional id {self.transactional_id}: completing a transition to {transit.state} "
                f"while the pending state is {to_state}")
        self._check_transition(to_state)
        if to_state is _S.DEAD:
            raise IllegalStateError(
                f"transactional id {self.transactional_id}: a transition from {self.state} to Dead is never "
                "completed; the expired transactional id is removed from the cache instead")
        if to_state is _S.PREPARE_EPOCH_FENCE:
            raise IllegalStateError(
                f"transactional id {self.transactional_id}: a transition from {self.state} to "
                "PrepareEpochFence is never completed; the fence continues as PrepareAbort")
        if not self._transit_is_consistent(transit):
            raise IllegalStateError(
                f"transactional id {self.transactional_id}: transition from {self.state} to {to_state} "
                f"refused, unexpected metadata {transit} for {self}")

        if to_state is _S.EMPTY:
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
        elif to_state is _S.ONGOING:
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions |= transit.topic_partitions
        elif to_state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions.clear()
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.state = to_state

    def _transit_is_consistent(self, t: TxnTransitMetadata) -> bool:
        same_producer = t.producer_id == self.producer_id and t.producer_epoch == self.producer_epoch
        if t.state is _S.EMPTY:  # from InitProducerId
            bumped = (t.producer_epoch == self.producer_epoch + 1
                      or (t.producer_epoch == 0 and t.producer_id != self.producer_id))
            return ((t.producer_epoch == self.producer_epoch or bumped)
                    and not t.topic_partitions and t.txn_start_timestamp == -1)
        if t.state is _S.ONGOING:  # from AddPartitionsToTxn
            return (same_producer and self.topic_partitions <= t.topic_partitions
                    and t.txn_timeout_ms == self.txn_timeout_ms)
        if t.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):  # from EndTxn
            return (same_producer and self.topic_partitions == t.topic_partitions
                    and t.txn_timeout_ms == self.txn_timeout_ms
                    and t.txn_start_timestamp == self.txn_start_timestamp)
        # CompleteCommit / CompleteAbort, from the markers being written
        return same_producer and t.txn_timeout_ms == self.txn_timeout_ms and t.txn_start_timestamp != -1
