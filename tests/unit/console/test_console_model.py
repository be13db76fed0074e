"""The console's sans-IO model: placement cells from metadata (dead brokers kept as columns),
under-replicated and offline partitions, lag history, sparklines and messages-in rates."""

from __future__ import annotations

from odradek.console.model import (
    BrokerInfo,
    ClusterSnapshot,
    LagHistory,
    MessagesInRates,
    PartitionInfo,
    ReplicaState,
    messages_in_totals,
    placement_rows,
    sparkline_svg,
)

LIVE = [BrokerInfo(0, "h0", 9092, "r1"), BrokerInfo(2, "h2", 9092, "r3")]
KNOWN = {1: BrokerInfo(1, "h1", 9092, "r2")}


def snapshot(*partitions: PartitionInfo) -> ClusterSnapshot:
    return ClusterSnapshot.of(LIVE, 0, partitions, KNOWN)


def test_a_broker_named_by_replicas_but_absent_from_metadata_is_a_dead_column_with_what_was_known() -> None:
    s = snapshot(PartitionInfo("t", 0, 0, (1, 0, 2), (0, 2)))
    assert list(s.brokers) == [0, 1, 2]
    assert s.brokers[1] == BrokerInfo(1, "h1", 9092, "r2", alive=False)
    unknown = ClusterSnapshot.of(LIVE, 0, [PartitionInfo("t", 0, 0, (7, 0), (0,))])
    assert unknown.brokers[7].alive is False and unknown.brokers[7].rack is None


def test_cells_say_leader_follower_out_of_isr_and_offline_and_mark_the_first_replica() -> None:
    s = ClusterSnapshot.of([*LIVE, BrokerInfo(3, "h3", 9092, None)], 0, [
        PartitionInfo("t", 0, 2, (1, 2, 0, 3), (2, 0)),
        PartitionInfo("t", 1, 0, (0, 2), (0, 2), offline_replicas=(2,)),
        PartitionInfo("u", 0, 0, (0,), (0,))], KNOWN)
    rows = placement_rows(s, "t")
    assert [r.partition.partition for r in rows] == [0, 1]
    first = {b: (c.state, c.preferred) for b, c in rows[0].cells.items()}
    assert first == {1: (ReplicaState.OFFLINE, True), 2: (ReplicaState.LEADER, False),
                     0: (ReplicaState.FOLLOWER, False), 3: (ReplicaState.OUT_OF_ISR, False)}
    assert rows[1].cells[2].state is ReplicaState.OFFLINE  # a failed log directory
    assert len(placement_rows(s, None)) == 3


def test_under_replicated_and_offline_partitions() -> None:
    s = snapshot(PartitionInfo("t", 0, 0, (0, 1), (0,)), PartitionInfo("t", 1, -1, (1,), (1,)),
                 PartitionInfo("t", 2, 2, (2, 0), (2, 0)))
    assert [p.partition for p in s.under_replicated()] == [0]
    assert [p.partition for p in s.offline()] == [1]


def test_lag_history_keeps_the_last_samples_per_partition() -> None:
    history = LagHistory(size=3)
    for i, lag in enumerate([50, 40, 30, 0]):
        history.record("g", {("t", 0): lag, ("t", 1): 7}, float(i))
    assert history.of("g", "t", 0) == [(1.0, 40), (2.0, 30), (3.0, 0)]
    assert [v for _, v in history.of("g", "t", 1)] == [7, 7, 7]
    assert history.of("other", "t", 0) == []


def test_sparkline_falls_where_the_values_fall() -> None:
    assert sparkline_svg([5]) == ""
    svg = sparkline_svg([10, 5, 0], width=100, height=22)
    points = [tuple(map(float, p.split(","))) for p in svg.split('points="')[1].split('"')[0].split()]
    assert [x for x, _ in points] == [0.0, 50.0, 100.0]
    ys = [y for _, y in points]
    assert ys[0] < ys[1] < ys[2]  # SVG's y grows downwards: the line falls


EXPOSITION = """# HELP kafka_server_brokertopicmetrics_messagesin_total MessagesInPerSec
# TYPE kafka_server_brokertopicmetrics_messagesin_total counter
kafka_server_brokertopicmetrics_messagesin_total{topic="a"} 120.0
kafka_server_brokertopicmetrics_messagesin_total{topic="b"} 3.0
kafka_server_brokertopicmetrics_messagesin_total 123.0
# HELP kafka_server_brokertopicmetrics_bytesin_total BytesInPerSec
# TYPE kafka_server_brokertopicmetrics_bytesin_total counter
kafka_server_brokertopicmetrics_bytesin_total{topic="a"} 9999.0
"""


def test_messages_in_totals_read_the_per_topic_counter_only() -> None:
    assert messages_in_totals(EXPOSITION) == {"a": 120.0, "b": 3.0}


def test_rates_come_from_two_samples_and_a_restarted_broker_counts_from_zero() -> None:
    rates = MessagesInRates()
    assert rates.update(10.0, {"b0": {"a": 100.0}, "b1": {"a": 50.0}}) == {}
    assert rates.update(12.0, {"b0": {"a": 140.0}, "b1": {"a": 70.0}}) == {"a": 30.0}
    assert rates.update(14.0, {"b0": {"a": 160.0}, "b1": {"a": 4.0}}) == {"a": 12.0}  # b1 restarted: 4 new
