"""``__transaction_state`` as the coordinator sees it: append a batch to a partition this
broker leads (acks=-1), and read a partition's log from its start.  The state manager only
talks to this small interface, so its logic can be tested against a fake."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.replica_manager import ReplicaManager

__all__ = ["TRANSACTION_STATE_TOPIC", "ReplicatedTransactionStateTopic", "TransactionStateTopic"]

TRANSACTION_STATE_TOPIC = "__transaction_state"


class TransactionStateTopic(Protocol):
    async def append(self, partition: int, batch: bytes) -> ErrorCode:
        """Append one record batch as the partition's leader; returns once the ISR has it."""
        ...

    def read(self, partition: int) -> Iterator[bytes]:
        """The partition's log from its start offset to its end at the call, in chunks of whole batches."""
        ...


class ReplicatedTransactionStateTopic:
    """Appends through the replica manager (acks=-1) and reads the local log."""

    def __init__(self, replica_manager: ReplicaManager, append_timeout_ms: int, load_buffer_size: int) -> None:
        self.replica_manager = replica_manager
        self.append_timeout_ms = append_timeout_ms
        self.load_buffer_size = load_buffer_size

    async def append(self, partition: int, batch: bytes) -> ErrorCode:
        results, delayed = self.replica_manager.append_records(
            -1, self.append_timeout_ms, [(TRANSACTION_STATE_TOPIC, partition, batch)], internal_topics_allowed=True)
        if delayed is not None:
            results = await delayed.future
        return ErrorCode(next(iter(results.values())).error)

    def read(self, partition: int) -> Iterator[bytes]:
        p = self.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, partition)
        if p is not None and p.log is not None:
            yield from p.log.read_chunks(self.load_buffer_size)
