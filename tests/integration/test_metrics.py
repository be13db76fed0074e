"""Every broker's /metrics (metrics.port) scraped as Prometheus does: Kafka's names from the
JMX exporter's rules, with values that follow what the cluster did (records produced, a broker
killed, a group's commits), and the Grafana dashboard's queries all answered."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from support import (
    ClusterFactory,
    controller_of,
    create_topic,
    partition_state,
    produce,
    unique_topic,
    wait_until,
)
from support.metrics import Scrape, scrape

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "odradek.json"
TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Three brokers serving metrics, shared by the tests that do not break the cluster."""
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("metrics"))
    try:
        yield factory(3, metrics=True)
    finally:
        factory.stop_all()


def _scrape(cluster: LocalCluster, broker_id: int) -> Scrape:
    return scrape(cluster.metrics_url(cluster.brokers[broker_id]))


def _scrape_all(cluster: LocalCluster) -> dict[int, Scrape]:
    return {broker_id: _scrape(cluster, broker_id) for broker_id in cluster.brokers}


def test_cluster_json_names_each_brokers_metrics(cluster: LocalCluster) -> None:
    described = json.loads((cluster.dir / "cluster.json").read_text())
    urls = [b["metrics"] for b in described["brokers"]]
    assert urls == [cluster.metrics_url(b) for b in cluster.brokers.values()]
    assert len(set(urls)) == 3


