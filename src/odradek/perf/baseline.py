"""Before and after in one benchmark run (issue 24's ``--baseline REF``): brokers of an earlier
commit, run from a temporary ``git worktree`` of it with this interpreter, beside the current
code's brokers; rounds alternate between the two, and each figure is reported as the median
over the rounds and as an after/before ratio.

Running both in one invocation, interleaved, is what makes the ratio mean something on a
shared machine: the load of other users changes over minutes, and it then falls on both sides
alike."""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from odradek.local.cluster import BrokerProcess, LocalCluster
from odradek.perf.common import PerfError

__all__ = ["BaselineCluster", "Checkout", "checkout", "in_turn", "median_figures", "ratio"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Checkout:
    ref: str
    commit: str
    src: Path  # put first on PYTHONPATH to run this commit's odradek


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise PerfError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


@contextlib.contextmanager
def checkout(repo: Path, ref: str) -> Iterator[Checkout]:
    """A detached worktree of ``ref`` (a commit of ``repo``) in a temporary directory, removed
    when the block ends; checked to be what ``python -m odradek`` imports with its ``src`` on
    PYTHONPATH."""
    commit = _git(repo, "rev-parse", "--verify", f"{ref}^{{commit}}")
    parent = Path(tempfile.mkdtemp(prefix="odradek-baseline-"))
    tree = parent / "tree"
    try:
        _git(repo, "worktree", "add", "--detach", "--quiet", str(tree), commit)
        try:
            found = Checkout(ref, commit[:12], tree / "src")
            imported = subprocess.run([sys.executable, "-c", "import odradek; print(odradek.__file__)"],
                                      env=_env_with_path(found.src), capture_output=True, text=True,
                                      timeout=60).stdout.strip()
            if not Path(imported).is_relative_to(found.src):
                raise PerfError(f"with {found.src} on PYTHONPATH odradek is imported from {imported or '?'}")
            yield found
        finally:
            _git(repo, "worktree", "remove", "--force", str(tree))
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def _env_with_path(src: Path) -> dict[str, str]:
    rest = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{rest}" if rest else str(src)}


class BaselineCluster(LocalCluster):
    """A local cluster whose brokers run ``baseline``'s code (its ``src`` first on PYTHONPATH,
    the same interpreter and installed dependencies); ZooKeeper and the tooling stay current."""

    def __init__(self, baseline: Checkout, directory: str | os.PathLike[str], num_brokers: int = 3,
                 **kwargs: Any) -> None:
        super().__init__(directory, num_brokers, **kwargs)
        self.pythonpath = _env_with_path(baseline.src)["PYTHONPATH"]

    def broker_command_prefix(self, broker: BrokerProcess) -> list[str]:
        # env(1) execs the interpreter in place, so the broker's pid stays the one we started.
        return ["env", f"PYTHONPATH={self.pythonpath}"]


def in_turn(targets: Sequence[T], round_index: int) -> list[T]:
    """The targets in the order round ``round_index`` runs them: A B, then B A, then A B, ...
    Each runs first as often as second (over an even number of rounds), so neither always
    inherits what the other left behind (a broker's deferred work, a warmer page cache)."""
    return list(targets) if round_index % 2 == 0 else list(reversed(targets))


def median_figures(rounds: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """Each numeric figure's median over rounds of the same shape (nested dicts likewise);
    anything else as in the first round."""
    first = rounds[0]
    merged: dict[str, object] = {}
    for key, value in first.items():
        if isinstance(value, bool) or not isinstance(value, int | float | dict):
            merged[key] = value
        elif isinstance(value, dict):
            merged[key] = median_figures([r[key] for r in rounds])  # type: ignore[misc]
        else:
            merged[key] = statistics.median(float(r[key]) for r in rounds)  # type: ignore[arg-type]
    return merged


def ratio(after: float, before: float) -> float:
    """after / before; NaN when there is nothing to compare against."""
    return after / before if before else float("nan")
