"""Every broker's /metrics (metrics.port) scraped as Prometheus does: Kafka's names from the
JMX exporter's rules, with values that follow what the cluster did (records produced, errors
answered, a slow reader, a broker killed, a group's commits), and the Grafana dashboard's
queries all answered."""

from __future__ import annotations

import datetime
import gzip
import http.client
import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.produce.v9 import request as produce_req
from kio.schema.produce.v9 import response as produce_resp

from odradek.broker.metrics.request_metrics import SAMPLE_EVERY
from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.protocol.errors import ErrorCode
from odradek.protocol.framing import encode_request
from odradek.protocol.records import SimpleRecord, build_batch
from support import (
    ClusterFactory,
    address_of,
    controller_of,
    create_topic,
    fetch_records,
    kafka_request,
    metadata,
    partition_state,
    produce,
    produce_records,
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


def test_the_metrics_server_speaks_http_as_prometheus_scrapes_it_and_refuses_the_rest(cluster: LocalCluster) -> None:
    broker = cluster.brokers[min(cluster.brokers)]
    host, port = cluster.broker_address(broker), broker.metrics_port
    connection = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    try:
        # What Prometheus sends: OpenMetrics preferred, gzip accepted; twice on one connection.
        accept = ("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
        for _ in range(2):
            connection.request("GET", "/metrics", headers={"Accept": accept, "Accept-Encoding": "gzip"})
            response = connection.getresponse()
            body = gzip.decompress(response.read()).decode()
            assert response.status == 200 and response.getheader("Content-Encoding") == "gzip"
            assert response.getheader("Content-Type").startswith("application/openmetrics-text")
            assert body.endswith("# EOF\n") and "kafka_server_replicamanager_leadercount" in body
        sock = connection.sock
        connection.request("HEAD", "/metrics")
        response = connection.getresponse()
        assert response.status == 200 and int(response.getheader("Content-Length")) > 1000 and response.read() == b""
        assert connection.sock is sock  # the same connection served all three
        connection.request("GET", "/nothing/here")
        response = connection.getresponse()
        assert (response.status, response.read()) == (404, b"not found: the metrics are at /metrics\n")
        connection.request("POST", "/metrics", body=b"x" * 100_000)
        response = connection.getresponse()
        assert (response.status, response.getheader("Allow")) == (405, "GET, HEAD")
        assert response.getheader("Connection") == "close"  # its body is left unread
    finally:
        connection.close()
    # Not HTTP at all: a 400 and the connection closes; the broker keeps serving.
    with socket.create_connection((host, port), timeout=TIMEOUT_S) as sock:
        sock.sendall(b"\x00\x00\x00\x10garbage that is not a request line\r\n\r\n")
        answer = b"".join(iter(lambda: sock.recv(65536), b""))
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert _scrape(cluster, broker.broker_id).value("kafka_server_replicamanager_leadercount") >= 0


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


def test_deleting_a_topic_takes_its_meters_and_leaves_the_all_topics_totals(cluster: LocalCluster) -> None:
    """As Kafka's removeMetrics: the topic's series go, and the all-topics counters keep what it
    counted (a counter that went down would read as a reset, and a spike in rate())."""
    from confluent_kafka.admin import AdminClient

    topic = unique_topic("metrics-deleted")
    create_topic(cluster, topic, partitions=1, replication_factor=1)
    leader = partition_state(cluster, topic, 0)["leader"]
    produce(cluster.bootstrap_servers, topic, [(0, None, b"d" * 20)] * 30)
    counted = wait_until(lambda: (s := _scrape(cluster, leader)).value(
        "kafka_server_brokertopicmetrics_messagesin_total", 0.0, topic=topic) == 30 and s, timeout=TIMEOUT_S)
    totals = {name: counted.value(name) for name in ("kafka_server_brokertopicmetrics_messagesin_total",
                                                      "kafka_server_brokertopicmetrics_bytesin_total")}
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.delete_topics([topic])[topic].result(TIMEOUT_S)
    series = ("kafka_server_brokertopicmetrics_messagesin_total", frozenset({("topic", topic)}))
    gone = wait_until(lambda: series not in (s := _scrape(cluster, leader)).samples and s, timeout=TIMEOUT_S,
                      message=f"{topic}'s meters removed from broker {leader}")
    for name, before in totals.items():
        assert gone.value(name) >= before, name


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
    # Every answered request was counted (the timers count all, timed or sampled), and the quantiles are ordered.
    assert got.value("kafka_network_requestmetrics_totaltimems_count", request="Produce") == produce_requests
    p50 = got.value("kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.50")
    p99 = got.value("kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.99")
    assert 0 < p50 <= p99
    # Followers fetch from every leader: counted under Fetch and FetchFollower.
    assert got.value("kafka_network_requestmetrics_totaltimems_count", request="FetchFollower") > 0
    idle = got.value("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent")
    assert 0.0 <= idle <= 1.0


def _sum(got: Scrape, name: str, **labels: str) -> float:
    """The sum of the samples ``name`` whose labels include ``labels`` (e.g. over API versions)."""
    return sum(v for (sample, sample_labels), v in got.samples.items()
               if sample == name and labels.items() <= dict(sample_labels).items())


def _errors(got: Scrape, request: str, error: str) -> float:
    return got.value("kafka_network_requestmetrics_errors_total", 0.0, request=request, error=error)


ONE_AT_A_TIME = 3 * SAMPLE_EVERY + 5  # Produce requests on one connection: three timed, the rest counted


def test_every_produce_request_is_counted_though_one_in_sample_every_is_timed(cluster: LocalCluster) -> None:
    topic = unique_topic("metrics-counted")
    create_topic(cluster, topic, partitions=1)
    leader = partition_state(cluster, topic, 0)["leader"]
    requests, timed = "kafka_network_requestmetrics_requests_total", "kafka_network_requestmetrics_totaltimems_count"
    before = _scrape(cluster, leader)

    def counted() -> tuple[float, float, float]:
        got = _scrape(cluster, leader)
        return (_sum(got, requests, request="Produce") - _sum(before, requests, request="Produce"),
                _errors(got, "Produce", "NONE") - _errors(before, "Produce", "NONE"),
                got.value(timed, request="Produce") - before.value(timed, 0.0, request="Produce"))

    # One record a request, on one connection: the broker times one in SAMPLE_EVERY and counts
    # the others by its countdown, crediting them to the next timed one; the last of them are
    # handed over when a scrape asks (the connection still open) and never again at its close.
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "batch.num.messages": 1, "linger.ms": 0})
    try:
        for _ in range(ONE_AT_A_TIME):
            producer.produce(topic, value=b"c", partition=0)
        assert producer.flush(TIMEOUT_S) == 0
        wait_until(lambda: counted()[0] >= ONE_AT_A_TIME, timeout=TIMEOUT_S,
                   message=f"{ONE_AT_A_TIME} Produce requests counted")
        assert counted() == (ONE_AT_A_TIME,) * 3
    finally:
        producer.flush(TIMEOUT_S)
        del producer  # closes its connections
    assert counted() == (ONE_AT_A_TIME,) * 3


