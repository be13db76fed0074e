"""What the exactly-once fault runs count (odradek.spark.fault_runs.OutputCount): each input id
against the output's rows, without brokers (the runs themselves are in
test_spark_exactly_once_faults.py and test_spark_cluster.py)."""

from __future__ import annotations

from odradek.spark.fault_pipeline import input_value, output_value
from odradek.spark.fault_runs import OutputCount


def test_each_id_once_is_exactly_once():
    count = OutputCount.of(3, [output_value(2), output_value(0), output_value(1)])
    assert count == OutputCount(3, 3, duplicates=0, missing=0, unexpected=0)
    assert count.exactly_once


def test_extra_copies_missing_ids_and_strangers_are_told_apart():
    values = [output_value(0)] * 3 + [output_value(2), b"ROW-7", input_value(1)]
    count = OutputCount.of(4, values)
    # ids 0 (two extra copies) and 2 read; 1 only untransformed and 3 never; ROW-7 is no input id
    assert count == OutputCount(4, 6, duplicates=2, missing=2, unexpected=2)
    assert not count.exactly_once


def test_a_batch_writes_ids_are_counted_untransformed():
    values = [input_value(i) for i in range(5)] + [input_value(4)]
    assert OutputCount.of(5, values, transformed=False) == OutputCount(5, 6, duplicates=1, missing=0, unexpected=0)
