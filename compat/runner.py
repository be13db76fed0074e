"""Running a suite: a fresh 3-broker odradek cluster per variant, the suite against it, the
cluster stopped whatever happened, and the outcome as one row of the matrix.

With ``reference`` ("3.9" or "2.8") the cluster is Apache Kafka's own (odradek.perf.kafka_ref,
PLAINTEXT only): what fails there is the suite's expectation or a feature that Kafka line
lacks, not odradek's.  Such rows say so in their variant and never go into RESULTS.md."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from compat.context import SuiteContext
from compat.jvm import Jvm
from compat.report import Row
from compat.suite import CaseResult, Status, Suite, SuiteResult, Variant, one_line
from odradek.local.cluster import LocalCluster
from odradek.perf.kafka_ref import KafkaRefCluster, jvm_settings

__all__ = ["BROKERS", "run_variant"]

BROKERS = 3
REPO = Path(__file__).resolve().parent.parent


def run_variant(suite: Suite, variant: Variant, workdir: Path, *, quick: bool = False,
                reference: str | None = None) -> Row:
    """Run ``suite`` once against a new cluster of ``variant`` in ``workdir`` (emptied first)."""
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    start = time.monotonic()
    cluster: LocalCluster
    if reference is None:
        cluster = LocalCluster(workdir / "cluster", BROKERS, security=variant.security,
                               overrides=dict(suite.BROKER_OVERRIDES))
    else:
        if variant.security is not None:
            raise ValueError(f"a reference Kafka cluster is PLAINTEXT only, not {variant.listener}")
        cluster = KafkaRefCluster(workdir / "cluster", BROKERS, version=reference,
                                  overrides=dict(suite.BROKER_OVERRIDES))
        variant = Variant(f"{variant.name}@kafka-{cluster.kafka_version}", None, variant.quick)
    result = SuiteResult()
    try:
        prepare = getattr(suite, "prepare", None)
        if prepare is not None:
            prepare()
        cluster.start(timeout_s=180)
        ctx = SuiteContext(suite.NAME, variant, workdir, cluster, Jvm(workdir / "jvm"))
        result = suite.run(cluster, ctx, quick)
        _check_brokers(cluster, result)
    except Exception as e:  # the suite (or the cluster) broke: one case says why
        result.cases.append(CaseResult("(suite)", Status.FAILED, one_line(f"{type(e).__name__}: {e}")))
    finally:
        cluster.stop()
    result.versions.setdefault("Java", _java_version())
    return Row.of(suite.NAME, variant, result, time.monotonic() - start, quick=quick,
                  finished=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), commit=_commit())


def _check_brokers(cluster: LocalCluster, result: SuiteResult) -> None:
    """A broker that died during the suite is a failure of its own, whatever the cases said."""
    dead = [b for b in cluster.brokers.values() if not b.alive]
    if dead:
        tails = "; ".join(f"broker {b.broker_id}: "
                          + (b.config_path.parent / "server.log").read_text(errors="replace")[-300:] for b in dead)
        result.cases.append(CaseResult("(brokers alive)", Status.FAILED, one_line(tails)))


def _java_version() -> str:
    """``17.0.15`` of ``openjdk version "17.0.15" 2025-04-15``."""
    line = jvm_settings().split(";")[0]
    return match.group(1) if (match := re.search(r'"([^"]+)"', line)) else line


def _commit() -> str:
    """odradek's commit (with ``+`` when the work tree has changes)."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src"], capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return f"{head}+" if dirty else head or "?"
