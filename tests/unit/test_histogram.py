"""Histogram: Yammer's percentiles over the last RESERVOIR_SIZE samples, with count and sum of all."""

from __future__ import annotations

from odradek.histogram import QUANTILES, RESERVOIR_SIZE, Histogram


def test_percentiles_interpolate_as_yammers_snapshot() -> None:
    h = Histogram()
    for value in range(1, 101):
        h.update(value)
    got = dict(h.quantiles())
    assert got["0.50"] == 50.5  # the 50.5th of 100 samples
    assert abs(got["0.99"] - 99.99) < 1e-9
    assert got["0.999"] == 100  # past the last sample
    assert (h.count, h.sum) == (100, 5050)


def test_an_empty_histogram_reports_zeros() -> None:
    assert Histogram().quantiles() == [(label, 0.0) for label, _q in QUANTILES]


def test_only_the_latest_samples_make_the_percentiles_but_all_are_counted() -> None:
    h = Histogram()
    for value in range(2 * RESERVOIR_SIZE):
        h.update(value)
    got = dict(h.quantiles())
    # The ring holds RESERVOIR_SIZE..2*RESERVOIR_SIZE-1: its median, not the whole stream's.
    assert got["0.50"] == RESERVOIR_SIZE + (RESERVOIR_SIZE - 1) / 2
    assert h.count == 2 * RESERVOIR_SIZE
    assert h.sum == sum(range(2 * RESERVOIR_SIZE))


def test_a_batch_is_recorded_as_its_samples_one_by_one() -> None:
    one_by_one, batched = Histogram(), Histogram()
    # Batches that fill the ring part way, wrap it, and outrun it.
    for size in (300, 900, 1, 700, 3 * RESERVOIR_SIZE + 17, 250):
        values = [float(one_by_one.count + i) for i in range(size)]
        for value in values:
            one_by_one.update(value)
        batched.extend(values)
        assert (batched.count, batched.sum) == (one_by_one.count, one_by_one.sum)
        assert sorted(batched._samples) == sorted(one_by_one._samples)
        assert batched.quantiles() == one_by_one.quantiles()
    batched.extend([])
    assert batched.count == one_by_one.count
