"""The consumer-lag view: committed offsets of the groups coordinated here against the
partitions' end offsets, exposed under kafka_exporter's names."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from odradek.broker.group.group import GroupMetadata, OffsetAndMetadata
from odradek.broker.metrics.consumer_lag import GroupOffset, LagRow, committed_offsets, lag_rows
from odradek.broker.metrics.kafka_metrics import consumer_lag_families


def commit(offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, -1, "", 0)


def test_lag_is_end_offset_minus_committed_and_unknown_ends_are_left_out() -> None:
    g1 = GroupMetadata("g1", offsets={("t", 0): commit(10), ("t", 1): commit(5)})
    g2 = GroupMetadata("g2", offsets={("u", 0): commit(7)})
    offsets = committed_offsets([g1, g2])
    assert sorted(offsets, key=lambda o: (o.group, o.topic, o.partition)) == [
        GroupOffset("g1", "t", 0, 10), GroupOffset("g1", "t", 1, 5), GroupOffset("g2", "u", 0, 7)]
    rows = lag_rows(offsets, {("t", 0): 30, ("t", 1): 5})
    assert {(r.group, r.topic, r.partition): r.lag for r in rows} == {("g1", "t", 0): 20, ("g1", "t", 1): 0}
    # A commit past the end (the log was truncated) is no negative lag.
    assert LagRow("g", "t", 0, 12, 10).lag == 0


def test_exposed_as_kafka_exporter_names_them() -> None:
    class Rows:
        def collect(self):
            return consumer_lag_families([LagRow("g", "t", 0, 10, 30), LagRow("g", "t", 1, 4, 5)])

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Rows())  # type: ignore[arg-type]
    lines = set(generate_latest(registry).decode().splitlines())
    assert 'kafka_consumergroup_current_offset{consumergroup="g",partition="0",topic="t"} 10.0' in lines
    assert 'kafka_consumergroup_lag{consumergroup="g",partition="0",topic="t"} 20.0' in lines
    assert 'kafka_consumergroup_lag{consumergroup="g",partition="1",topic="t"} 1.0' in lines
    assert 'kafka_consumergroup_lag_sum{consumergroup="g",topic="t"} 21.0' in lines
