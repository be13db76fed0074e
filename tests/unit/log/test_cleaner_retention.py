"""The cleaner's retention rules (odradek.log.cleaner.retention) as plain functions."""

from __future__ import annotations

import pytest

from odradek.log.cleaner.retention import (
    BatchRetention,
    check_batch_retention,
    records_to_retain,
    should_discard_batch,
)

KEEP, DELETE, RETAIN_EMPTY, FILTER = (BatchRetention.KEEP, BatchRetention.DELETE,
                                      BatchRetention.RETAIN_EMPTY, BatchRetention.FILTER)


@pytest.mark.parametrize(("control", "discardable", "retain_deletes", "discard"), [
    (False, False, False, False),
    (False, True, True, True),  # aborted data goes at once
    (True, True, True, False),  # a finished transaction's marker waits for the horizon
    (True, True, False, True),
    (True, False, False, False),  # its transaction still has data
])
def test_should_discard_batch(control: bool, discardable: bool, retain_deletes: bool,
                              discard: bool) -> None:
    assert should_discard_batch(control, discardable, retain_deletes) is discard


@pytest.mark.parametrize(("control", "records", "discard", "last", "expected"), [
    (False, 2, False, False, FILTER),  # the records decide
    (False, 2, False, True, FILTER),
    (False, 0, False, False, DELETE),  # empty and not needed
    (False, 0, False, True, KEEP),  # empty, its producer's last: as it is
    (False, 2, True, False, DELETE),  # aborted
    (False, 2, True, True, RETAIN_EMPTY),  # aborted, its producer's last: emptied
    (True, 1, False, False, KEEP),  # a marker kept keeps its record
    (True, 0, False, False, KEEP),
    (True, 1, True, False, DELETE),
    (True, 1, True, True, RETAIN_EMPTY),  # the current epoch's marker of a producer without data
    (True, 0, True, True, KEEP),
])
def test_check_batch_retention(control: bool, records: int, discard: bool, last: bool,
                               expected: BatchRetention) -> None:
    assert check_batch_retention(control, records, discard, last) is expected


def test_records_to_retain_keeps_each_keys_latest() -> None:
    latest = {b"a": 3, b"b": 5, b"c": 2}
    keys, offsets = [b"a", b"b", b"c", b"a"], [0, 1, 2, 3]
    assert records_to_retain(keys, offsets, [], latest, retain_deletes=True) == [2, 3]
    # a key the map does not hold (past its end) stays
    assert records_to_retain([b"z"], [9], [], latest, retain_deletes=True) == [0]


def test_records_to_retain_drops_tombstones_past_the_horizon() -> None:
    latest = {b"a": 0, b"b": 1}
    assert records_to_retain([b"a", b"b"], [0, 1], [1], latest, retain_deletes=True) == [0, 1]
    assert records_to_retain([b"a", b"b"], [0, 1], [1], latest, retain_deletes=False) == [0]
