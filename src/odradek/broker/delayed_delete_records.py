"""DelayedDeleteRecords: a DeleteRecords waiting for the replicas (Kafka's ``DelayedDeleteRecords``).

The leader moves its own log start offset at once; the request is answered once every
partition's low watermark (the smallest log start offset among the leader and the followers
whose brokers are alive) has reached the requested offset, so that the records are gone from
every live replica when the client hears so.  A partition that stops being led here is
answered with its error; one still short of its offset at the timeout, REQUEST_TIMED_OUT.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Set
from dataclasses import dataclass

from odradek.broker.partition import Partition
from odradek.broker.purgatory import DelayedPartitionsOperation
from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode

__all__ = ["DelayedDeleteRecords", "DeleteRecordsPartitionResult"]


@dataclass(slots=True)
class DeleteRecordsPartitionResult:
    error: ErrorCode
    low_watermark: int = -1
    required_offset: int = -1  # the offset the low watermark must reach (-1 resolved to the high watermark)


class DelayedDeleteRecords(DelayedPartitionsOperation):
    """Wait until every pending partition's low watermark reaches its required offset."""

    def __init__(self, partitions: Mapping[TopicPartition, Partition], timeout_ms: int,
                 results: dict[TopicPartition, DeleteRecordsPartitionResult],
                 alive_brokers: Callable[[], Container[int]],
                 offline: Set[TopicPartition] = frozenset()) -> None:
        super().__init__(timeout_ms)
        self.partitions = partitions
        self.alive_brokers = alive_brokers  # read at each try: the metadata cache replaces its map
        self.offline = offline  # partitions of failed log directories
        self.results = results
        self.pending = {tp for tp, r in results.items() if r.error == ErrorCode.none}

    def try_complete(self) -> bool:
        """Done once every pending partition has reached its offset or failed."""
        alive = self.alive_brokers()
        for tp in list(self.pending):
            result = self.results[tp]
            partition = self.partitions.get(tp)
            if partition is None or not partition.is_leader:
                # Kafka's HostedPartition.Offline / None, or a partition led elsewhere now.
                if tp in self.offline:
                    result.error = ErrorCode.kafka_storage_error
                elif partition is None:
                    result.error = ErrorCode.unknown_topic_or_partition
                else:
                    result.error = ErrorCode.not_leader_or_follower
                result.low_watermark = -1
                self.pending.discard(tp)
                continue
            low = partition.low_watermark(alive)
            if low >= result.required_offset:
                result.low_watermark = low
                self.pending.discard(tp)
        if not self.pending:
            return self.force_complete()
        return False
