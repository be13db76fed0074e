"""Durability under faults: a short run of the durability harness on 3 brokers,
RF 3, min.insync.replicas=2; the long runner (100+ faults) is bench/durability_runner.py."""

from __future__ import annotations

from odradek.local.durability import DurabilityRun
from support import create_topic


def test_no_acknowledged_record_is_lost_under_broker_faults(cluster_factory) -> None:
    cluster = cluster_factory(3, overrides={"min.insync.replicas": "2", "replica.lag.time.max.ms": "5000",
                                               "zookeeper.session.timeout.ms": "4000"})
    create_topic(cluster, "durability", 3, 3)
    report = DurabilityRun(cluster, faults=4, seed=7, log=print).run()
    print(report.summary())
    assert len(report.faults) == 4
    assert report.acknowledged > 1000
    assert report.lost == []
    assert report.duplicated_same_writer == []  # a client's re-sends are counted, not held against us
    assert report.vanished_reads == []
    assert report.divergent_replicas == []
    assert report.consumer_reads > 0


def test_no_acknowledged_record_is_lost_on_a_sasl_ssl_cluster(cluster_factory) -> None:
    """The same on SASL_SSL listeners (clients and inter-broker), with the ACL authorizer on:
    leader and controller kills, replication and the clients all over TLS with SCRAM logins."""
    cluster = cluster_factory(3, overrides={"min.insync.replicas": "2", "replica.lag.time.max.ms": "5000",
                                               "zookeeper.session.timeout.ms": "4000"},
                              security="sasl_ssl")
    create_topic(cluster, "durability", 3, 3)
    report = DurabilityRun(cluster, faults=4, seed=2, log=print).run()  # seed 2: leader and controller kills
    print(report.summary())
    assert len(report.faults) == 4
    assert any("kill-leader" in f for f in report.faults) and any("kill-controller" in f for f in report.faults)
    assert report.acknowledged > 500
    assert report.lost == []
    assert report.duplicated_same_writer == []
    assert report.vanished_reads == []
    assert report.divergent_replicas == []
    assert report.consumer_reads > 0
