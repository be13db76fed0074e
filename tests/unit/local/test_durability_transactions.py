"""How the transactional durability run judges transactions against what a read_committed
consumer sees: aborted records never, every transaction all or nothing."""

from __future__ import annotations

from odradek.local.durability import transaction_verdict

TXN_OF = {"c1": 0, "c2": 0, "a1": 1, "a2": 1, "u1": 2, "u2": 2, "u3": 2}
OUTCOME = {0: "committed", 1: "aborted", 2: "unknown"}


def test_a_clean_log_has_no_verdict() -> None:
    assert transaction_verdict(TXN_OF, OUTCOME, {"c1", "c2", "u1", "u2", "u3"}, {"c1"}) == ([], [])
    assert transaction_verdict(TXN_OF, OUTCOME, {"c1", "c2"}, set()) == ([], [])  # unknown: none visible


def test_aborted_records_visible_at_the_end_or_during_the_run() -> None:
    aborted, partial = transaction_verdict(TXN_OF, OUTCOME, {"c1", "c2", "a1", "a2"}, {"a2"})
    assert aborted == ["a1", "a2", "a2 (read during the run)"]
    assert partial == []


def test_a_partly_visible_transaction_whatever_its_outcome() -> None:
    aborted, partial = transaction_verdict(TXN_OF, OUTCOME, {"c1", "u1", "u3"}, set())
    assert aborted == []
    assert partial == ["transaction 0 (committed): 1 of 2 records visible",
                       "transaction 2 (unknown): 2 of 3 records visible"]
