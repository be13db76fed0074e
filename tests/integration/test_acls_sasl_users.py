"""ACLs for named SASL users, end to end: a SASL_PLAINTEXT cluster made by ``LocalCluster(security=...)``
(``odradek up --security``'s layout: SCRAM-SHA-512 logins, the ACL authorizer on, ``User:admin`` the
super user, ``User:client`` allowed nothing), ACLs granted and taken away with ``odradek acls
--bootstrap-server ... --command-config`` as the admin, and the client user's real clients
(confluent-kafka) seeing each change on the running broker: produce and consume only with
Write and Read, DENY beating ALLOW, prefixed patterns, Metadata filtering, refused admin
requests, transactional ids, and a SCRAM password change through ``odradek configs``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from odradek.local.cluster import ADMIN_PROPERTIES, LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from support import run_odradek, unique_chroot, unique_topic, wait_until

TIMEOUT = 30
pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")


@pytest.fixture(scope="module")
def cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("acl-users") / "cluster", 1,
                           zookeeper_connect=unique_chroot(zookeeper, "acl-users"), security="sasl_plaintext",
                           overrides={"group.initial.rebalance.delay.ms": "0"})
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def acls(cluster: LocalCluster, *args: str) -> None:
    """``odradek acls`` as the admin over the protocol; it must succeed."""
    result = run_odradek("acls", "--bootstrap-server", cluster.bootstrap_servers, "--command-config",
                         str(cluster.dir / ADMIN_PROPERTIES), *args)
    assert result.returncode == 0, result.stderr


def client(cluster: LocalCluster) -> dict[str, str]:
    return {**cluster.client_properties("client"), "log_level": "0"}


def admin_create(cluster: LocalCluster, topic: str) -> None:
    with AdminClient(cluster.client_properties()) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)


def produce_error(cluster: LocalCluster, topic: str, **extra: str) -> int | None:
    """Produce one record as User:client: None when acknowledged, else the error code."""
    reports: list[KafkaError | None] = []
    with Producer({**client(cluster), "acks": "all", "message.timeout.ms": "5000", **extra}) as producer:
        producer.produce(topic, b"v", on_delivery=lambda err, _msg: reports.append(err))
        producer.flush(TIMEOUT)
    assert len(reports) == 1
    return None if reports[0] is None else reports[0].code()


def consume_one(cluster: LocalCluster, topic: str, group: str) -> bytes | KafkaError:
    """The first record of ``topic`` as User:client in ``group``, or the first error."""
    # Nothing committed: every call in the same group reads from the start again.
    consumer = Consumer({**client(cluster), "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        found: list[bytes | KafkaError] = []

        def got() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None:
                found.append(msg.value() if msg.error() is None else msg.error())
            return bool(found)

        wait_until(got, TIMEOUT, message=f"a record or an error from {topic}")
        return found[0]
    finally:
        consumer.close()


def visible_topics(cluster: LocalCluster) -> set[str]:
    with AdminClient(client(cluster)) as admin:
        return set(admin.list_topics(timeout=TIMEOUT).topics)


def test_produce_needs_write_and_consume_needs_read_and_deny_wins(cluster: LocalCluster) -> None:
    topic, group = unique_topic("users"), unique_topic("g")
    admin_create(cluster, topic)
    assert produce_error(cluster, topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    acls(cluster, "--add", "--allow-principal", "User:client", "--producer", "--topic", topic)
    wait_until(lambda: produce_error(cluster, topic) is None, TIMEOUT, message="Write granted without a restart")
    refused = consume_one(cluster, topic, group)
    assert isinstance(refused, KafkaError)
    assert refused.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)
    acls(cluster, "--add", "--allow-principal", "User:client", "--consumer", "--topic", topic, "--group", group)
    wait_until(lambda: consume_one(cluster, topic, group) == b"v", TIMEOUT, message="Read granted")
    # DENY beats the ALLOW the --consumer ACLs gave.
    acls(cluster, "--add", "--deny-principal", "User:client", "--operation", "Read", "--topic", topic)
    denied = wait_until(lambda: _error_code(consume_one(cluster, topic, group)), TIMEOUT,
                        message="DENY Read takes effect")
    assert denied == KafkaError.TOPIC_AUTHORIZATION_FAILED
    acls(cluster, "--remove", "--force", "--deny-principal", "User:client", "--operation", "Read", "--topic", topic)
    wait_until(lambda: consume_one(cluster, topic, group) == b"v", TIMEOUT, message="Read back once DENY is removed")


def _error_code(result: bytes | KafkaError) -> int | None:
    return result.code() if isinstance(result, KafkaError) else None


def test_metadata_lists_only_describable_topics_and_prefixes_apply(cluster: LocalCluster) -> None:
    prefix = unique_topic("pre")
    inside, outside = f"{prefix}-a", unique_topic("other")
    admin_create(cluster, inside)
    admin_create(cluster, outside)
    assert inside not in visible_topics(cluster)
    acls(cluster, "--add", "--allow-principal", "User:client", "--operation", "Describe", "--topic", prefix,
         "--resource-pattern-type", "prefixed")
    wait_until(lambda: inside in visible_topics(cluster), TIMEOUT, message="the prefixed ACL lists the topic")
    assert outside not in visible_topics(cluster)
    with AdminClient(cluster.client_properties()) as admin:  # the super user sees everything
        assert {inside, outside} <= set(admin.list_topics(timeout=TIMEOUT).topics)


def test_admin_requests_refused_without_acls(cluster: LocalCluster) -> None:
    existing = unique_topic("admin-target")
    admin_create(cluster, existing)
    with AdminClient(client(cluster)) as admin:
        fresh = unique_topic("nocreate")
        with pytest.raises(KafkaException) as created:
            admin.create_topics([NewTopic(fresh, 1, 1)], operation_timeout=TIMEOUT)[fresh].result(TIMEOUT)
        assert created.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        with pytest.raises(KafkaException) as deleted:
            admin.delete_topics([existing], operation_timeout=TIMEOUT)[existing].result(TIMEOUT)
        assert deleted.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        resource = ConfigResource(ResourceType.TOPIC, existing, set_config={"retention.ms": "1000"})
        with pytest.raises(KafkaException) as altered:
            admin.alter_configs([resource])[resource].result(TIMEOUT)
        assert altered.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with AdminClient(cluster.client_properties()) as admin:
        (description,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, existing)]).values()
        assert description.result(TIMEOUT)["retention.ms"].value != "1000"


def test_transactional_id_needs_write(cluster: LocalCluster) -> None:
    topic, txn = unique_topic("txn"), unique_topic("tx")
    admin_create(cluster, topic)
    acls(cluster, "--add", "--allow-principal", "User:client", "--producer", "--topic", topic)
    producer = Producer({**client(cluster), "transactional.id": txn})
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    acls(cluster, "--add", "--allow-principal", "User:client", "--producer", "--topic", topic,
         "--transactional-id", txn)

    def committed() -> bool:
        producer = Producer({**client(cluster), "transactional.id": txn})
        try:
            producer.init_transactions(10)
        except KafkaException:
            return False
        producer.begin_transaction()
        producer.produce(topic, b"in-txn")
        producer.commit_transaction(TIMEOUT)
        return True

    wait_until(committed, TIMEOUT, message="a transaction once the transactional id is granted")


def test_scram_password_change_takes_effect_on_the_running_broker(cluster: LocalCluster, tmp_path: Path) -> None:
    user, first, second = unique_topic("u").replace("-", ""), "first-secret", "second-secret"

    def configs(*args: str) -> None:
        result = run_odradek("configs", "--zookeeper", cluster.zookeeper_connect, "--alter", "--entity-type", "users",
                             "--entity-name", user, *args)
        assert result.returncode == 0, result.stderr

    def logs_in(password: str) -> bool:
        config = {"bootstrap.servers": cluster.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
                  "log_level": "0"}
        try:
            with AdminClient(config) as admin:
                admin.list_topics(timeout=2)
        except KafkaException:
            return False
        return True

    configs("--add-config", f"SCRAM-SHA-512=[iterations=4096,password={first}]")
    wait_until(lambda: logs_in(first), TIMEOUT, message="the new user logs in")
    configs("--add-config", f"SCRAM-SHA-512=[password={second}]")
    wait_until(lambda: not logs_in(first), TIMEOUT, message="the old password stops working")
    assert logs_in(second)
    configs("--delete-config", "SCRAM-SHA-512")
    wait_until(lambda: not logs_in(second), TIMEOUT, message="a deleted credential stops working")
