"""The cleaner's retention rules (odradek.log.cleaner.retention) as plain functions."""

from __future__ import annotations

import pytest

from odradek.log.cleaner.record_scanner import ScannedRecords
from odradek.log.cleaner.retention import (
    BatchRetention,
    check_batch_retention,
    records_to_retain,
    should_discard_batch,
)
from odradek.protocol.records import HEADER_SIZE, RecordBatchHeader, encode_batch, parse_header

KEEP, DELETE, RETAIN_EMPTY, FILTER = (BatchRetention.KEEP, BatchRetention.DELETE,
                                      BatchRetention.RETAIN_EMPTY, BatchRetention.FILTER)


def header(*, control: bool = False, records: int = 2) -> RecordBatchHeader:
    attributes = 0x30 if control else 0  # control batches are transactional too
    batch = encode_batch(b"", base_offset=10, last_offset_delta=max(records - 1, 0),
                         records_count=records, attributes=attributes, base_timestamp=0,
                         max_timestamp=0, partition_leader_epoch=0, producer_id=7,
                         producer_epoch=0, base_sequence=0)
    assert len(batch) == HEADER_SIZE
    return parse_header(batch)


@pytest.mark.parametrize(("control", "discardable", "retain_deletes", "discard"), [
    (False, False, False, False),
    (False, True, True, True),  # aborted data goes at once
    (True, True, True, False),  # a finished transaction's marker waits for the horizon
    (True, True, False, True),
    (True, False, False, False),  # its transaction still has data
])
def test_should_discard_batch(control: bool, discardable: bool, retain_deletes: bool,
                              discard: bool) -> None:
    assert should_discard_batch(header(control=control), discardable, retain_deletes) is discard


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
    assert check_batch_retention(header(control=control, records=records), discard, last) \
        is expected


def scanned(keys: list[bytes], offsets: list[int], tombstones: list[int]) -> ScannedRecords:
    return ScannedRecords(keys, offsets, tombstones, [], [], [], [])


def test_records_to_retain_keeps_each_keys_latest() -> None:
    records = scanned([b"a", b"b", b"c", b"a"], [0, 1, 2, 3], [])
    latest = {b"a": 3, b"b": 5, b"c": 2}
    assert records_to_retain(records, latest, retain_deletes=True) == [2, 3]
    # a key the map does not hold (past its end) stays
    assert records_to_retain(scanned([b"z"], [9], []), latest, retain_deletes=True) == [0]


def test_records_to_retain_drops_tombstones_past_the_horizon() -> None:
    records = scanned([b"a", b"b"], [0, 1], [1])
    latest = {b"a": 0, b"b": 1}
    assert records_to_retain(records, latest, retain_deletes=True) == [0, 1]
    assert records_to_retain(records, latest, retain_deletes=False) == [0]
