"""How many examples a property test draws.  The README's test command (the whole suite) draws
each test's full number; ``pytest -m "not slow"``, the quick unit-level loop, draws a third
(at least ten), so that it stays a loop of a minute.  conftest.py switches the budget when the
run is selected that way, before any test module is imported."""

from __future__ import annotations

__all__ = ["QUICK_SHARE", "examples", "use_quick_budget"]

QUICK_SHARE = 3  # the quick loop draws one example in this many
_quick = False


def use_quick_budget() -> None:
    """From now on :func:`examples` gives the quick loop's share."""
    global _quick
    _quick = True


def examples(full: int) -> int:
    """``full`` in the whole suite, its share in the quick loop."""
    return max(10, full // QUICK_SHARE) if _quick else full