def test_errors_are_counted_per_api_and_error_code_none_included(cluster: LocalCluster) -> None:
    topic = unique_topic("metrics-errors")
    create_topic(cluster, topic, partitions=1)
    leader = partition_state(cluster, topic, 0)["leader"]
    follower = next(b for b in cluster.brokers if b != leader)
    before = {b: _scrape(cluster, b) for b in (leader, follower)}
    # A real producer's requests each carry one partition: one NONE per Produce answered.
    produce(cluster.bootstrap_servers, topic, [(0, None, b"e")] * 20)

    def produced_and_none(got: Scrape) -> tuple[float, float]:
        requests = "kafka_network_requestmetrics_requests_total"
        return (_sum(got, requests, request="Produce") - _sum(before[leader], requests, request="Produce"),
                _errors(got, "Produce", "NONE") - _errors(before[leader], "Produce", "NONE"))

    def settled() -> Scrape | None:
        # A request is counted once its answer is out (a scrape asks the channels), its error codes as it is made.
        got = _scrape(cluster, leader)
        produced, none = produced_and_none(got)
        return got if produced >= 1 and produced == none else None

    led = wait_until(settled, timeout=TIMEOUT_S, message="one NONE per Produce answered")
    # Followers' fetches are counted under Fetch, not FetchFollower (as Kafka's updateErrorMetrics).
    assert _errors(led, "Fetch", "NONE") > _errors(before[leader], "Fetch", "NONE")
    assert _sum(led, "kafka_network_requestmetrics_errors_total", request="FetchFollower") == 0

    # Refusals: each is counted once, under its API and its error.
    out_of_range = fetch_records(address_of(cluster, leader), topic, 0, 1000)
    assert out_of_range.error_code == ErrorCode.offset_out_of_range
    assert _errors(_scrape(cluster, leader), "Fetch", "OFFSET_OUT_OF_RANGE") - _errors(
        before[leader], "Fetch", "OFFSET_OUT_OF_RANGE") == 1
    address = address_of(cluster, follower)
    assert produce_records(address, topic, 0, None).error_code == ErrorCode.not_leader_or_follower
    (unknown,) = metadata(address, [unique_topic("metrics-absent")]).topics
    assert unknown.error_code == ErrorCode.unknown_topic_or_partition
    got, old = _scrape(cluster, follower), before[follower]
    assert _errors(got, "Produce", "NOT_LEADER_OR_FOLLOWER") - _errors(old, "Produce", "NOT_LEADER_OR_FOLLOWER") == 1
    assert _errors(got, "Produce", "NONE") == _errors(old, "Produce", "NONE")  # its one partition was refused
    assert _errors(got, "Metadata", "UNKNOWN_TOPIC_OR_PARTITION") - _errors(
        old, "Metadata", "UNKNOWN_TOPIC_OR_PARTITION") == 1


