"""Authorization enforced by real brokers (authorizer.class.name=kafka.security.authorizer.AclAuthorizer)
on ACLs written to ZooKeeper as Kafka's ZkAclStore writes them, driven by confluent-kafka and raw
requests: Metadata lists only describable topics, produce needs Write and consume Read, DENY beats
ALLOW, prefixed patterns and host filters apply, unauthorized CreateTopics/DeleteTopics/AlterConfigs
are refused, control requests need ClusterAction, super users may do anything, and every ACL
change takes effect on the running broker.

The principal under test is User:ANONYMOUS on PLAINTEXT (the brokers' own traffic too, hence
ClusterAction for it on the cluster), so raw requests can be checked as well as clients; named
SASL users are tested in test_acls_sasl_users.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.protocol import control
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import KafkaPrincipal, Operation, PatternType
from support import (
    address_of,
    consume_all,
    create_topic,
    fetch_records,
    kafka_request,
    metadata,
    partition_state,
    produce,
    run_odradek,
    unique_chroot,
    unique_topic,
    wait_until,
)
from support.acls import CLUSTER, AclWriter, allow, client_config, deny, group, topic

TIMEOUT = 30
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
ALICE = KafkaPrincipal("User", "alice")
pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")


@pytest.fixture(scope="module")
def secured(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One broker with the authorizer on and User:admin its only super user.  The broker's own
    requests (ANONYMOUS on PLAINTEXT) are granted ClusterAction before it starts."""
    cluster = LocalCluster(tmp_path_factory.mktemp("acls") / "cluster", 1,
                           zookeeper_connect=unique_chroot(zookeeper, "acls"),
                           overrides={**AUTHORIZER, "super.users": "User:admin", "auto.create.topics.enable": "false"})
    AclWriter(cluster.zk_client()).add(CLUSTER, allow(Operation.CLUSTER_ACTION))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def acls(secured: LocalCluster) -> AclWriter:
    return AclWriter(secured.zk_client())


def topic_error(cluster: LocalCluster, name: str) -> int:
    (t,) = metadata(address_of(cluster, 0), [name]).topics
    return t.error_code


def listed_topics(cluster: LocalCluster) -> set[str]:
    return {t.name for t in metadata(address_of(cluster, 0), None).topics}


def new_topic(cluster: LocalCluster, acls: AclWriter, prefix: str) -> str:
    """A topic created over ZooKeeper; ANONYMOUS may Describe it (so the creation can be awaited)."""
    name = unique_topic(prefix)
    acls.add(topic(name), allow(Operation.DESCRIBE))
    wait_until(lambda: topic_error(cluster, name) != ErrorCode.topic_authorization_failed, timeout=TIMEOUT)
    create_topic(cluster, name, 1, 1)
    return name


def produce_error(cluster: LocalCluster, name: str) -> int | None:
    """The error code of producing one record as ANONYMOUS (None: acknowledged)."""
    reports: list[KafkaError | None] = []
    config = {**client_config(cluster), "acks": "all", "message.timeout.ms": "10000", "retries": "0"}
    with Producer(config) as producer:
        producer.produce(name, b"v", on_delivery=lambda err, _msg: reports.append(err))
        producer.flush(TIMEOUT)
    assert len(reports) == 1
    return None if reports[0] is None else reports[0].code()


def fetch_error(cluster: LocalCluster, name: str) -> int:
    return fetch_records(address_of(cluster, 0), name, 0, 0).error_code


# ----------------------------------------------------------------------------- Metadata


def test_metadata_lists_only_topics_the_principal_may_describe(secured: LocalCluster, acls: AclWriter) -> None:
    visible = new_topic(secured, acls, "visible")
    hidden = new_topic(secured, acls, "hidden")
    acls.set(topic(hidden), [allow(Operation.DESCRIBE, ALICE)])
    wait_until(lambda: hidden not in listed_topics(secured), timeout=TIMEOUT, message="the hidden topic unlisted")
    assert visible in listed_topics(secured)
    # Named explicitly: refused whether it exists or not, so existence does not leak.
    assert topic_error(secured, hidden) == ErrorCode.topic_authorization_failed
    assert topic_error(secured, unique_topic("absent")) == ErrorCode.topic_authorization_failed
    # confluent-kafka's view is the same.
    with AdminClient(client_config(secured)) as admin:
        listed = admin.list_topics(timeout=TIMEOUT).topics
    assert visible in listed and hidden not in listed


