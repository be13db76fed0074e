"""SCRAM users managed with ``odradek configs`` (over ZooKeeper and over the protocol) and ACLs
with ``odradek acls`` log in and act on a running broker's SASL_PLAINTEXT listener without a
restart: a new user can authenticate, a changed password replaces the old one, a deleted
credential stops working, and ``--producer`` ACLs let the user write."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper, free_port
from support import ClusterFactory, run_odradek, wait_until

TIMEOUT = 30


@dataclass
class Cluster:
    cluster: LocalCluster
    plaintext: str
    sasl: str

    def client(self, user: str, password: str) -> dict[str, str]:
        return {"bootstrap.servers": self.sasl, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password}


@pytest.fixture(scope="module")
def secure(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    overrides = {"listeners": listeners, "advertised.listeners": listeners,
                 "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
                 "inter.broker.listener.name": "PLAINTEXT", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                 "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                 "super.users": "User:ANONYMOUS"}
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("scram-management"))
    try:
        cluster = factory(1, ports=[ports["PLAINTEXT"]], overrides=overrides)
        yield Cluster(cluster, f"127.0.0.1:{ports['PLAINTEXT']}", f"127.0.0.1:{ports['SASL_PLAINTEXT']}")
    finally:
        factory.stop_all()


def logs_in(config: dict[str, str]) -> bool:
    try:
        AdminClient(config).list_topics(timeout=5)
    except KafkaException:
        return False
    return True


def test_users_managed_while_running(secure: Cluster) -> None:
    user = f"alice-{uuid.uuid4().hex[:6]}"
    added = run_odradek("configs", "--zookeeper", secure.cluster.zookeeper_connect, "--alter", "--add-config",
                        "SCRAM-SHA-512=[iterations=8192,password=first-secret]", "--entity-type", "users",
                        "--entity-name", user)
    assert added.returncode == 0, added.stderr
    wait_until(lambda: logs_in(secure.client(user, "first-secret")), TIMEOUT, message="the new user logs in")

    changed = run_odradek("configs", "--bootstrap-server", secure.plaintext, "--alter", "--add-config",
                          "SCRAM-SHA-512=[password=second-secret]", "--user", user)
    assert changed.returncode == 0, changed.stderr
    wait_until(lambda: logs_in(secure.client(user, "second-secret")), TIMEOUT, message="the new password works")
    assert not logs_in(secure.client(user, "first-secret"))

    deleted = run_odradek("configs", "--bootstrap-server", secure.plaintext, "--alter", "--delete-config",
                          "SCRAM-SHA-512", "--user", user)
    assert deleted.returncode == 0, deleted.stderr
    wait_until(lambda: not logs_in(secure.client(user, "second-secret")), TIMEOUT,
               message="the deleted credential stops working")


def test_producer_acls_for_a_scram_user(secure: Cluster) -> None:
    user, topic = f"bob-{uuid.uuid4().hex[:6]}", f"orders-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": secure.plaintext})
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
    assert run_odradek("configs", "--bootstrap-server", secure.plaintext, "--alter", "--add-config",
                       "SCRAM-SHA-512=[password=bob-secret]", "--user", user).returncode == 0
    config = secure.client(user, "bob-secret")
    wait_until(lambda: logs_in(config), TIMEOUT, message="bob logs in")

    def produce_one() -> str | None:
        errors: list[str] = []
        with Producer({**config, "message.timeout.ms": "3000"}) as producer:
            producer.produce(topic, b"v", on_delivery=lambda err, _m: err and errors.append(err.name()))
            producer.flush(10)
        return errors[0] if errors else None

    assert produce_one() == "TOPIC_AUTHORIZATION_FAILED"
    granted = run_odradek("acls", "--bootstrap-server", secure.plaintext, "--add", "--allow-principal",
                          f"User:{user}", "--producer", "--topic", topic)
    assert granted.returncode == 0, granted.stderr
    wait_until(lambda: produce_one() is None, TIMEOUT, message="bob may write once the ACLs are in")
