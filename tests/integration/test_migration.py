"""A Kafka cluster migrated to odradek by rolling restart and back (odradek.perf.migration), the
short versions of bench/migration_runner.py and of docs/DEPLOY.md's procedure: three Kafka 3.9
brokers (inter.broker.protocol.version 2.8), each replaced by an odradek broker of the same id
on the same log directory, then each back, with an acks=all idempotent producer and a consumer
group running throughout.  The README's test command runs one broker's round trip; the whole
cluster's runs with ``pytest -m ecosystem``."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.perf.harness import create_topic_admin
from odradek.perf.migration import (
    MIGRATION_SETTINGS,
    MigrationReport,
    MigrationRun,
    MixedCluster,
    round_trip_plan,
)
from support import unique_chroot


def migrate(zookeeper: EmbeddedZooKeeper, tmp_path: Path, plan: list[tuple[int, str]] | None) -> MigrationReport:
    """Three Kafka brokers taken through ``plan`` (None: every broker's round trip) with the
    workload on; the run's report, printed."""
    # Small segments, so the brokers read and roll each other's segments, indexes and snapshots;
    # few __consumer_offsets partitions, so the group coordinator's loads are short.
    cluster = MixedCluster(tmp_path, 3, zookeeper_connect=unique_chroot(zookeeper, "migration"), overrides={
        **MIGRATION_SETTINGS, "log.segment.bytes": "262144", "offsets.topic.num.partitions": "5"})
    with cluster:
        create_topic_admin(cluster.bootstrap_servers, "migration", 3, 3)
        steps = round_trip_plan(list(cluster.brokers)) if plan is None else plan
        run = MigrationRun(cluster, steps, dwell_s=3, log=print)
        run.run()
        data = [Path(b.config_path.parent / "data") for b in cluster.brokers.values()]
    report = run.migration
    print(report.steps_table())
    print(report.checker_table())
    print(*report.durability.duplicated_resent[:5], sep="\n")
    assert [(s.broker_id, s.after) for s in report.steps] == steps
    assert all(s.isr_full_s is not None for s in report.steps), report.steps_table()
    assert report.durability.acknowledged > 1000
    assert report.durability.vanished_reads == []
    assert report.durability.divergent_replicas == []
    assert report.group_commits > 0 and report.group_offsets_kept, report.checker_table()
    # No partition stalls: a replacement moves leaders within seconds, and two of three replicas
    # stay in sync (a follower that never caught up once held a partition 68 s below
    # min.insync.replicas: docs/COMPATIBILITY.md).
    assert max(report.durability.longest_unavailability_s.values()) < 30, report.checker_table()
    # The files each kind left are the other's: every broker's log has more than one segment.
    assert all(len(list((d / "migration-0").glob("*.log"))) > 1 for d in data)
    # Every acknowledged record is in its partition, at the offset it was acknowledged at, and
    # once; but for a record the client sent again under a new producer epoch (librdkafka's
    # KIP-360 bump after a timeout or an out-of-order sequence: as new records, which no broker
    # can tell from new ones; docs/COMPATIBILITY.md, "An idempotent producer's epoch bumps").
    # A copy written twice under one producer id, epoch and sequence would be the brokers'.
    durability = report.durability
    assert durability.lost == [], durability.lost[:5]
    assert durability.duplicated_same_writer == [], durability.duplicated_same_writer[:5]
    return report


@pytest.mark.timeout(600)  # two replacements, one of them a JVM's start
def test_one_broker_to_odradek_and_back_by_restart(zookeeper: EmbeddedZooKeeper, tmp_path: Path) -> None:
    report = migrate(zookeeper, tmp_path, [(0, "odradek"), (0, "kafka")])
    assert [s.before for s in report.steps] == ["kafka", "odradek"]


@pytest.mark.ecosystem
@pytest.mark.timeout(1200)  # six replacements, three of them a JVM's start: 5-8 minutes on a loaded machine
def test_kafka_to_odradek_and_back_by_rolling_restart(zookeeper: EmbeddedZooKeeper, tmp_path: Path) -> None:
    report = migrate(zookeeper, tmp_path, None)
    # With every broker odradek the controller is odradek's, and Kafka's at the end.
    assert report.steps[2].controller.endswith("(odradek)") and report.steps[-1].controller.endswith("(kafka)")