def test_produce_counts_a_none_per_partition_written_and_none_for_acks_0(cluster: LocalCluster) -> None:
    """The broker takes each Produce answer to carry one NONE and its handler counts how an
    answer differs: here one of three partitions, two written and one unknown, and requests
    with acks=0, which get no answer."""
    topic = unique_topic("metrics-partitions")
    broker = next(iter(cluster.brokers))
    create_topic(cluster, topic, assignment=[[broker], [broker]])
    requests = "kafka_network_requestmetrics_requests_total"
    before = _scrape(cluster, broker)

    def delta(got: Scrape) -> tuple[float, float, float]:
        return (_sum(got, requests, request="Produce") - _sum(before, requests, request="Produce"),
                _errors(got, "Produce", "NONE") - _errors(before, "Produce", "NONE"),
                _errors(got, "Produce", "UNKNOWN_TOPIC_OR_PARTITION")
                - _errors(before, "Produce", "UNKNOWN_TOPIC_OR_PARTITION"))

    batch = build_batch([SimpleRecord(value=b"p")])
    answer = kafka_request(address_of(cluster, broker), produce_req.ProduceRequest(
        acks=1, timeout=datetime.timedelta(seconds=10), topic_data=(produce_req.TopicProduceData(
            name=topic, partition_data=tuple(produce_req.PartitionProduceData(index=p, records=batch)
                                             for p in (0, 1, 7))),)), produce_resp.ProduceResponse)
    (answered,) = answer.responses
    assert sorted(p.error_code for p in answered.partition_responses) == [
        ErrorCode.none, ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    assert delta(_scrape(cluster, broker)) == (1, 2, 1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": 0,
                         "batch.num.messages": 1, "linger.ms": 0})
    try:
        for _ in range(5):
            producer.produce(topic, value=b"z", partition=0)
        assert producer.flush(TIMEOUT_S) == 0
        wait_until(lambda: delta(_scrape(cluster, broker))[0] >= 6, timeout=TIMEOUT_S,
                   message="five acks=0 Produce requests counted")
    finally:
        producer.flush(TIMEOUT_S)
    assert delta(_scrape(cluster, broker)) == (6, 2, 1)


HOLD_S = 1.0  # how long the slow reader below leaves the answer unread


