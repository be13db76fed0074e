"""One case's verdict: run on both sides, compared, and judged against the documented
differences; the outcome is kept for the run's summary."""

from __future__ import annotations

from collections import Counter

from oracle.case import CaseRun, compare
from oracle.known import unexplained
from oracle.side import Side

__all__ = ["OUTCOMES", "check"]

# "equal" or "documented" per case run, for the summary at the end of the test run.
OUTCOMES: Counter[str] = Counter()
_SHOWN = 4000  # characters of each side's answer in a failure message


def check(run: CaseRun, kafka: Side, odradek: Side) -> None:
    """Fail unless both sides answer alike, but for the differences oracle/known.py lists for
    this case, each of which must show."""
    differences, trees = compare(run, kafka, odradek)
    left, vanished = unexplained(run, differences)
    problems = []
    if left:
        problems.append("differences that oracle/known.py does not document:\n"
                        + "\n".join(f"  {d}" for d in left))
    if vanished:
        problems.append("documented differences that no longer show (remove them from oracle/known.py and "
                        "docs/COMPATIBILITY.md): " + ", ".join(sorted({k.id for k in vanished})))
    assert not problems, "\n".join(problems) + "".join(
        f"\n{name}: {str(tree)[:_SHOWN]}" for name, tree in trees.items())
    OUTCOMES["documented" if differences else "equal"] += 1