def test_metadata_reports_the_operations_allowed_on_each_topic(secured: LocalCluster, acls: AclWriter) -> None:
    # KIP-430, as Kafka's AdminClient asks with describeTopics(includeAuthorizedOperations).
    name = new_topic(secured, acls, "operations")
    acls.add(topic(name), allow(Operation.WRITE))
    describe, write, read = 1 << 8, 1 << 4, 1 << 3  # Kafka's AclOperation codes as bits
    wait_until(lambda: metadata(address_of(secured, 0), [name], operations=True).topics[0]
               .topic_authorized_operations == describe | write, timeout=TIMEOUT, message="Describe and Write")
    acls.add(topic(name), allow(Operation.READ))
    wait_until(lambda: metadata(address_of(secured, 0), [name], operations=True).topics[0]
               .topic_authorized_operations == describe | write | read, timeout=TIMEOUT, message="and Read")
    assert metadata(address_of(secured, 0), [name]).topics[0].topic_authorized_operations == -2147483648


def test_prefixed_patterns_grant_every_topic_with_the_prefix(secured: LocalCluster, acls: AclWriter) -> None:
    prefix = unique_topic("pfx") + "-"
    inside = new_topic(secured, acls, prefix + "a")
    outside = new_topic(secured, acls, "other")
    for name in (inside, outside):
        acls.set(topic(name), [])  # literal Describe gone: only the prefixed ACL below remains
    acls.add(topic(prefix, PatternType.PREFIXED), allow(Operation.WRITE))  # Write implies Describe
    # Literal and prefixed changes are announced (and picked up) apart.
    wait_until(lambda: (lambda listed: inside in listed and outside not in listed)(listed_topics(secured)),
               timeout=TIMEOUT, message="only the prefixed topic listed")
    assert produce_error(secured, inside) is None
    assert topic_error(secured, outside) == ErrorCode.topic_authorization_failed


# ----------------------------------------------------------------------------- produce / consume


