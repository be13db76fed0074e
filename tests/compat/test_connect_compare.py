"""The Connect suite's check of a copy against its source (compat/suites/connect.py's
``compare``), without a cluster: loss, strangers, disorder, and re-sent runs (replays)."""

from __future__ import annotations

from compat.suites.connect import compare

SOURCE = [f"l{i}" for i in range(10)]


def test_an_exact_copy_has_no_problem_and_no_replay() -> None:
    found = compare(SOURCE, list(SOURCE))
    assert found.problems() == [] and found.replays == [] and found.duplicates == 0


def test_a_replay_from_a_committed_position_is_one_run_of_duplicates() -> None:
    # Sent up to l6, killed, resumed from the commit at l4: l4..l6 twice, then on.
    copy = SOURCE[:7] + SOURCE[4:]
    found = compare(SOURCE, copy)
    assert found.problems() == []
    assert found.replays == [(4, 3)] and found.duplicates == 3


def test_two_replays_are_counted_apart() -> None:
    copy = SOURCE[:5] + SOURCE[3:5] + SOURCE[5:8] + SOURCE[1:8] + SOURCE[8:]
    found = compare(SOURCE, copy)
    assert found.problems() == []
    assert found.replays == [(3, 2), (1, 7)] and found.duplicates == 9


def test_loss_strangers_and_disorder_are_problems() -> None:
    copy = ["l0", "l2", "l1", "l3", "bogus", "l5", "l6", "l7", "l8"]
    found = compare(SOURCE, copy)
    assert found.lost == ["l4", "l9"]
    assert found.unknown == ["bogus"]
    assert found.out_of_order == ["l2", "l5"]
    assert len(found.problems()) == 3
    # l1 came after l2 had been copied: a one-line "replay" of a line never copied before.
    assert found.replays == [(1, 1)]
