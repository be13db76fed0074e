"""The sans-IO parts of ``odradek transactions``: kafka-transactions.sh's table format and rows,
and the choice of the producer whose transaction ``abort --start-offset`` aborts."""

from __future__ import annotations

import pytest

from odradek.admin.transactions import (
    DESCRIBE_PRODUCERS_HEADERS,
    DESCRIBE_TRANSACTIONS_HEADERS,
    LIST_TRANSACTIONS_HEADERS,
    AbortTransactionSpec,
    ProducerStateRow,
    TransactionDescription,
    TransactionListing,
    TransactionsCommandError,
    abort_spec_for_start_offset,
    describe_producers_rows,
    describe_transaction_row,
    list_transactions_rows,
    pretty_print_table,
)


def test_table_pads_each_column_to_its_widest_cell_and_ends_cells_with_a_tab() -> None:
    lines = pretty_print_table(("A", "Long"), [("xyz", "1"), ("q", "22")])
    assert lines == ["A  \tLong\t", "xyz\t1   \t", "q  \t22  \t"]


def test_table_without_rows_is_the_header_line() -> None:
    assert pretty_print_table(LIST_TRANSACTIONS_HEADERS, []) == [
        "TransactionalId\tCoordinator\tProducerId\tTransactionState\t"]


def test_list_rows() -> None:
    rows = list_transactions_rows([TransactionListing("app-1", 2, 4000, "Ongoing")])
    assert rows == [("app-1", "2", "4000", "Ongoing")]
    assert len(rows[0]) == len(LIST_TRANSACTIONS_HEADERS)


def test_describe_row_with_and_without_a_transaction_in_progress() -> None:
    ongoing = TransactionDescription(1, "app", 7, 3, "Ongoing", 60000, 1_000, (("t", 0), ("t", 2), ("u", 1)))
    row = describe_transaction_row(ongoing, now_ms=4_500)
    assert row == ("1", "app", "7", "3", "Ongoing", "60000", "1000", "3500", "t-0,t-2,u-1")
    assert len(row) == len(DESCRIBE_TRANSACTIONS_HEADERS)
    empty = TransactionDescription(1, "app", 7, 3, "CompleteCommit", 60000, None, ())
    assert describe_transaction_row(empty, now_ms=4_500)[6:] == ("None", "None", "")


def test_describe_producers_rows() -> None:
    rows = describe_producers_rows([ProducerStateRow(5, 0, -1, 9, 123, None), ProducerStateRow(6, 2, 4, 0, 456, 17)])
    assert rows == [("5", "0", "-1", "9", "123", "None"), ("6", "2", "4", "0", "456", "17")]
    assert all(len(r) == len(DESCRIBE_PRODUCERS_HEADERS) for r in rows)


PRODUCERS = [ProducerStateRow(5, 0, 3, 9, 123, None), ProducerStateRow(6, 2, 4, 0, 456, 17),
             ProducerStateRow(8, 1, -1, 2, 789, 40)]


def test_abort_spec_takes_the_producer_whose_transaction_starts_at_the_offset() -> None:
    assert abort_spec_for_start_offset("t", 1, 17, PRODUCERS) == AbortTransactionSpec("t", 1, 6, 2, 4)


def test_abort_spec_uses_coordinator_epoch_0_when_the_producer_has_none() -> None:
    assert abort_spec_for_start_offset("t", 1, 40, PRODUCERS).coordinator_epoch == 0


def test_abort_spec_without_an_open_transaction_at_the_offset_is_refused() -> None:
    with pytest.raises(TransactionsCommandError,
                       match="Could not find any open transactions starting at offset 18 on partition t-1"):
        abort_spec_for_start_offset("t", 1, 18, PRODUCERS)


def test_abort_spec_text_is_kafkas() -> None:
    assert str(AbortTransactionSpec("t", 1, 6, 2, 4)) == (
        "AbortTransactionSpec(topicPartition=t-1, producerId=6, producerEpoch=2, coordinatorEpoch=4)")
