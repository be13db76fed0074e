"""DelayedFetch: a fetch waiting for ``min_bytes`` (Kafka's ``DelayedFetch``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from odradek.broker.partition import Partition
from odradek.broker.purgatory import DelayedOperation
from odradek.common import TopicPartition
from odradek.log.log_info import FileRegion
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = ["READ_COMMITTED", "DelayedFetch", "FetchPartitionRequest", "FetchPartitionResult"]

READ_COMMITTED = 1  # Fetch and ListOffsets isolation_level (Kafka's IsolationLevel.READ_COMMITTED)


@dataclass(slots=True)
class FetchPartitionResult:
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    regions: tuple[FileRegion, ...] = ()
    last_stable_offset: int = -1
    # read_committed reads that returned data: (producer id, first offset) of the aborted
    # transactions the consumer must skip; None otherwise (null in the response)
    aborted_transactions: tuple[tuple[int, int], ...] | None = None
    # KIP-392: the replica the consumer should fetch from instead (no records then); -1: none
    preferred_read_replica: int = -1
    # KIP-595: (epoch, end offset) where the follower's log diverged from this leader's (no
    # records then); None: it did not
    diverging_epoch: tuple[int, int] | None = None

    @property
    def size(self) -> int:
        return sum(r.size for r in self.regions)


@dataclass(frozen=True, slots=True)
class FetchPartitionRequest:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1  # v12: the epoch of the fetcher's last batch
    log_start_offset: int = -1  # v5+: the fetcher's (a follower's, for DeleteRecords' low watermark)


class DelayedFetch(DelayedOperation):
    """Wait until ``min_bytes`` are available (or leadership changes, or the timeout); then
    answer with ``read()``, the fetch read again from the local logs."""

    def __init__(self, partitions: Mapping[TopicPartition, Partition], timeout_ms: int, replica_id: int,
                 min_bytes: int, requests: list[FetchPartitionRequest],
                 read: Callable[[], dict[TopicPartition, FetchPartitionResult]], isolation_level: int = 0,
                 fetch_only_from_leader: bool = True, held_back: Callable[[Partition], bool] | None = None) -> None:
        super().__init__(timeout_ms)
        self.partitions = partitions
        self.replica_id = replica_id
        self.min_bytes = min_bytes
        self.requests = requests
        self._read = read
        # A follower's throttled partitions (replication throttles): bytes there do not count.
        self._held_back = held_back
        self.read_committed = isolation_level == READ_COMMITTED and replica_id < 0
        # KIP-392: a consumer's fetch (v11+) may be served by a follower, up to its high watermark.
        self.fetch_only_from_leader = fetch_only_from_leader
        self._epochs = {(r.topic, r.partition): self._epoch(r) for r in requests}

    def _epoch(self, r: FetchPartitionRequest) -> tuple[int | None, int]:
        p = self.partitions.get(TopicPartition(r.topic, r.partition))
        return (p.leader_id, p.leader_epoch) if p is not None else (None, -1)

    def try_complete(self) -> bool:
        """Kafka's DelayedFetch cases: leadership moved, the offset is out of range, or
        enough bytes are readable."""
        available = 0
        for r in self.requests:
            if self._epoch(r) != self._epochs[(r.topic, r.partition)]:
                return self.force_complete()
            p = self.partitions.get(TopicPartition(r.topic, r.partition))
            if p is None or p.log is None:
                return self.force_complete()
            if not p.is_leader:
                if self.fetch_only_from_leader:
                    return self.force_complete()
                if p.high_watermark < r.fetch_offset <= p.log.log_end_offset:
                    continue  # a follower whose high watermark has yet to reach what the leader's did

            # Kafka's DelayedFetch: followers up to the log end offset, read_committed consumers
            # up to the last stable offset (so a marker or a high watermark moving it completes
            # them), other consumers up to the high watermark.
            if self.replica_id >= 0:
                bound = p.log.log_end_offset
            elif self.read_committed:
                bound = p.log.last_stable_offset
            else:
                bound = p.high_watermark
            if bound < r.fetch_offset or r.fetch_offset < p.log.log_start_offset:
                return self.force_complete()  # truncated or out of range: answer with the error now
            if bound > r.fetch_offset:
                if self._held_back is not None and self._held_back(p):
                    continue
                if self.min_bytes <= 1:
                    return self.force_complete()  # a whole batch is at least a byte
                try:
                    available += p.log.read(r.fetch_offset, r.max_bytes, bound, True).size
                except KafkaError:
                    return self.force_complete()
                if available >= self.min_bytes:
                    return self.force_complete()
        return False

    def on_complete(self) -> None:
        """Answer with what the logs hold now."""
        self.future.set_result(self._read())
