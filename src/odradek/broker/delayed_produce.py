"""DelayedProduce: an acks=-1 produce waiting for the ISR (Kafka's ``DelayedProduce``)."""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

from odradek.broker.partition import Partition
from odradek.broker.purgatory import DelayedPartitionsOperation
from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode

__all__ = ["NO_TIMESTAMP", "DelayedProduce", "ProducePartitionResult"]

NO_TIMESTAMP = -1


@dataclass(slots=True)
class ProducePartitionResult:
    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = NO_TIMESTAMP
    log_start_offset: int = -1
    message: str | None = None
    required_offset: int = -1  # acks=-1: the high watermark this append waits for
    # (index of a record in its batch, why it was rejected): ProduceResponse v8+ record_errors
    record_errors: tuple[tuple[int, str], ...] = ()


class DelayedProduce(DelayedPartitionsOperation):
    """acks=-1: wait until every appended partition's high watermark passes its batch."""

    def __init__(self, partitions: Mapping[TopicPartition, Partition], timeout_ms: int,
                 results: dict[TopicPartition, ProducePartitionResult],
                 offline: Set[TopicPartition] = frozenset()) -> None:
        super().__init__(timeout_ms)
        self.partitions = partitions
        self.offline = offline  # partitions of failed log directories
        self.results = results
        self.pending = {tp for tp, r in results.items() if r.error == ErrorCode.none and r.required_offset >= 0}

    def try_complete(self) -> bool:
        """Done once every pending partition has reached its offset, or lost leadership."""
        for tp in list(self.pending):
            partition = self.partitions.get(tp)
            if partition is None or not partition.is_leader:
                self.results[tp].error = (ErrorCode.kafka_storage_error if tp in self.offline
                                          else ErrorCode.not_leader_or_follower)
                self.pending.discard(tp)
                continue
            done, enough = partition.enough_replicas_reached(self.results[tp].required_offset)
            if done:
                if not enough:
                    self.results[tp].error = ErrorCode.not_enough_replicas_after_append
                self.pending.discard(tp)
        if not self.pending:
            return self.force_complete()
        return False
