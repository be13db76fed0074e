"""The transaction index (``.txnindex``) through real files: Kafka's AbortedTxn layout,
collectAbortedTxns, truncation and the sanity check."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.log.abstract_index import IndexCorruptError
from odradek.log.transaction_index import (
    ABORTED_TXN_SIZE,
    TXN_INDEX_SUFFIX,
    AbortedTxn,
    TransactionIndex,
)


def index_at(tmp_path: Path, start_offset: int = 0) -> TransactionIndex:
    return TransactionIndex(tmp_path / f"{start_offset:020d}{TXN_INDEX_SUFFIX}", start_offset)


def test_entry_bytes_are_kafkas_aborted_txn() -> None:
    txn = AbortedTxn(producer_id=7, first_offset=100, last_offset=150, last_stable_offset=90)
    expected = (b"\x00\x00"                                  # version 0
                + b"\x00\x00\x00\x00\x00\x00\x00\x07"        # producerId
                + b"\x00\x00\x00\x00\x00\x00\x00\x64"        # firstOffset 100
                + b"\x00\x00\x00\x00\x00\x00\x00\x96"        # lastOffset 150
                + b"\x00\x00\x00\x00\x00\x00\x00\x5a")       # lastStableOffset 90
    assert txn.encode() == expected
    assert ABORTED_TXN_SIZE == 34
    assert AbortedTxn.decode(expected) == txn


def test_unknown_entry_version_is_corrupt() -> None:
    data = b"\x00\x01" + bytes(32)
    with pytest.raises(IndexCorruptError, match="version 1"):
        AbortedTxn.decode(data)


def test_round_trip_through_the_file(tmp_path: Path) -> None:
    index = index_at(tmp_path)
    txns = [AbortedTxn(1, 0, 10, 0), AbortedTxn(2, 5, 20, 5), AbortedTxn(1, 21, 30, 11)]
    for txn in txns:
        index.append(txn)
    index.flush()
    assert index.path.name == "00000000000000000000.txnindex"
    assert index.path.read_bytes() == b"".join(t.encode() for t in txns)
    assert index.all_aborted_txns() == txns
    assert index.last_offset == 30
    reopened = index_at(tmp_path)
    assert reopened.all_aborted_txns() == txns
    index.close()  # forgets, then reads the file again
    assert index.all_aborted_txns() == txns


def test_missing_file_is_empty_and_not_created_by_reads(tmp_path: Path) -> None:
    index = index_at(tmp_path, 50)
    assert index.all_aborted_txns() == []
    assert index.collect_aborted_txns(0, 100) == ([], False)
    assert index.last_offset is None
    index.flush()
    index.sanity_check()
    assert not index.path.exists()


def test_append_refuses_last_offsets_going_backwards(tmp_path: Path) -> None:
    index = index_at(tmp_path)
    index.append(AbortedTxn(1, 0, 10, 0))
    for last in (10, 9):
        with pytest.raises(ValueError, match="must increase"):
            index.append(AbortedTxn(2, 0, last, 0))
    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 10, 0)]
    assert index.path.stat().st_size == ABORTED_TXN_SIZE


def test_append_checks_order_against_entries_already_on_disk(tmp_path: Path) -> None:
    index_at(tmp_path).append(AbortedTxn(1, 0, 10, 0))
    with pytest.raises(ValueError, match="must increase"):
        index_at(tmp_path).append(AbortedTxn(2, 3, 8, 0))


# Hand-made entries: (producer, first, last, lso)
HAND = [AbortedTxn(1, 0, 10, 0), AbortedTxn(2, 5, 25, 5), AbortedTxn(3, 30, 40, 26),
        AbortedTxn(4, 35, 60, 41), AbortedTxn(5, 70, 80, 61)]


@pytest.mark.parametrize(("fetch", "upper", "producers", "complete"), [
    (0, 5, [1], True),             # txn 2 starts at 5: not below the bound; lso 5 >= 5 stops
    (0, 6, [1, 2], True),          # txn 2 starts below the bound; txn 3's lso 26 stops
    (11, 30, [2], True),           # txn 1 ended before the fetch offset; txn 3 has lso 26 < 30,
                                   # txn 4 has lso 41 >= 30: stop there
    (26, 36, [3, 4], True),        # txn 4 starts at 35 < 36 and is the stopping entry
    (41, 61, [4], True),           # txn 5's lso 61 >= 61 stops; it starts past the bound
    (61, 100, [5], False),         # nothing records an lso >= 100: look at later segments
    (81, 100, [], False),
    (10, 11, [1, 2], True),        # txn 1 ends at exactly the fetch offset: included
])
def test_collect_aborted_txns(tmp_path: Path, fetch: int, upper: int, producers: list[int],
                              complete: bool) -> None:
    index = index_at(tmp_path)
    for txn in HAND:
        index.append(txn)
    found, is_complete = index.collect_aborted_txns(fetch, upper)
    assert [t.producer_id for t in found] == producers
    assert is_complete is complete


def test_truncate_to_drops_entries_ending_at_or_after_the_offset(tmp_path: Path) -> None:
    index = index_at(tmp_path)
    for txn in HAND:
        index.append(txn)
    index.truncate_to(61)  # txn 4 ends at 60 and stays
    assert index.all_aborted_txns() == HAND[:4]
    index.truncate_to(40)  # txn 3 ends at 40 and goes
    assert index.all_aborted_txns() == HAND[:2]
    assert index.path.stat().st_size == 2 * ABORTED_TXN_SIZE
    assert index_at(tmp_path).all_aborted_txns() == HAND[:2]
    index.append(AbortedTxn(9, 26, 27, 26))  # appending may resume past the new end
    assert index_at(tmp_path).last_offset == 27
    index.truncate_to(0)
    assert index.all_aborted_txns() == [] and index.path.stat().st_size == 0


def test_reset_rename_delete(tmp_path: Path) -> None:
    index = index_at(tmp_path, 100)
    index.append(AbortedTxn(1, 100, 110, 100))
    new_path = tmp_path / "00000000000000000100.txnindex.cleaned"
    index.rename(new_path)
    assert index.path == new_path and new_path.exists()
    assert TransactionIndex(new_path, 100).all_aborted_txns() == [AbortedTxn(1, 100, 110, 100)]
    index.reset()
    assert index.all_aborted_txns() == [] and new_path.stat().st_size == 0
    index.append(AbortedTxn(2, 90, 105, 95))  # after a reset any last offset is accepted
    index.delete()
    assert not new_path.exists()
    assert index.all_aborted_txns() == []
    index.delete()  # deleting twice is harmless


def test_sanity_check_reports_a_torn_file(tmp_path: Path) -> None:
    index = index_at(tmp_path)
    index.append(AbortedTxn(1, 0, 10, 0))
    index.sanity_check()
    with index.path.open("ab") as f:
        f.write(AbortedTxn(2, 11, 20, 11).encode()[:20])
    fresh = index_at(tmp_path)
    with pytest.raises(IndexCorruptError, match="not a multiple of"):
        fresh.sanity_check()
    # Reading ignores the torn tail; the next append overwrites it.
    assert fresh.all_aborted_txns() == [AbortedTxn(1, 0, 10, 0)]
    with pytest.raises(IndexCorruptError):
        fresh.sanity_check()  # loading did not hide it
    fresh.append(AbortedTxn(3, 12, 30, 12))
    fresh.sanity_check()
    assert index_at(tmp_path).all_aborted_txns() == [AbortedTxn(1, 0, 10, 0),
                                                     AbortedTxn(3, 12, 30, 12)]


def test_sanity_check_reports_entries_out_of_order(tmp_path: Path) -> None:
    path = tmp_path / f"0{TXN_INDEX_SUFFIX}"
    path.write_bytes(AbortedTxn(1, 0, 10, 0).encode() + AbortedTxn(2, 0, 10, 0).encode())
    with pytest.raises(IndexCorruptError, match="last-offset order"):
        TransactionIndex(path, 0).sanity_check()


def test_sanity_check_reports_entries_ending_before_the_segment(tmp_path: Path) -> None:
    path = tmp_path / f"100{TXN_INDEX_SUFFIX}"
    path.write_bytes(AbortedTxn(1, 50, 99, 50).encode())
    with pytest.raises(IndexCorruptError, match="start offset 100"):
        TransactionIndex(path, 100).sanity_check()
    # A transaction begun in an earlier segment whose marker is in this one is fine.
    path.write_bytes(AbortedTxn(1, 50, 100, 50).encode())
    TransactionIndex(path, 100).sanity_check()


def test_sanity_check_reports_an_unknown_version(tmp_path: Path) -> None:
    path = tmp_path / f"0{TXN_INDEX_SUFFIX}"
    path.write_bytes(struct.pack(">hqqqq", 1, 1, 0, 10, 0))
    with pytest.raises(IndexCorruptError, match="version"):
        TransactionIndex(path, 0).sanity_check()


@st.composite
def aborted_txn_lists(draw: st.DrawFn) -> list[AbortedTxn]:
    """Entries with strictly increasing last offsets, first <= last."""
    lasts = sorted(draw(st.sets(st.integers(0, 500), max_size=15)))
    return [AbortedTxn(draw(st.integers(0, 2**63 - 1)), draw(st.integers(0, last)), last,
                       draw(st.integers(0, 600))) for last in lasts]


@given(aborted_txn_lists(), st.integers(0, 600), st.integers(0, 600))
def test_append_read_back_and_collect_equal_brute_force(tmp_path_factory: pytest.TempPathFactory,
                                                        txns: list[AbortedTxn], fetch: int,
                                                        upper: int) -> None:
    directory = tmp_path_factory.mktemp("txnindex")
    index = index_at(directory)
    for txn in txns:
        index.append(txn)
    assert index_at(directory).all_aborted_txns() == txns
    index_at(directory).sanity_check()

    # Brute force: scan up to and including the first entry whose lso reaches the bound.
    stop = next((i for i, t in enumerate(txns) if t.last_stable_offset >= upper), None)
    scanned = txns if stop is None else txns[:stop + 1]
    expected = [t for t in scanned if t.last_offset >= fetch and t.first_offset < upper]
    assert index_at(directory).collect_aborted_txns(fetch, upper) == (expected, stop is not None)

    index.truncate_to(fetch)
    assert index_at(directory).all_aborted_txns() == [t for t in txns if t.last_offset < fetch]
