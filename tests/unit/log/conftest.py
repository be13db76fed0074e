"""Fixtures for the storage-engine tests (helpers live in log_helpers.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from log_helpers import Clock, config

from odradek.config import LogConfig
from odradek.log.log import Log


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def open_log(tmp_path: Path, clock: Clock) -> Callable[..., Log]:
    def factory(cfg: LogConfig | None = None, name: str = "topic-0", **kwargs: object) -> Log:
        topic, _, partition = name.rpartition("-")
        return Log.open(tmp_path / name, cfg or config(), topic=topic, partition=int(partition),
                        time_ms=clock, **kwargs)

    return factory
