"""``__consumer_offsets`` as the coordinator sees it: append a batch to a partition this
broker leads, and read a partition's log from its start.  The group metadata manager only
talks to this small interface, so its logic can be tested against a fake."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from odradek.log.log_info import AppendOrigin
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

__all__ = ["OFFSETS_TOPIC", "OffsetsTopic", "ReplicatedOffsetsTopic"]

OFFSETS_TOPIC = "__consumer_offsets"


class OffsetsTopic(Protocol):
    async def append(self, partition: int, batch: bytes, *, wait_for_replication: bool,
                     transactional: bool = False) -> tuple[ErrorCode, int]:
        """Append one record batch as the partition's leader; returns (error, base offset).
        With ``wait_for_replication`` it returns once the ISR has it (acks=-1).
        ``transactional``: the batch is a TxnOffsetCommit's (a producer's transactional
        batch, appended without the producer's sequence checks)."""
        ...

    def read(self, partition: int) -> Iterator[bytes]:
        """The partition's log from its start offset to the log end offset at the call,
        in chunks of whole batches."""
        ...


class ReplicatedOffsetsTopic:
    """The real thing: appends through the replica manager (so acks=-1 waits for the ISR)
    and reads the local log."""

    def __init__(self, replica_manager: ReplicaManager, commit_timeout_ms: int, load_buffer_size: int) -> None:
        self.replica_manager = replica_manager
        self.commit_timeout_ms = commit_timeout_ms
        self.load_buffer_size = load_buffer_size

    async def append(self, partition: int, batch: bytes, *, wait_for_replication: bool,
                     transactional: bool = False) -> tuple[ErrorCode, int]:
        acks = -1 if wait_for_replication else 1
        # Kafka appends everything the coordinator writes with AppendOrigin.Coordinator; here
        # only the transactional batches need it (the log refuses them from clients unverified).
        origin = {"origin": AppendOrigin.COORDINATOR} if transactional else {}
        results, delayed = self.replica_manager.append_records(
            acks, self.commit_timeout_ms, [(OFFSETS_TOPIC, partition, batch)], internal_topics_allowed=True, **origin)
        if delayed is not None:
            results = await delayed.future
        result = next(iter(results.values()))
        return ErrorCode(result.error), result.base_offset

    def read(self, partition: int) -> Iterator[bytes]:
        p = self.replica_manager.get_partition(OFFSETS_TOPIC, partition)
        if p is not None and p.log is not None:
            yield from p.log.read_chunks(self.load_buffer_size)
