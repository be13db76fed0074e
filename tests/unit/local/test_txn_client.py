"""txn_client.within: a client call given a deadline (librdkafka's send_offsets_to_transaction
can wait without one)."""

from __future__ import annotations

import threading
import time

import pytest

from odradek.local.txn_client import Wedged, within


def test_a_call_that_returns_gives_its_result() -> None:
    assert within(5, lambda: 6 * 7, "answer") == 42


def test_a_call_that_raises_raises_on_the_callers_thread() -> None:
    def refuse() -> None:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        within(5, refuse, "refuse")


def test_a_call_that_never_returns_is_wedged_after_its_deadline() -> None:
    release = threading.Event()
    started = time.monotonic()
    try:
        with pytest.raises(Wedged, match=r"^send_offsets_to_transaction did not return within 0 s$"):
            within(0.2, release.wait, "send_offsets_to_transaction")
        assert 0.2 <= time.monotonic() - started < 5
        assert any(t.name == "within:send_offsets_to_transaction" and t.daemon for t in threading.enumerate())
    finally:
        release.set()
