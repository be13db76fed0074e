"""The fuzz targets (fuzz/) in CI: every corpus input through every target, deterministic, then
each target fuzzed for two seconds by atheris in its own process (bench/fuzz.py fuzzes them
at length).  A regression input (a crash once found, fixed) fails here if the bug returns."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fuzz import TARGETS
from fuzz.runner import CORPUS, corpus_files, load

REPO = Path(__file__).resolve().parents[2]
FUZZ_SECONDS = 2


def test_every_target_has_seeds_and_the_corpus_stays_small():
    files = corpus_files()
    assert {p.parent.name for p in files} == set(TARGETS)
    too_big = [p.name for p in files if p.stat().st_size >= 4096]
    assert too_big == []
    assert sum(p.stat().st_size for p in files) < 300_000


@pytest.mark.parametrize("target", TARGETS)
def test_every_corpus_input_passes_every_target(target):
    """Inputs of other targets are garbage to this one: they must be refused the documented way."""
    harness = load(target)
    for path in corpus_files():
        try:
            harness.test_one_input(path.read_bytes())
        except BaseException as e:
            raise AssertionError(f"{target} failed on {path.relative_to(CORPUS)}: {e!r}") from e


def _fuzz(target: str, scratch: Path) -> subprocess.CompletedProcess[str]:
    corpus = scratch / target
    corpus.mkdir()
    return subprocess.run(
        [sys.executable, "-m", "fuzz.runner", target, f"-max_total_time={FUZZ_SECONDS}", "-timeout=10",
         f"-artifact_prefix={scratch}/{target}-", str(corpus), str(CORPUS / target)],
        cwd=REPO, capture_output=True, text=True, errors="replace", timeout=120)


def test_every_target_fuzzes_briefly_without_a_crash(tmp_path):
    pytest.importorskip("atheris")
    with ThreadPoolExecutor(max_workers=2) as pool:  # two cores: two targets at a time
        runs = dict(zip(TARGETS, pool.map(lambda t: _fuzz(t, tmp_path), TARGETS), strict=True))
    failed = {t: run.stderr[-3000:] for t, run in runs.items() if run.returncode != 0 or "Done " not in run.stderr}
    assert failed == {}
    for run in runs.values():
        assert " cov: " in run.stderr  # the instrumentation reached odradek's code
