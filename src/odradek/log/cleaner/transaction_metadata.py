"""The transactions a cleaning walks through: which of their batches and markers may go."""

from __future__ import annotations

from collections.abc import Sequence

from odradek.log.transaction_index import AbortedTxn
from odradek.protocol.control_records import ControlRecordType
from odradek.protocol.records import RecordBatchHeader

__all__ = ["CleanedTransactionMetadata"]


class _AbortedTxnState:
    """Kafka's ``AbortedTransactionMetadata``: an aborted transaction the walk is inside."""

    __slots__ = ("last_observed_batch_offset", "txn")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.last_observed_batch_offset = -1  # -1: none of its batches met in this pass


class CleanedTransactionMetadata:
    """Kafka's ``CleanedTransactionMetadata``: the transactions a walk over the log in offset
    order is inside, and whether each batch or marker it meets may be discarded.

    An aborted transaction becomes ongoing for its producer when the walk reaches its first
    offset, and ends at the producer's ABORT marker; a producer's transactional batch met
    outside an aborted transaction opens a committed one, ended by its COMMIT marker.
    """

    __slots__ = ("_aborted", "_next", "_ongoing_aborted", "_ongoing_committed")

    def __init__(self, aborted_txns: Sequence[AbortedTxn] | set[AbortedTxn]) -> None:
        self._aborted = sorted(set(aborted_txns), key=lambda t: (t.first_offset, t.last_offset))
        self._next = 0
        self._ongoing_aborted: dict[int, _AbortedTxnState] = {}
        self._ongoing_committed: set[int] = set()

    def _consume_up_to(self, offset: int) -> None:
        """Kafka's ``consumeAbortedTxnsUpTo``: start the aborted transactions beginning at or
        before ``offset``."""
        aborted = self._aborted
        i = self._next
        while i < len(aborted) and aborted[i].first_offset <= offset:
            txn = aborted[i]
            if txn.producer_id not in self._ongoing_aborted:
                self._ongoing_aborted[txn.producer_id] = _AbortedTxnState(txn)
            i += 1
        self._next = i

    def on_batch_read(self, header: RecordBatchHeader) -> bool:
        """Kafka's ``onBatchRead`` for a data batch: True when it belongs to an aborted
        transaction (it may be discarded). The walk may skip non-transactional batches:
        they change nothing."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        state = self._ongoing_aborted.get(header.producer_id)
        if state is None:
            self._ongoing_committed.add(header.producer_id)
            return False
        state.last_observed_batch_offset = header.last_offset
        return True

    def on_control_batch_read(self, header: RecordBatchHeader,
                              marker: ControlRecordType | None
                              ) -> tuple[bool, AbortedTxn | None]:
        """Kafka's ``onControlBatchRead``: ``(may be discarded, the AbortedTxn to write to the
        cleaned .txnindex)``. ``marker`` is the type of the batch's first control record,
        None for an empty control batch (a cleaning emptied it: discardable). An ABORT
        marker stays while its transaction still had a batch in this pass, a COMMIT marker
        while its transaction did; other control records stay."""
        self._consume_up_to(header.last_offset)
        if marker is None:
            return True, None
        pid = header.producer_id
        if marker is ControlRecordType.ABORT:
            state = self._ongoing_aborted.pop(pid, None)
            if state is not None and state.last_observed_batch_offset >= 0:
                return False, state.txn
            return True, None
        if marker is ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False, None
            return True, None
        return False, None
