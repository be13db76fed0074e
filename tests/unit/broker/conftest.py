"""Fixtures for the broker tests; helpers live beside them (control_helpers.py, fake_broker.py),
importable from the test directories below this one too."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from fake_broker import FakeBroker, WithBroker, run_with_broker

R = TypeVar("R")


@pytest.fixture
def with_broker(tmp_path: Path) -> WithBroker:
    """``with_broker(body, **options)`` runs ``body(broker)`` in a fresh event loop against a
    :class:`FakeBroker` whose logs live in ``tmp_path`` (``options`` are FakeBroker's)."""
    def run(body: Callable[[FakeBroker], Awaitable[R]], **options: Any) -> R:
        return run_with_broker(tmp_path / "logs", body, **options)
    return run
