"""The partition nemesis, short: each fault kind once on a lab (3 brokers, a ZooKeeper ensemble
of 3) with short session and ISR-lag timeouts, idempotent and transactional producers and a
consume-transform-produce pipeline running, then 0 lost, 0 duplicated, 0 anomalies and every
broker alive; then, on the same lab, the acks=1 contrast. The long run (100+ faults) is
bench/nemesis.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from odradek.local.lab import Lab
from odradek.local.nemesis import FAULT_KINDS, NemesisRun


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, lab_identity: Callable[[], tuple[str, str]]) -> Iterator[Lab]:
    """One lab for the module (3 brokers, an ensemble of 3), with short session and ISR-lag timeouts."""
    name, subnet = lab_identity()
    lab = Lab.create(tmp_path_factory.mktemp("nemesis") / "lab", brokers=3, zookeepers=3, name=name, subnet=subnet,
                     overrides={"zookeeper.session.timeout.ms": "3000", "replica.lag.time.max.ms": "3000"})
    try:
        lab.up()
        yield lab
    finally:
        lab.down()


@pytest.mark.timeout(600)  # each kind once, each allowed 60 s to refill the ISRs on a loaded machine
def test_each_fault_once_loses_nothing(lab: Lab, tmp_path: Path) -> None:
    expected = list(FAULT_KINDS)
    lines: list[str] = []

    def log(line: str) -> None:
        lines.append(line)
        print(line, flush=True)  # shown as it happens if the test is stopped by its timeout

    report = NemesisRun(lab, tmp_path / "nemesis", faults=len(expected), seed=15, rate=100,
                        hold_s=1.0, past_session_s=1.0, isr_timeout_s=60, txn_producers=2, pipelines=1, log=log).run()
    log = "\n".join(lines)
    assert [f.kind for f in report.faults] == expected, log
    assert report.skipped == []
    verdict = report.verdict
    assert verdict.acknowledged > 500 and verdict.polls > 0 and verdict.commits > 0, log
    # Every acknowledged record where it was acknowledged, and no record twice but for a
    # client's re-sends under a new producer epoch (librdkafka's KIP-360 bump after a request
    # whose answer it never got: docs/COMPATIBILITY.md), which the table counts.
    assert verdict.lost == [] and verdict.duplicated_same_writer == [], verdict.examples()
    assert verdict.anomalies == 0, verdict.examples()
    # The transactional roles: transactions committed and aborted on purpose, read back with
    # read_committed during the run, the pipeline's output exactly once, the hung one aborted.
    txns = verdict.transactions
    assert txns is not None and txns.anomalies == 0, txns.examples()
    assert txns.committed > 20 and txns.aborted > 0 and txns.reads > 0, report.table()
    assert txns.hung == 1 and txns.pipeline_committed > 0 and txns.pipeline_records > 0, report.table()
    assert all(f.isr_full is not None for f in report.faults), report.table()
    assert report.brokers_alive == {"broker0": True, "broker1": True, "broker2": True}
    assert report.workload_exit == 0
    print(report.table())  # shown with -s: the figures of this short run


def test_acks_1_under_a_zombie_leader_loses_writes_and_the_checker_sees_it(lab: Lab, tmp_path: Path) -> None:
    """The contrast Kafka documents: with acks=1 the zombie leader acknowledges writes that the
    new leader never had. Shows that the checker is not vacuous on a real history."""
    report = NemesisRun(lab, tmp_path / "nemesis", faults=1, kinds=["zombie"], seed=15, rate=100,
                        acks="1", topic="nemesis-acks1", isr_timeout_s=60).run()
    verdict = report.verdict
    assert verdict.lost, report.table()
    assert all(" acked at " in line and "found at None" in line for line in verdict.lost[:10]), verdict.lost[:10]
    assert verdict.duplicated == [] and verdict.divergent == [] and verdict.commits_backwards == []
    assert all(report.brokers_alive.values()) and report.workload_exit == 0
