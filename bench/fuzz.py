"""Fuzz the fuzz targets (fuzz/, atheris) for a set time each, and report.

Each target runs in its own process (``python -m fuzz.runner``, libFuzzer under atheris) for
``--seconds``, starting from its seed corpus ``fuzz/corpus/<target>/`` and from what earlier
runs found (kept in ``bench/results/fuzz/<target>/corpus``, which libFuzzer grows; the seed
corpus is only read).  Per target it prints the executions, libFuzzer's ``cov:`` figure (edges
of odradek's instrumented code reached) and ``ft:`` (features), the corpus size, and the
crash found, if any: libFuzzer stops a target at its first crash and writes the input to
``bench/results/fuzz/<target>/crash-*``.  Replay one with
``.venv/bin/python -m fuzz.runner TARGET FILE``; once fixed, keep it as
``fuzz/corpus/<target>/regression-<what>`` so the unit tests replay it for ever.

    .venv/bin/python bench/fuzz.py [--target NAME|all] [--seconds 60] [--jobs 1] [--fresh]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fuzz import TARGETS  # noqa: E402  (the repository root is on the path only now)
from fuzz.runner import CORPUS  # noqa: E402

RESULTS = REPO / "bench" / "results" / "fuzz"
_STATUS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)", re.MULTILINE)
_EXECUTED = re.compile(r"stat::number_of_executed_units: (\d+)")
_ARTIFACT = re.compile(r"Test unit written to (\S+)")


@dataclass
class Outcome:
    target: str
    executions: int
    coverage: int
    features: int
    corpus: int
    seconds: float
    crash: str | None  # the file libFuzzer wrote, or why the run failed
    log: Path


def fuzz(target: str, seconds: int, fresh: bool) -> Outcome:
    work = RESULTS / target
    if fresh and work.exists():
        shutil.rmtree(work)
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "fuzz.runner", target, f"-max_total_time={seconds}",
               "-print_final_stats=1", "-timeout=25", "-rss_limit_mb=3072", "-len_control=0",
               f"-artifact_prefix={work}/", str(corpus), str(CORPUS / target)]
    started = time.monotonic()
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, errors="replace",
                         timeout=seconds + 600)
    elapsed = time.monotonic() - started
    log = work / "last-run.log"
    log.write_text(run.stderr + run.stdout)
    statuses = _STATUS.findall(run.stderr)
    last = statuses[-1] if statuses else ("0", "0", "0", "0")
    executed = _EXECUTED.search(run.stderr)
    artifact = _ARTIFACT.search(run.stderr)
    crash = artifact.group(1) if artifact else None
    if crash is None and run.returncode != 0:
        crash = f"exit code {run.returncode} (see {log})"
    return Outcome(target, int(executed.group(1)) if executed else int(last[0]), int(last[1]), int(last[2]),
                   int(last[3]), elapsed, crash, log)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="all", choices=("all", *TARGETS))
    parser.add_argument("--seconds", type=int, default=60, help="fuzzing time per target")
    parser.add_argument("--jobs", type=int, default=1, help="targets fuzzed at once (one process each)")
    parser.add_argument("--fresh", action="store_true",
                        help="forget what earlier runs found (start from the seed corpus alone)")
    args = parser.parse_args()
    targets = TARGETS if args.target == "all" else (args.target,)
    print(f"{'target':<15} {'executions':>11} {'exec/s':>7} {'cov':>6} {'ft':>6} {'corpus':>7}  crash")
    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        for o in pool.map(lambda t: fuzz(t, args.seconds, args.fresh), targets):
            rate = o.executions / o.seconds if o.seconds else 0
            print(f"{o.target:<15} {o.executions:>11,} {rate:>7,.0f} {o.coverage:>6} {o.features:>6} "
                  f"{o.corpus:>7}  {o.crash or '-'}", flush=True)


if __name__ == "__main__":
    main()
