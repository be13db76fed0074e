"""The gauges computed at scrape time: the replica manager's counts over its partitions, the
controller's over its context (zero on a broker that is not the controller)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from odradek.broker.metrics.kafka_metrics import controller_families, replica_manager_families
from odradek.broker.partition import Partition
from odradek.common import TopicPartition
from odradek.controller.context import ControllerContext, ReplicaAssignment
from odradek.controller.events import BrokerChange
from odradek.histogram import Histogram
from odradek.zk.zk_data import LeaderAndIsr


def values(families: Any) -> dict[str, float]:
    """Unlabelled samples by name."""
    return {s.name: s.value for family in families for s in family.samples if not s.labels}


def partition(n: int, leader: int, isr: tuple[int, ...], replicas: tuple[int, ...], min_isr: int) -> Partition:
    p = Partition("t", n, local_broker_id=1, leader_id=leader, isr=isr, replicas=replicas)
    p.log = SimpleNamespace(config=SimpleNamespace(min_insync_replicas=min_isr))  # type: ignore[assignment]
    return p


def test_replica_manager_counts_only_the_partitions_it_leads() -> None:
    partitions = [
        partition(0, 1, (1, 2, 3), (1, 2, 3), 2),  # full
        partition(1, 1, (1, 2), (1, 2, 3), 2),  # under-replicated, at min ISR
        partition(2, 1, (1,), (1, 2, 3), 2),  # under-replicated, under min ISR
        partition(3, 2, (2,), (2, 1, 3), 2),  # led elsewhere: not counted here
    ]
    rm = SimpleNamespace(
        partitions={TopicPartition("t", p.partition): p for p in partitions}, offline_partitions={TopicPartition("u", 0)},
        alter_partition=SimpleNamespace(isr_shrinks=4, isr_expands=3), fetchers=SimpleNamespace(max_lag=lambda: 17))
    got = values(replica_manager_families(rm))  # type: ignore[arg-type]
    prefix = "kafka_server_replicamanager_"
    assert {k[len(prefix):]: v for k, v in got.items() if k.startswith(prefix)} == {
        "underreplicatedpartitions": 2, "underminisrpartitioncount": 1, "atminisrpartitioncount": 1,
        "leadercount": 3, "partitioncount": 4, "offlinereplicacount": 1, "isrshrinks_total": 4,
        "isrexpands_total": 3}


def controller(active: bool) -> Any:
    ctx = ControllerContext()
    ctx.all_topics = {"t"}
    for n, (replicas, leader) in enumerate([((1, 2), 1), ((2, 1), 1), ((3, 1), 1)]):
        ctx.assignments["t"][n] = ReplicaAssignment(replicas)
        ctx.leadership[TopicPartition("t", n)] = LeaderAndIsr(leader, 0, replicas, 1)
    rate_and_time = {"LeaderElectionRateAndTimeMs": Histogram()}
    rate_and_time["LeaderElectionRateAndTimeMs"].update(12.0)
    return SimpleNamespace(
        is_active=active, ctx=ctx,
        partition_sm=SimpleNamespace(offline_partition_count=lambda: 1, topics_being_deleted=set(),
                                     unclean_leader_elections=2),
        event_manager=SimpleNamespace(current=BrokerChange(), queue_size=5, rate_and_time=rate_and_time))


def test_the_active_controller_reports_the_clusters_counts() -> None:
    got = values(controller_families(controller(active=True)))
    prefix = "kafka_controller_kafkacontroller_"
    assert got[prefix + "activecontrollercount"] == 1
    assert got[prefix + "globaltopiccount"] == 1
    assert got[prefix + "globalpartitioncount"] == 3
    assert got[prefix + "offlinepartitionscount"] == 1
    assert got[prefix + "preferredreplicaimbalancecount"] == 2  # partitions 1 and 2 are led by 1, not 2 or 3
    assert got[prefix + "controllerstate"] == 2  # BrokerChange
    assert got["kafka_controller_controllereventmanager_eventqueuesize"] == 5
    assert got["kafka_controller_controllerstats_leaderelectionrateandtimems_count"] == 1
    assert got["kafka_controller_controllerstats_uncleanleaderelections_total"] == 2


def test_another_broker_reports_zero_cluster_counts() -> None:
    got = values(controller_families(controller(active=False)))
    prefix = "kafka_controller_kafkacontroller_"
    assert [got[prefix + n] for n in ("activecontrollercount", "globaltopiccount", "globalpartitioncount",
                                      "offlinepartitionscount", "preferredreplicaimbalancecount")] == [0] * 5
