"""Kafka's ``BrokerTopicStats``, sans-IO: per-topic counts that the produce, fetch and
replication paths add to as plain ints (no locks, no label lookups; one dict lookup per topic
per request), exported with their sum over all topics at scrape time.  Kafka's all-topics
meters (``allTopicsStats``) are counted beside the topics' and outlive a deleted topic, so
the sum keeps what deleted topics counted: the totals never go down (a Prometheus counter
that drops reads as a reset, and ``rate()`` over it as a spike)."""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["BrokerTopicStats", "TopicCounters"]


@dataclass(slots=True)
class TopicCounters:
    """One topic's meters (Kafka's ``BrokerTopicMetrics``; each is a ``...PerSec`` meter's count)."""

    bytes_in: int = 0  # BytesInPerSec: record bytes appended as leader
    messages_in: int = 0  # MessagesInPerSec
    bytes_out: int = 0  # BytesOutPerSec: record bytes sent to consumers
    bytes_rejected: int = 0  # BytesRejectedPerSec: record bytes of refused appends
    failed_produce_requests: int = 0  # FailedProduceRequestsPerSec (per partition, as Kafka counts)
    failed_fetch_requests: int = 0  # FailedFetchRequestsPerSec
    total_produce_requests: int = 0  # TotalProduceRequestsPerSec
    replication_bytes_in: int = 0  # ReplicationBytesInPerSec: fetched as a follower
    replication_bytes_out: int = 0  # ReplicationBytesOutPerSec: sent to followers


COUNTER_NAMES = tuple(f.name for f in fields(TopicCounters))


class BrokerTopicStats:
    """Counters per topic; :meth:`topic` makes a topic's on first use."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}
        self._deleted = TopicCounters()  # what the topics deleted so far had counted

    def topic(self, name: str) -> TopicCounters:
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = TopicCounters()
        return counters

    def remove(self, name: str) -> None:
        """A deleted topic's meters go (Kafka's removeMetrics); the totals keep its counts."""
        counters = self.topics.pop(name, None)
        if counters is not None:
            _add(self._deleted, counters)

    def totals(self) -> TopicCounters:
        """Kafka's all-topics meters: the sum over the topics, deleted ones included."""
        total = TopicCounters()
        _add(total, self._deleted)
        for counters in self.topics.values():
            _add(total, counters)
        return total


def _add(into: TopicCounters, counters: TopicCounters) -> None:
    for name in COUNTER_NAMES:
        setattr(into, name, getattr(into, name) + getattr(counters, name))
