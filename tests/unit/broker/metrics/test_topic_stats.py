"""BrokerTopicStats: per-topic counters and Kafka's all-topics meters as their sum, which
keeps what a deleted topic counted (a counter never goes down)."""

from __future__ import annotations

from odradek.broker.metrics.topic_stats import BrokerTopicStats, TopicCounters


def test_totals_sum_every_counter_over_the_topics_and_keep_a_deleted_topics_counts() -> None:
    stats = BrokerTopicStats()
    a, b = stats.topic("a"), stats.topic("b")
    assert stats.topic("a") is a  # one counter object per topic, made on first use
    a.bytes_in, a.messages_in, a.replication_bytes_out = 100, 3, 200
    b.bytes_in, b.bytes_out, b.failed_fetch_requests = 50, 7, 1
    assert stats.totals() == TopicCounters(bytes_in=150, messages_in=3, bytes_out=7, failed_fetch_requests=1,
                                           replication_bytes_out=200)
    stats.remove("a")
    assert list(stats.topics) == ["b"]  # its own meters go, as Kafka's removeMetrics does
    assert stats.totals() == TopicCounters(bytes_in=150, messages_in=3, bytes_out=7, failed_fetch_requests=1,
                                           replication_bytes_out=200)
    # A topic made again under the deleted one's name counts afresh; the totals go on from where they were.
    again = stats.topic("a")
    assert again is not a and again == TopicCounters()
    again.bytes_in = 10
    stats.remove("a")
    stats.remove("never-made")
    assert stats.totals().bytes_in == 160
