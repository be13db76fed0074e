"""A secure local cluster as ``odradek up --security sasl_ssl`` makes it: the settings in
cluster.json work with confluent-kafka, kafka-python, aiokafka and kcat for the admin;
``odradek topics --command-config``; replication between brokers over SASL_SSL (RF 3, acks=all);
the unprivileged client user gets nothing until ACLs grant it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from odradek.security.client import ClientSecurity
from support import run_odradek, wait_until
from support.metrics import scrape
from support.wire import partitions_of

TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """``odradek up -n 3 --security sasl_ssl``; yields its cluster.json."""
    directory = tmp_path_factory.mktemp("secure") / "cluster"
    proc = subprocess.Popen([sys.executable, "-m", "odradek", "up", "-n", "3", "--security", "sasl_ssl",
                             "--dir", str(directory)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        wait_until(lambda: (directory / "cluster.json").exists() or proc.poll() is not None, timeout=120,
                   message="cluster.json of the secure cluster")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        yield json.loads((directory / "cluster.json").read_text())
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _admin_topics(cluster: dict, *args: str) -> subprocess.CompletedProcess[str]:
    return run_odradek("topics", "--bootstrap-server", cluster["bootstrap_servers"].split(",")[0],
                       "--command-config", cluster["command_config"], *args)


def _create(cluster: dict, topic: str, partitions: int = 1) -> None:
    result = _admin_topics(cluster, "--create", "--topic", topic, "--partitions", str(partitions),
                           "--replication-factor", "3")
    assert result.returncode == 0, result.stderr
    security = ClientSecurity.from_properties(cluster["client_java"])
    first = cluster["brokers"][0]["port"]

    def full_isr() -> bool:
        info = partitions_of(("127.0.0.1", first), topic, security=security)
        return info is not None and all(p.leader >= 0 and len(p.isr) == 3 for p in info.values())

    wait_until(full_isr, timeout=TIMEOUT_S, message=f"{topic} fully replicated")


def _produce(cluster: dict, client: dict, topic: str, values: list[bytes]) -> list[KafkaError | int]:
    reports: list[KafkaError | int] = []
    producer = Producer({"bootstrap.servers": cluster["bootstrap_servers"], "acks": "all", **client,
                         "message.timeout.ms": 20000})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, msg: reports.append(err or msg.offset()))
    producer.flush(TIMEOUT_S)
    return reports


def _consume(cluster: dict, client: dict, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster["bootstrap_servers"], "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", **client})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        wait_until(lambda: _poll_into(consumer, got) >= count, timeout=TIMEOUT_S, message=f"{count} records")
    finally:
        consumer.close()
    return got


def _poll_into(consumer: Consumer, got: list[bytes]) -> int:
    msg = consumer.poll(0.5)
    if msg is not None:
        if msg.error():
            raise KafkaException(msg.error())
        got.append(msg.value())
    return len(got)


def test_cluster_json_describes_the_secure_cluster(secure_cluster: dict) -> None:
    assert secure_cluster["security"] == "SASL_SSL"
    client = secure_cluster["client"]
    assert client["security.protocol"] == "SASL_SSL" and client["sasl.mechanism"] == "SCRAM-SHA-512"
    assert client["sasl.username"] == "admin" and Path(client["ssl.ca.location"]).exists()
    assert secure_cluster["client_user"]["sasl.username"] == "client"
    assert "sasl.jaas.config" in secure_cluster["client_java"]
    assert Path(secure_cluster["command_config"]).stat().st_mode & 0o077 == 0


def test_topics_command_config_and_replication_over_sasl_ssl(secure_cluster: dict) -> None:
    _create(secure_cluster, "secure-rf3", partitions=3)
    listed = _admin_topics(secure_cluster, "--list")
    assert listed.returncode == 0 and "secure-rf3" in listed.stdout.split()
    without = run_odradek("topics", "--bootstrap-server", secure_cluster["bootstrap_servers"].split(",")[0],
                          "--list", timeout=60)
    assert without.returncode == 1  # a plaintext client cannot speak to a SASL_SSL listener
    values = [f"v{i}".encode() for i in range(50)]
    reports = _produce(secure_cluster, secure_cluster["client"], "secure-rf3", values)
    assert all(isinstance(r, int) for r in reports) and len(reports) == 50
    assert sorted(_consume(secure_cluster, secure_cluster["client"], "secure-rf3", 50)) == sorted(values)


def test_unprivileged_user_is_refused_until_acls_grant_it(secure_cluster: dict) -> None:
    _create(secure_cluster, "secure-denied")
    reports = _produce(secure_cluster, secure_cluster["client_user"], "secure-denied", [b"x"])
    assert len(reports) == 1 and isinstance(reports[0], KafkaError)
    assert reports[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_kcat_with_cluster_json_settings(secure_cluster: dict) -> None:
    _create(secure_cluster, "secure-kcat")
    settings = [arg for k, v in secure_cluster["client"].items() for arg in ("-X", f"{k}={v}")]
    broker = ["-b", secure_cluster["bootstrap_servers"]]
    produced = subprocess.run(["kcat", *broker, *settings, "-P", "-t", "secure-kcat"], input="a\nb\nc\n",
                              capture_output=True, text=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", *broker, *settings, "-C", "-t", "secure-kcat", "-o", "beginning",
                               "-c", "3", "-e"], capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["a", "b", "c"]


def test_kafka_python_with_cluster_json_settings(secure_cluster: dict) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    _create(secure_cluster, "secure-kafka-python")
    client = secure_cluster["client"]
    common = {"bootstrap_servers": secure_cluster["bootstrap_servers"].split(","),
              "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
              "sasl_plain_username": client["sasl.username"], "sasl_plain_password": client["sasl.password"],
              "ssl_cafile": client["ssl.ca.location"]}
    producer = KafkaProducer(acks="all", **common)
    try:
        producer.send("secure-kafka-python", b"from-kafka-python").get(timeout=TIMEOUT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer("secure-kafka-python", auto_offset_reset="earliest", consumer_timeout_ms=20000,
                             group_id="g-kafka-python", **common)
    try:
        assert next(consumer).value == b"from-kafka-python"  # StopIteration after 20 s without it
    finally:
        consumer.close()


def test_aiokafka_with_cluster_json_settings(secure_cluster: dict) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    _create(secure_cluster, "secure-aiokafka")
    client = secure_cluster["client"]

    async def run() -> bytes:
        common = {"bootstrap_servers": secure_cluster["bootstrap_servers"], "security_protocol": "SASL_SSL",
                  "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": client["sasl.username"],
                  "sasl_plain_password": client["sasl.password"],
                  "ssl_context": create_ssl_context(cafile=client["ssl.ca.location"])}
        producer = AIOKafkaProducer(acks="all", **common)
        await producer.start()
        try:
            await producer.send_and_wait("secure-aiokafka", b"from-aiokafka")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("secure-aiokafka", auto_offset_reset="earliest", group_id="g-aiokafka", **common)
        await consumer.start()
        try:
            msg = await asyncio.wait_for(consumer.getone(), TIMEOUT_S)
        finally:
            await consumer.stop()
        return msg.value

    assert asyncio.run(run()) == b"from-aiokafka"


def test_perf_and_transactions_take_the_command_config(secure_cluster: dict) -> None:
    _create(secure_cluster, "secure-perf")
    first = secure_cluster["bootstrap_servers"].split(",")[0]
    perf = run_odradek("perf", "produce", "--topic", "secure-perf", "--num-records", "200", "--record-size", "100",
                       "--bootstrap-server", first, "--command-config", secure_cluster["command_config"], "--json")
    assert perf.returncode == 0, perf.stderr
    assert json.loads(perf.stdout.strip().splitlines()[-1])["records"] == 200
    listed = run_odradek("transactions", "--bootstrap-server", first, "--command-config",
                         secure_cluster["command_config"], "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split()[:2] == ["TransactionalId", "Coordinator"]


def test_metrics_serve_on_the_secure_cluster(secure_cluster: dict) -> None:
    """`odradek up` turns metrics on: each broker's /metrics (named in cluster.json) serves
    while every Kafka listener wants TLS and SASL, and counts the controller's requests that
    came over the SASL_SSL inter-broker listener."""
    scrapes = [scrape(b["metrics"]) for b in secure_cluster["brokers"]]
    assert sum(s.value("kafka_controller_kafkacontroller_activecontrollercount") for s in scrapes) == 1
    for got in scrapes:
        update_metadata = sum(v for (name, labels), v in got.samples.items()
                              if name == "kafka_network_requestmetrics_requests_total"
                              and dict(labels)["request"] == "UpdateMetadata")
        assert update_metadata >= 1
        assert got.value("kafka_server_sessionexpirelistener_sessionstate", state="CONNECTED") == 1
