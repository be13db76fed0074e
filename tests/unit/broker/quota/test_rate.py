"""Kafka's Rate over a SampledStat (broker/quota/rate.py), on a hand-driven clock."""

from __future__ import annotations

import pytest

from odradek.broker.quota.rate import SampledRate


def test_a_first_burst_is_spread_over_the_minimum_span() -> None:
    rate = SampledRate(11, 1000, now_ms=0)
    rate.record(10_000, 0)
    # Ten whole windows assumed: 10,000 bytes at once measure 1,000 per second.
    assert rate.span_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(1000)
    assert rate.measure(500) == pytest.approx(10_000 / 10.5)


def test_steady_traffic_measures_its_rate() -> None:
    rate = SampledRate(11, 1000, now_ms=0)
    for t in range(0, 30_000, 100):
        rate.record(50, t)  # 500 per second
    assert rate.measure(29_999) == pytest.approx(500, rel=0.01)


def test_samples_older_than_the_whole_window_count_nothing() -> None:
    rate = SampledRate(3, 1000, now_ms=0)
    rate.record(900, 0)
    assert rate.measure(100) == pytest.approx(900 / 2.1)
    assert rate.measure(3000) == 0
    rate.record(300, 3000)
    assert rate.measure(3000) == pytest.approx(300 / 2.0)


def test_a_new_window_starts_at_the_first_value_after_the_last_one_ended() -> None:
    rate = SampledRate(3, 1000, now_ms=0)
    rate.record(100, 0)
    rate.record(100, 1500)  # the second sample starts at 1500, not 1000
    rate.record(100, 2400)  # still the second sample
    assert rate.measure(2400) == pytest.approx(300 / 2.4)
    rate.record(100, 2600)  # a third sample
    rate.record(100, 3700)  # the first sample (started at 0) is reused: the oldest now starts at 1500
    assert rate.measure(3700) == pytest.approx(400 / 2.2)  # the first 100 went with its sample


def test_a_negative_value_takes_back_a_recorded_one() -> None:
    rate = SampledRate(11, 1000, now_ms=0)
    rate.record(5000, 10)
    rate.record(-5000, 20)
    assert rate.measure(30) == 0


def test_nonsense_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        SampledRate(0, 1000, 0)
    with pytest.raises(ValueError):
        SampledRate(11, 0, 0)
