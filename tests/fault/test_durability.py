"""Durability under faults: a short run of the durability harness on 3 brokers,
RF 3, min.insync.replicas=2; the long runner (100+ faults) is bench/durability_runner.py."""

from __future__ import annotations

from odradek.local.durability import DurabilityRun
from support import create_topic


def test_no_acknowledged_record_is_lost_under_broker_faults(cluster_factory) -> None:
    cluster = cluster_factory(3, overrides={"min.insync.replicas": "2", "replica.lag.time.max.ms": "5000"})
    create_topic(cluster, "durability", 3, 3)
    report = DurabilityRun(cluster, faults=5, seed=7).run()
    print(report.summary())
    assert len(report.faults) == 5
    assert report.acknowledged > 1000
    assert report.lost == []
    assert report.duplicated == []
    assert report.vanished_reads == []
    assert report.divergent_replicas == []
    assert report.consumer_reads > 0
