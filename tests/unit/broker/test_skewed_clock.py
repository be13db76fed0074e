"""The clock faults' skew (broker/clock_skew.py): read from its file, a step and a rate,
applied to ``common.now_ms`` and nothing else."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.broker.clock_skew import SkewedClock
from odradek.common import monotonic_ms, now_ms, set_clock_skew_ms


@pytest.fixture(autouse=True)
def no_skew_after() -> Iterator[None]:
    yield
    set_clock_skew_ms(0)


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def write(path: Path, **spec: float) -> None:
    path.write_text(json.dumps(spec))


def test_no_file_no_skew_then_a_step(tmp_path: Path) -> None:
    path = tmp_path / "clock.json"
    clock = SkewedClock(path)
    assert clock.tick() == 0
    write(path, offset_ms=-3_600_000)
    assert clock.tick() == -3_600_000
    assert abs(now_ms() - (time.time_ns() // 1_000_000 - 3_600_000)) < 1000
    before = monotonic_ms()
    assert 0 <= monotonic_ms() - before < 1000  # the monotonic clock is not stepped


def test_a_rate_drifts_from_the_moment_the_file_changed(tmp_path: Path) -> None:
    path = tmp_path / "clock.json"
    monotonic = FakeMonotonic()
    clock = SkewedClock(path, monotonic)
    write(path, offset_ms=0, rate=4.0)
    assert clock.tick() == 0
    monotonic.now += 2.0
    assert clock.tick() == 6000  # 2 s at 4x: 6 s ahead
    write(path, offset_ms=0, rate=0.25)
    path.touch()  # a new mtime even within the file system's resolution
    assert clock.tick() == 0  # a changed file starts from the step again
    monotonic.now += 4.0
    assert clock.tick() == -3000


def test_an_unreadable_or_removed_file_is_no_skew(tmp_path: Path) -> None:
    path = tmp_path / "clock.json"
    clock = SkewedClock(path)
    write(path, offset_ms=5000)
    assert clock.tick() == 5000
    path.write_text("{not json")
    assert clock.tick() == 0
    write(path, offset_ms=7000)
    assert clock.tick() == 7000
    path.unlink()
    assert clock.tick() == 0