def test_response_send_time_lasts_until_a_slow_reader_took_the_last_byte(cluster: LocalCluster) -> None:
    """A 16 MB fetch answer does not fit the kernel's socket buffers (4 MB to send, 64 KB to
    receive here): it waits in the broker's transport until the client reads.  It is not
    counted before its last byte is written, and then its ResponseSendTimeMs covers the wait."""
    broker_id = next(iter(cluster.brokers))
    topic = unique_topic("metrics-send")
    create_topic(cluster, topic, assignment=[[broker_id]], replication_factor=1)
    produce(cluster.bootstrap_servers, topic, [(0, None, bytes(512 * 1024))] * 32)
    counted = "kafka_network_requestmetrics_responsesendtimems_count"
    before = _scrape(cluster, broker_id)
    request = fetch_req.FetchRequest(
        max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=64 << 20,
        topics=(fetch_req.FetchTopic(topic=topic, partitions=(fetch_req.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=64 << 20),)),),
        forgotten_topics_data=())
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.settimeout(TIMEOUT_S)
        sock.connect(("127.0.0.1", cluster.brokers[broker_id].port))
        sock.sendall(encode_request(request, 1, "slow-reader"))
        # Its first bytes here: the broker has answered, and holds the rest.
        wait_until(lambda: len(sock.recv(4, socket.MSG_PEEK)) == 4, timeout=TIMEOUT_S)
        held = _scrape(cluster, broker_id)
        assert held.value(counted, 0.0, request="FetchConsumer") == before.value(counted, 0.0, request="FetchConsumer")
        time.sleep(HOLD_S)  # the measured wait (the reader holding off), not a wait for a condition
        size = int.from_bytes(_read(sock, 4), "big")
        assert size > 16 * 512 * 1024
        _read(sock, size)

    after = wait_until(lambda: (s := _scrape(cluster, broker_id)).value(
        counted, 0.0, request="FetchConsumer") == before.value(counted, 0.0, request="FetchConsumer") + 1 and s,
        timeout=TIMEOUT_S)

    def grew(name: str) -> float:
        return after.value(name, request="FetchConsumer") - before.value(name, 0.0, request="FetchConsumer")

    sent_ms = grew("kafka_network_requestmetrics_responsesendtimems_sum")
    assert sent_ms >= HOLD_S * 1000
    assert grew("kafka_network_requestmetrics_totaltimems_sum") >= sent_ms
    assert after.value("kafka_network_requestmetrics_responsesendtimems", request="FetchConsumer",
                       quantile="0.999") >= HOLD_S * 1000


def _read(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(min(n - len(data), 1 << 20))
        assert chunk, "closed by the broker"
        data += chunk
    return bytes(data)


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


def test_an_open_transaction_counts_as_ongoing_at_its_coordinator_until_committed(cluster: LocalCluster) -> None:
    topic = unique_topic("metrics-txn")
    create_topic(cluster, topic, partitions=1)
    name = "kafka_coordinator_transaction_transactionstatemanager_ongoingtransactions"

    def ongoing() -> float:
        return sum(s.value(name) for s in _scrape_all(cluster).values())

    assert ongoing() == 0
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": unique_topic("txn")})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"r", partition=0)
    producer.flush(TIMEOUT_S)  # the partition is added to the transaction before the record is sent
    assert ongoing() == 1
    producer.commit_transaction(TIMEOUT_S)
    wait_until(lambda: ongoing() == 0, timeout=TIMEOUT_S, message="the transaction complete at its coordinator")


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
    elections = "kafka_controller_controllerstats_leaderelectionrateandtimems_count"
    elections_before = _scrape(cluster, controller_id).value(elections)

    cluster.kill_broker(victim)

    def counts() -> tuple[float, float]:
        scrapes = {b: _scrape(cluster, b) for b in live}
        under = sum(s.value("kafka_server_replicamanager_underreplicatedpartitions") for s in scrapes.values())
        return under, scrapes[controller_id].value("kafka_controller_kafkacontroller_offlinepartitionscount")
    # The three partitions of the replicated topic lost a replica; the single-replica one has no leader.
    wait_until(lambda: counts() == (3, 1), timeout=TIMEOUT_S, message="3 under-replicated, 1 offline")
    got = _scrape(cluster, controller_id)
    assert got.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
    # The controller timed the broker's death (BrokerChange: Kafka's LeaderElectionRateAndTimeMs), cleanly.
    assert got.value(elections) > elections_before
    assert got.value("kafka_controller_controllerstats_uncleanleaderelections_total") == 0