def test_exactly_one_active_controller_and_it_is_zookeepers(cluster: LocalCluster) -> None:
    controller_id, _epoch = controller_of(cluster)
    scrapes = _scrape_all(cluster)
    active = {b: s.value("kafka_controller_kafkacontroller_activecontrollercount") for b, s in scrapes.items()}
    assert active == {b: (1.0 if b == controller_id else 0.0) for b in cluster.brokers}
    # The controller's cluster-wide gauges; the others report zero, as Kafka's do.
    topic = unique_topic("metrics-count")
    create_topic(cluster, topic, partitions=4)
    ours = wait_until(lambda: (s := _scrape(cluster, controller_id)).value(
        "kafka_controller_kafkacontroller_globalpartitioncount") >= 4 and s, timeout=TIMEOUT_S)
    assert ours.value("kafka_controller_kafkacontroller_globaltopiccount") >= 1
    assert ours.value("kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    other = next(b for b in cluster.brokers if b != controller_id)
    assert _scrape(cluster, other).value("kafka_controller_kafkacontroller_globalpartitioncount") == 0


def test_producing_counts_bytes_and_messages_in_for_the_topic(cluster: LocalCluster) -> None:
    topic = unique_topic("metrics-in")
    create_topic(cluster, topic, partitions=1, replication_factor=3)
    leader = partition_state(cluster, topic, 0)["leader"]
    before = _scrape(cluster, leader)
    total_before = before.value("kafka_server_brokertopicmetrics_messagesin_total")
    records = 50
    produce(cluster.bootstrap_servers, topic, [(0, None, b"v" * (10 + i)) for i in range(records)])

    after = wait_until(lambda: (s := _scrape(cluster, leader)).value(
        "kafka_server_brokertopicmetrics_messagesin_total", 0.0, topic=topic) == records and s, timeout=TIMEOUT_S)
    # Bytes in are the batches appended: exactly what the leader's log grew by.
    bytes_in = after.value("kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert bytes_in == after.value("kafka_log_log_size", topic=topic, partition="0") > records * 10
    assert after.value("kafka_log_log_logendoffset", topic=topic, partition="0") == records
    assert after.value("kafka_server_brokertopicmetrics_messagesin_total") >= total_before + records
    assert after.value("kafka_server_replicamanager_leadercount") >= 1
    # The followers fetched the same bytes, and the leader counted them as replication out.
    for follower in (b for b in cluster.brokers if b != leader):
        wait_until(lambda f=follower: _scrape(cluster, f).value(
            "kafka_server_brokertopicmetrics_replicationbytesin_total", 0.0, topic=topic) == bytes_in,
            timeout=TIMEOUT_S, message=f"broker {follower} replicated {bytes_in} bytes")
    wait_until(lambda: _scrape(cluster, leader).value(
        "kafka_server_brokertopicmetrics_replicationbytesout_total", 0.0, topic=topic) >= 2 * bytes_in,
        timeout=TIMEOUT_S)


def test_request_metrics_count_and_time_each_api(cluster: LocalCluster) -> None:
    topic = unique_topic("metrics-requests")
    create_topic(cluster, topic, partitions=1)
    leader = partition_state(cluster, topic, 0)["leader"]
    produce(cluster.bootstrap_servers, topic, [(0, None, b"x")] * 5)
    got = _scrape(cluster, leader)
    produce_requests = sum(v for (name, labels), v in got.samples.items()
                           if name == "kafka_network_requestmetrics_requests_total"
                           and dict(labels)["request"] == "Produce")
    assert produce_requests >= 1
    # Every answered request was timed once, and its quantiles are ordered.
    assert got.value("kafka_network_requestmetrics_totaltimems_count", request="Produce") == produce_requests
    p50 = got.value("kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.50")
    p99 = got.value("kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.99")
    assert 0 < p50 <= p99
    # Followers fetch from every leader: counted under Fetch and FetchFollower.
    assert got.value("kafka_network_requestmetrics_totaltimems_count", request="FetchFollower") > 0
    idle = got.value("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent")
    assert 0.0 <= idle <= 1.0


def test_consumer_group_lag_is_end_offset_minus_committed_at_the_coordinator(cluster: LocalCluster) -> None:
    group = unique_topic("metrics-group")
    first = unique_topic("metrics-lag")
    create_topic(cluster, first, partitions=1)
    produce(cluster.bootstrap_servers, first, [(0, None, b"r")] * 30)
    _commit(cluster, group, first, 10)
    coordinator = _coordinator_of(cluster, group, first)
    # A second topic led by another broker than the coordinator: its end offset is asked of the leader.
    other = next(b for b in cluster.brokers if b != coordinator)
    second = unique_topic("metrics-lag-remote")
    create_topic(cluster, second, assignment=[[other, coordinator]], replication_factor=2)
    produce(cluster.bootstrap_servers, second, [(0, None, b"r")] * 7)
    _commit(cluster, group, second, 3)

    got = wait_until(lambda: (s := _scrape(cluster, coordinator)).value(
        "kafka_consumergroup_current_offset", 0.0, consumergroup=group, topic=second, partition="0") == 3 and s,
        timeout=TIMEOUT_S)
    assert got.value("kafka_consumergroup_lag", consumergroup=group, topic=first, partition="0") == 30 - 10
    assert got.value("kafka_consumergroup_lag", consumergroup=group, topic=second, partition="0") == 7 - 3
    assert got.value("kafka_consumergroup_lag_sum", consumergroup=group, topic=first) == 20
    assert got.value("kafka_coordinator_group_groupmetadatamanager_numoffsets") >= 2
    # Only the coordinator serves the group's view.
    for broker_id in cluster.brokers:
        if broker_id != coordinator:
            assert ("kafka_consumergroup_lag", frozenset({"consumergroup": group, "topic": first,
                                                           "partition": "0"}.items())) \
                not in _scrape(cluster, broker_id).samples


def _commit(cluster: LocalCluster, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[KafkaTopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def _coordinator_of(cluster: LocalCluster, group: str, topic: str) -> int:
    """The one broker whose /metrics shows the group's committed offset for ``topic``."""
    serving = wait_until(lambda: [b for b, got in _scrape_all(cluster).items() if got.value(
        "kafka_consumergroup_current_offset", 0.0, consumergroup=group, topic=topic, partition="0")],
        timeout=TIMEOUT_S, message=f"the coordinator of {group}")
    assert len(serving) == 1, serving
    return serving[0]


def test_every_metric_the_dashboard_queries_is_exported(cluster: LocalCluster) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queried = {name for panel in dashboard["panels"] for target in panel.get("targets", [])
               for name in re.findall(r"\b(kafka_[a-z0-9_]+)", target["expr"])}
    assert len(queried) >= 20
    exported = set().union(*(s.names for s in _scrape_all(cluster).values()))
    assert queried - exported == set()


def test_a_killed_broker_shows_as_under_replicated_and_offline_partitions(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3, metrics=True)
    controller_id, _ = controller_of(cluster)
    victim = next(b for b in cluster.brokers if b != controller_id)
    replicated = unique_topic("metrics-urp")
    create_topic(cluster, replicated, partitions=3, replication_factor=3)
    alone = unique_topic("metrics-offline")
    create_topic(cluster, alone, assignment=[[victim]], replication_factor=1)
    live = [b for b in cluster.brokers if b != victim]
    assert sum(_scrape(cluster, b).value("kafka_server_replicamanager_underreplicatedpartitions") for b in live) == 0

    cluster.kill_broker(victim)

    def counts() -> tuple[float, float]:
        scrapes = {b: _scrape(cluster, b) for b in live}
        under = sum(s.value("kafka_server_replicamanager_underreplicatedpartitions") for s in scrapes.values())
        return under, scrapes[controller_id].value("kafka_controller_kafkacontroller_offlinepartitionscount")
    # The three partitions of the replicated topic lost a replica; the single-replica one has no leader.
    wait_until(lambda: counts() == (3, 1), timeout=TIMEOUT_S, message="3 under-replicated, 1 offline")
    assert _scrape(cluster, controller_id).value("kafka_controller_kafkacontroller_activecontrollercount") == 1
