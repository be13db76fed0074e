"""perf/baseline.py: a baseline checkout is a real detached git worktree that the brokers'
command imports from, removed afterwards; rounds take turns; medians and ratios."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.perf.baseline import BaselineCluster, checkout, in_turn, median_figures, ratio
from odradek.perf.common import PerfError


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository of two commits, each with its own src/odradek/__init__.py."""
    repo = tmp_path / "repo"
    (repo / "src" / "odradek").mkdir(parents=True)
    _git(repo, "init", "--quiet")
    for version in ("old", "new"):
        (repo / "src" / "odradek" / "__init__.py").write_text(f"VERSION = {version!r}\n")
        _git(repo, "add", ".")
        _git(repo, "commit", "--quiet", "-m", version)
    return repo


def test_a_checkout_is_the_commit_the_brokers_import_and_is_removed_afterwards(repo: Path, tmp_path: Path) -> None:
    with checkout(repo, "HEAD~1") as old:
        assert old.commit == _git(repo, "rev-parse", "HEAD~1")[:12]
        assert len(_git(repo, "worktree", "list").splitlines()) == 2
        cluster = BaselineCluster(old, tmp_path / "cluster", 1)
        version = subprocess.run([*cluster.broker_command_prefix(cluster.brokers[0]), sys.executable, "-c",
                                  "import odradek; print(odradek.VERSION)"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        assert version == "old"
        tree = old.src.parent
    assert not tree.exists()
    assert len(_git(repo, "worktree", "list").splitlines()) == 1


def test_an_unknown_ref_is_refused(repo: Path) -> None:
    with pytest.raises(PerfError, match="rev-parse"), checkout(repo, "no-such-ref"):
        pass


def test_a_commit_without_odradek_is_refused_and_its_worktree_removed(repo: Path) -> None:
    (repo / "README").write_text("no package here\n")
    _git(repo, "rm", "--quiet", "-r", "src")
    _git(repo, "add", "README")
    _git(repo, "commit", "--quiet", "-m", "no src")
    with pytest.raises(PerfError, match="imported from"), checkout(repo, "HEAD"):
        pass
    assert len(_git(repo, "worktree", "list").splitlines()) == 1


def test_rounds_take_turns_in_abba_order() -> None:
    assert [in_turn(["current", "baseline"], r) for r in range(3)] == [
        ["current", "baseline"], ["baseline", "current"], ["current", "baseline"]]


def test_medians_of_every_figure_nested_ones_too() -> None:
    rounds = [{"code": "current", "rate": 500.0, "missing": 0, "ok": True, "usage": {"brokers_cpu_s": 1.0}},
              {"code": "current", "rate": 500.0, "missing": 4, "ok": False, "usage": {"brokers_cpu_s": 3.0}},
              {"code": "current", "rate": 500.0, "missing": 1, "ok": True, "usage": {"brokers_cpu_s": 2.5}}]
    assert median_figures(rounds) == {"code": "current", "rate": 500.0, "missing": 1.0, "ok": True,
                                      "usage": {"brokers_cpu_s": 2.5}}


def test_ratio_is_after_over_before_and_nan_without_before() -> None:
    assert ratio(3.0, 2.0) == 1.5
    assert math.isnan(ratio(1.0, 0.0))