def test_produce_needs_write_and_consume_needs_read_without_restart(secured: LocalCluster, acls: AclWriter) -> None:
    name = new_topic(secured, acls, "data")
    group_id = unique_topic("readers")
    assert produce_error(secured, name) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert fetch_error(secured, name) == ErrorCode.topic_authorization_failed

    acls.add(topic(name), allow(Operation.WRITE))
    wait_until(lambda: produce_error(secured, name) is None, timeout=TIMEOUT, message="Write to take effect")
    assert fetch_error(secured, name) == ErrorCode.topic_authorization_failed

    acls.add(topic(name), allow(Operation.READ))
    wait_until(lambda: fetch_error(secured, name) == ErrorCode.none, timeout=TIMEOUT, message="Read to take effect")
    # A consumer group needs Read on the group as well.
    acls.add(group(group_id), allow(Operation.READ))
    consumer = Consumer({**client_config(secured), "group.id": group_id, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([name])
        got = wait_until(lambda: [m for m in consumer.consume(10, 0.5) if m.error() is None], timeout=TIMEOUT,
                         message="records through the group")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert got[0].value() == b"v"  # type: ignore[index]


def test_a_group_without_read_is_refused(secured: LocalCluster, acls: AclWriter) -> None:
    name = new_topic(secured, acls, "grp")
    acls.add(topic(name), allow(Operation.READ))
    consumer = Consumer({**client_config(secured), "group.id": unique_topic("nogroup"),
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([name])

        def refused() -> bool:
            for m in consumer.consume(10, 0.5):
                if m.error() is not None and m.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    return True
            return False

        wait_until(refused, timeout=TIMEOUT, message="GROUP_AUTHORIZATION_FAILED")
    finally:
        consumer.close()


def test_offset_delete_needs_delete_on_the_group_and_read_on_the_topic(secured: LocalCluster, acls: AclWriter
                                                                      ) -> None:
    """OffsetDelete (KIP-496) through ``odradek consumer-groups --delete-offsets``: refused
    without Delete on the group, each topic refused without Read, done once both are there."""
    readable, hidden = new_topic(secured, acls, "offdel"), new_topic(secured, acls, "offdel-hidden")
    name = unique_topic("offdel-group")
    acls.add(group(name), allow(Operation.READ))
    acls.add(topic(readable), allow(Operation.READ))
    acls.add(topic(hidden), allow(Operation.READ))
    committer = Consumer({**client_config(secured), "group.id": name, "enable.auto.commit": False})

    def committed() -> bool:  # once the broker has the new ACLs
        try:
            done = committer.commit(offsets=[TopicPartition(readable, 0, 1), TopicPartition(hidden, 0, 1)],
                                    asynchronous=False)
        except KafkaException:
            return False
        return all(tp.error is None for tp in done)

    try:
        wait_until(committed, timeout=TIMEOUT, message="offsets committed")
    finally:
        committer.close()
    acls.remove(topic(hidden), allow(Operation.READ))

    def delete_offsets() -> str:
        done = run_odradek("consumer-groups", "--bootstrap-server", secured.bootstrap_servers, "--delete-offsets",
                           "--group", name, "--topic", f"{readable}:0", "--topic", f"{hidden}:0")
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert f"Error: Access to '{name}' is not authorized." in delete_offsets()
    acls.add(group(name), allow(Operation.DELETE))
    outputs = [delete_offsets()]
    wait_until(lambda: "Access to" not in outputs[-1] or outputs.append(delete_offsets()), timeout=TIMEOUT,
               message="Delete on the group granted")
    out = outputs[-1]
    rows = {line.split()[0]: line.split(None, 2)[2].rstrip() for line in out.splitlines()[4:]}
    assert out.splitlines()[1] == "Error: Encounter some partition level error, see the follow-up details:"
    assert rows == {readable: "Successful", hidden: "Error: org.apache.kafka.common.errors.TopicAuthorizationException: "
                                                    "Topic authorization failed."}


def test_deny_beats_allow_and_hosts_filter(secured: LocalCluster, acls: AclWriter) -> None:
    name = new_topic(secured, acls, "deny")
    everyone = KafkaPrincipal("User", "*")
    acls.add(topic(name), allow(Operation.WRITE, everyone), deny(Operation.WRITE))
    wait_until(lambda: produce_error(secured, name) == KafkaError.TOPIC_AUTHORIZATION_FAILED, timeout=TIMEOUT)
    acls.remove(topic(name), deny(Operation.WRITE))
    wait_until(lambda: produce_error(secured, name) is None, timeout=TIMEOUT, message="the DENY to be lifted")

    # Host filters: the test client connects from 127.0.0.1.
    acls.set(topic(name), [allow(Operation.DESCRIBE, host="10.9.9.9")])
    wait_until(lambda: topic_error(secured, name) == ErrorCode.topic_authorization_failed, timeout=TIMEOUT)
    acls.set(topic(name), [allow(Operation.DESCRIBE, host="127.0.0.1")])
    wait_until(lambda: topic_error(secured, name) == ErrorCode.none, timeout=TIMEOUT)


# ----------------------------------------------------------------------------- admin requests


def admin_error(future: object) -> int | None:
    try:
        future.result(TIMEOUT)  # type: ignore[attr-defined]
    except KafkaException as e:
        return e.args[0].code()
    return None


def test_unauthorized_create_delete_and_alter_configs_are_refused(secured: LocalCluster, acls: AclWriter) -> None:
    existing = new_topic(secured, acls, "admin")
    wanted = unique_topic("wanted")
    with AdminClient(client_config(secured)) as admin:
        created = admin.create_topics([NewTopic(wanted, 1, 1)], operation_timeout=TIMEOUT)
        assert admin_error(created[wanted]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        deleted = admin.delete_topics([existing], operation_timeout=TIMEOUT)
        assert admin_error(deleted[existing]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        resource = ConfigResource(ResourceType.TOPIC, existing, set_config={"retention.ms": "1000"})
        altered = admin.alter_configs([resource])
        assert admin_error(next(iter(altered.values()))) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        incremental = ConfigResource(ResourceType.TOPIC, existing, incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
        altered = admin.incremental_alter_configs([incremental])
        assert admin_error(next(iter(altered.values()))) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, existing)])
        assert admin_error(next(iter(described.values()))) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        broker_configs = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")])
        assert admin_error(next(iter(broker_configs.values()))) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        assert secured.zk_client().exists(f"/brokers/topics/{wanted}") is None
        assert partition_state(secured, existing, 0) is not None

        # Granted: Create on the cluster, Delete and AlterConfigs on the topic.
        acls.add(CLUSTER, allow(Operation.CREATE))
        acls.add(topic(existing), allow(Operation.DELETE), allow(Operation.ALTER_CONFIGS))
        acls.add(topic(wanted), allow(Operation.DESCRIBE))

        def created_now() -> bool:
            return admin_error(admin.create_topics([NewTopic(wanted, 1, 1)], operation_timeout=TIMEOUT)[wanted]) in (
                None, KafkaError.TOPIC_ALREADY_EXISTS)

        wait_until(created_now, timeout=TIMEOUT, message="Create on the cluster to take effect")
        assert admin_error(next(iter(admin.alter_configs([resource]).values()))) is None
        assert admin_error(admin.delete_topics([existing], operation_timeout=TIMEOUT)[existing]) is None
    acls.remove(CLUSTER, allow(Operation.CREATE))


# ----------------------------------------------------------------------------- control requests


def test_control_requests_need_cluster_action(secured: LocalCluster, acls: AclWriter) -> None:
    address = address_of(secured, 0)
    request = control.StopReplicaRequest(controller_id=0, controller_epoch=1, broker_epoch=-1, topic_states=(
        control.StopReplicaTopicState(topic_name="nothing", partition_states=(
            control.StopReplicaPartitionState(partition_index=0, delete_partition=False),)),))
    acls.add(CLUSTER, deny(Operation.CLUSTER_ACTION, host="127.0.0.1"))
    try:
        def refused() -> bool:
            response = kafka_request(address, request, control.StopReplicaResponse)
            return response.error_code == ErrorCode.cluster_authorization_failed
        wait_until(refused, timeout=TIMEOUT, message="StopReplica refused")
        update = kafka_request(address, control.UpdateMetadataRequest(
            controller_id=0, controller_epoch=1, broker_epoch=-1, topic_states=(), live_brokers=()),
            control.UpdateMetadataResponse)
        assert update.error_code == ErrorCode.cluster_authorization_failed
    finally:
        acls.remove(CLUSTER, deny(Operation.CLUSTER_ACTION, host="127.0.0.1"))


# ----------------------------------------------------------------------------- super users


def test_brokers_replicate_with_acls_when_anonymous_is_a_super_user(zookeeper: EmbeddedZooKeeper,
                                                                     tmp_path: Path) -> None:
    """Three brokers, ACLs only for User:alice (so ANONYMOUS matches none), ANONYMOUS a super
    user: controller requests, replica fetches and acks=all produce all work, even past a DENY."""
    cluster = LocalCluster(tmp_path / "cluster", 3, zookeeper_connect=unique_chroot(zookeeper, "acls3"),
                           overrides={**AUTHORIZER, "super.users": "User:admin;User:ANONYMOUS"})
    writer = AclWriter(cluster.zk_client())
    writer.add(CLUSTER, allow(Operation.ALL, ALICE))
    try:
        cluster.start()
        name = unique_topic("replicated")
        writer.add(topic(name), allow(Operation.READ, ALICE), deny(Operation.ALL, KafkaPrincipal("User", "*")))
        info = create_topic(cluster, name, 2, 3)
        assert all(set(p.isr) == {0, 1, 2} for p in info.values())
        produce(cluster.bootstrap_servers, name, [(p, b"k", b"v%d" % p) for p in (0, 1)])
        assert len(consume_all(cluster.bootstrap_servers, name, 2, 2)) == 2
        # acks=all was acknowledged with the full ISR kept: the followers' fetches were authorized.
        assert all(set(partition_state(cluster, name, p)["isr"]) == {0, 1, 2} for p in (0, 1))  # type: ignore[index]
    finally:
        cluster.stop()


def test_an_unknown_authorizer_class_is_a_clear_startup_error(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("broker.id=0\nzookeeper.connect=127.0.0.1:1\nlisteners=PLAINTEXT://127.0.0.1:0\n"
                      f"log.dirs={tmp_path / 'data'}\nauthorizer.class.name=com.example.MyAuthorizer\n")
    result = run_odradek("broker", "--config", str(config), timeout=60)
    assert result.returncode != 0
    assert "authorizer.class.name=com.example.MyAuthorizer is not supported" in result.stderr
    assert not (tmp_path / "data").exists()
