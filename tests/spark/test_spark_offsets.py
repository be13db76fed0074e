"""Offset JSON, range planning, splitting and admission control (pure, no Spark)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.spark.offsets import (
    DataLossError,
    OffsetRange,
    TopicPartition,
    cap_offsets,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
    split_ranges,
)

A0, A1, A2 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("a", 2)


def test_offsets_json_is_sparks_kafka_format_in_canonical_order():
    offsets = {TopicPartition("b", 10): 7, TopicPartition("b", 2): 5, A0: 3}
    data = offsets_to_json(offsets)
    assert json.dumps(data) == '{"a": {"0": 3}, "b": {"2": 5, "10": 7}}'
    assert offsets_from_json(json.loads(json.dumps(data))) == offsets


@pytest.mark.parametrize(
    "bad", [[], {"a": [1]}, {"a": {"x": 1}}, {"a": {"0": -1}}, {"a": {"0": "5"}}]
)
def test_offsets_from_json_rejects_malformed_checkpoints(bad):
    with pytest.raises(ValueError, match="odradek offset"):
        offsets_from_json(bad)


def test_rate_limit_splits_in_proportion_to_backlog():
    start = {A0: 0, A1: 0, A2: 100}
    latest = {A0: 300, A1: 100, A2: 100}
    end = rate_limit(start, latest, 40)
    assert end == {A0: 30, A1: 10, A2: 100}


def test_rate_limit_grants_every_backlogged_partition_at_least_one():
    start = {A0: 0, A1: 0}
    latest = {A0: 10_000, A1: 1}
    assert rate_limit(start, latest, 10) == {A0: 9, A1: 1}


def test_rate_limit_reads_everything_when_under_the_limit():
    start = {A0: 5}
    latest = {A0: 9, A1: 3}  # A1 is new: it starts at 0
    assert rate_limit(start, latest, 100) == latest


def test_rate_limit_new_partitions_start_at_zero():
    end = rate_limit({A0: 100}, {A0: 200, A1: 100}, 50)
    assert end == {A0: 125, A1: 25}


@given(
    sizes=st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=6),
    limit=st.integers(1, 2000),
)
def test_rate_limit_invariants(sizes, limit):
    start = {TopicPartition("t", i): s for i, (s, _) in enumerate(sizes)}
    latest = {TopicPartition("t", i): s + n for i, (s, n) in enumerate(sizes)}
    end = rate_limit(start, latest, limit)
    assert set(end) == set(latest)
    admitted = sum(end[tp] - start[tp] for tp in end)
    assert admitted == min(limit, sum(n for _, n in sizes))
    for tp in end:
        assert start[tp] <= end[tp] <= latest[tp]
    if limit >= len([n for _, n in sizes if n]):
        assert all(end[tp] > start[tp] for tp in end if latest[tp] > start[tp])


def test_cap_offsets_never_passes_the_target():
    assert cap_offsets({A0: 50, A1: 10, A2: 7}, {A0: 40, A1: 20}) == {A0: 40, A1: 10}


def test_plan_ranges_plain():
    ranges, losses = plan_ranges({A0: 5, A1: 0}, {A0: 9, A1: 0}, {}, fail_on_data_loss=True)
    assert ranges == [OffsetRange("a", 0, 5, 9)]
    assert losses == []


def test_plan_ranges_new_partition_reads_from_zero():
    ranges, _ = plan_ranges({A0: 5}, {A0: 5, A1: 3}, {A1: 0}, fail_on_data_loss=True)
    assert ranges == [OffsetRange("a", 1, 0, 3)]


@pytest.mark.parametrize(
    ("start", "end", "earliest", "kept", "fragment"),
    [
        (
            {A0: 5},
            {A0: 20},
            {A0: 12},
            [OffsetRange("a", 0, 12, 20)],
            "offsets 5..11 of partition a-0",
        ),
        ({A0: 5}, {A0: 20}, {A0: 30}, [], "earliest available offset is 30"),
        ({A0: 5, A1: 2}, {A0: 6}, {}, [OffsetRange("a", 0, 5, 6)], "partition a-1 is gone"),
        ({A0: 9}, {A0: 4}, {}, [], "moved back from offset 9 to 4"),
        (
            {A0: 0},
            {A0: 10, A1: 10},
            {A1: 4},
            [OffsetRange("a", 0, 0, 10), OffsetRange("a", 1, 4, 10)],
            "offsets 0..3 of partition a-1",
        ),
    ],
)
def test_plan_ranges_data_loss(start, end, earliest, kept, fragment):
    with pytest.raises(DataLossError, match="failOnDataLoss") as caught:
        plan_ranges(start, end, earliest, fail_on_data_loss=True)
    assert fragment in str(caught.value)
    ranges, losses = plan_ranges(start, end, earliest, fail_on_data_loss=False)
    assert ranges == kept
    assert len(losses) == 1 and fragment in losses[0]


def test_split_ranges_caps_records_per_piece():
    pieces = split_ranges([OffsetRange("a", 0, 10, 35)], min_partitions=None, max_records=10)
    assert [(p.start, p.end) for p in pieces] == [(10, 18), (18, 26), (26, 35)]


def test_split_ranges_min_partitions_in_proportion():
    ranges = [OffsetRange("a", 0, 0, 300), OffsetRange("a", 1, 0, 100), OffsetRange("a", 2, 5, 5)]
    pieces = split_ranges(ranges, min_partitions=4, max_records=10**6)
    assert [(p.partition, p.start, p.end) for p in pieces] == [
        (0, 0, 100),
        (0, 100, 200),
        (0, 200, 300),
        (1, 0, 100),
    ]


def test_split_ranges_min_partitions_below_range_count_does_nothing():
    ranges = [OffsetRange("a", 0, 0, 300), OffsetRange("a", 1, 0, 100)]
    assert split_ranges(ranges, min_partitions=2, max_records=10**6) == ranges


@given(
    bounds=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 5000)), min_size=1, max_size=5),
    min_partitions=st.none() | st.integers(1, 20),
    max_records=st.integers(1, 3000),
)
def test_split_ranges_covers_every_offset_exactly_once(bounds, min_partitions, max_records):
    ranges = [OffsetRange("t", i, s, s + n) for i, (s, n) in enumerate(bounds)]
    pieces = split_ranges(ranges, min_partitions=min_partitions, max_records=max_records)
    covered = sorted((p.partition, o) for p in pieces for o in range(p.start, p.end))
    expected = sorted((r.partition, o) for r in ranges for o in range(r.start, r.end))
    assert covered == expected
    assert all(0 < p.size <= max_records for p in pieces)
