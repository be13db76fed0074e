"""``odradek acls`` (kafka-acls.sh) over ZooKeeper and over the Kafka protocol, against a real
broker with the authorizer on (super.users=User:ANONYMOUS); ZooKeeper holds Kafka's exact JSON."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.exceptions import NoNodeError

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from support import ClusterFactory, run_odradek, wait_until

SECURE = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}


@pytest.fixture(scope="module")
def secure_cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[LocalCluster]:
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("acl-cli"))
    try:
        yield factory(1, overrides=SECURE)
    finally:
        factory.stop_all()


@pytest.fixture(params=["zookeeper", "authorizer-properties", "bootstrap"])
def connection(request: pytest.FixtureRequest, secure_cluster: LocalCluster) -> list[str]:
    if request.param == "zookeeper":
        return ["--zookeeper", secure_cluster.zookeeper_connect]
    if request.param == "authorizer-properties":
        return ["--authorizer-properties", f"zookeeper.connect={secure_cluster.zookeeper_connect}"]
    return ["--bootstrap-server", secure_cluster.bootstrap_servers]


def znode(cluster: LocalCluster, path: str) -> dict | None:
    try:
        return json.loads(cluster.zk_client().get(path)[0])
    except NoNodeError:
        return None


def acls(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_odradek("acls", *args, input=input)


def test_add_list_remove(secure_cluster: LocalCluster, connection: list[str]) -> None:
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    added = acls(*connection, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                 "--operation", "Write", "--topic", topic)
    assert added.returncode == 0, added.stderr
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    assert added.stdout.startswith(
        f"Adding ACLs for resource `{pattern}`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW) \n\n")
    assert f"Current ACLs for resource `{pattern}`: \n" in added.stdout
    assert znode(secure_cluster, f"/kafka-acl/Topic/{topic}") == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Write", "host": "*"}]}

    listed = acls(*connection, "--list", "--topic", topic)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == (
        f"Current ACLs for resource `{pattern}`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW) \n\n")

    removed = acls(*connection, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write",
                   "--topic", topic)
    assert removed.returncode == 0, removed.stderr
    assert znode(secure_cluster, f"/kafka-acl/Topic/{topic}")["acls"] == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]
    # No principal: every ACL of the resource; the emptied znode goes.
    removed = acls(*connection, "--remove", "--topic", topic, input="y\n")
    assert removed.returncode == 0, removed.stderr
    assert f"Are you sure you want to delete all ACLs for resource filter `{pattern}`? (y/n)" in removed.stdout
    assert znode(secure_cluster, f"/kafka-acl/Topic/{topic}") is None


def test_producer_consumer_and_prefixed(secure_cluster: LocalCluster, connection: list[str]) -> None:
    prefix, group = f"app-{uuid.uuid4().hex[:6]}-", f"g-{uuid.uuid4().hex[:6]}"
    done = acls(*connection, "--add", "--allow-principal", "User:bob", "--producer", "--idempotent", "--consumer",
                "--topic", prefix, "--group", group, "--resource-pattern-type", "prefixed")
    assert done.returncode == 0, done.stderr
    assert znode(secure_cluster, f"/kafka-acl-extended/prefixed/Topic/{prefix}") == {"version": 1, "acls": [
        {"principal": "User:bob", "permissionType": "Allow", "operation": op, "host": "*"}
        for op in ("Create", "Describe", "Read", "Write")]}
    assert znode(secure_cluster, f"/kafka-acl-extended/prefixed/Group/{group}")["acls"] == [
        {"principal": "User:bob", "permissionType": "Allow", "operation": "Read", "host": "*"}]
    cluster_acls = znode(secure_cluster, "/kafka-acl/Cluster/kafka-cluster")["acls"]
    assert {"principal": "User:bob", "permissionType": "Allow", "operation": "IdempotentWrite", "host": "*"} \
        in cluster_acls

    # --resource-pattern-type match lists what applies to a concrete topic.
    listed = acls(*connection, "--list", "--topic", prefix + "orders", "--resource-pattern-type", "match")
    assert listed.returncode == 0, listed.stderr
    assert f"ResourcePattern(resourceType=TOPIC, name={prefix}, patternType=PREFIXED)" in listed.stdout

    by_principal = acls(*connection, "--list", "--principal", "User:bob")
    assert by_principal.stdout.startswith("ACLs for principal `User:bob`\n")
    assert "User:alice" not in by_principal.stdout

    gone = acls(*connection, "--remove", "--force", "--resource-pattern-type", "prefixed", "--topic", prefix,
                "--group", group)
    assert gone.returncode == 0, gone.stderr
    assert znode(secure_cluster, f"/kafka-acl-extended/prefixed/Topic/{prefix}") is None


def test_deny_host(secure_cluster: LocalCluster) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    done = acls("--zookeeper", secure_cluster.zookeeper_connect, "--add", "--deny-principal", "User:mallory",
                "--deny-host", "127.0.0.1", "--operation", "Describe", "--topic", topic)
    assert done.returncode == 0, done.stderr
    assert znode(secure_cluster, f"/kafka-acl/Topic/{topic}")["acls"] == [
        {"principal": "User:mallory", "permissionType": "Deny", "operation": "Describe", "host": "127.0.0.1"}]
    changes = secure_cluster.zk_client().get_children("/kafka-acl-changes")
    assert f"TOPIC:{topic}".encode() in [secure_cluster.zk_client().get(f"/kafka-acl-changes/{c}")[0]
                                         for c in changes]


@pytest.mark.parametrize(("args", "message"), [
    (["--add", "--list", "--topic", "t"], "exactly one action"),
    (["--add", "--allow-principal", "User:a"], "You must provide at least one resource"),
    (["--add", "--topic", "t"], "--allow-principal, --deny-principal"),
    (["--add", "--allow-principal", "alice", "--topic", "t"], "principalType:principalName"),
    (["--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"],
     "ResourceType GROUP only supports operations"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"], "unknown operation"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "any"],
     "is not valid when adding acls"),
    (["--list", "--producer", "--topic", "t"], "can't be used with option"),
    (["--add", "--allow-principal", "User:a", "--producer"], "With --producer you must specify a --topic"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--idempotent"], "only available if --producer"),
    (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "With --consumer you must specify"),
    (["--add", "--allow-principal", "User:a", "--producer", "--operation", "Read", "--topic", "t"],
     "can't be used with option"),
    (["--add", "--principal", "User:a", "--allow-principal", "User:a", "--topic", "t"], "only available if --list"),
])
def test_bad_flags_write_nothing(secure_cluster: LocalCluster, args: list[str], message: str) -> None:
    before = secure_cluster.zk_client().get_children("/")
    done = acls("--zookeeper", secure_cluster.zookeeper_connect, *args)
    assert done.returncode == 1
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""
    assert secure_cluster.zk_client().get_children("/") == before
    assert secure_cluster.zk_client().exists("/kafka-acl/Topic/t") is None


def test_remove_without_answer_fails(secure_cluster: LocalCluster) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    zk = ["--zookeeper", secure_cluster.zookeeper_connect]
    assert acls(*zk, "--add", "--allow-principal", "User:a", "--topic", topic).returncode == 0
    done = acls(*zk, "--remove", "--topic", topic)  # stdin is /dev/null
    assert done.returncode == 1
    assert "--force" in done.stderr
    assert znode(secure_cluster, f"/kafka-acl/Topic/{topic}") is not None
    refused = acls(*zk, "--remove", "--topic", topic, input="n\n")
    assert refused.returncode == 0
    assert znode(secure_cluster, f"/kafka-acl/Topic/{topic}") is not None


def test_bootstrap_without_authorizer(cluster_factory: ClusterFactory) -> None:
    plain = cluster_factory(1)
    done = acls("--bootstrap-server", plain.bootstrap_servers, "--add", "--allow-principal", "User:a",
                "--topic", "t")
    assert done.returncode == 1
    assert "No Authorizer is configured on the broker" in done.stderr
    assert plain.zk_client().exists("/kafka-acl/Topic/t") is None


def test_acls_take_effect_without_restart(cluster_factory: ClusterFactory) -> None:
    """CLI -> ZooKeeper -> the running broker's ACL cache: a DENY written with ``odradek acls``
    hides a topic from Metadata, removing it shows the topic again."""
    open_cluster = cluster_factory(1, overrides={**SECURE, "super.users": "User:nobody",
                                                 "allow.everyone.if.no.acl.found": "true"})
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": open_cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=30)[topic].result()

    def visible() -> bool:
        return topic in admin.list_topics(timeout=10).topics

    wait_until(visible, message="topic in metadata")
    bootstrap = ["--bootstrap-server", open_cluster.bootstrap_servers]
    deny = acls(*bootstrap, "--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Describe",
                "--topic", topic)
    assert deny.returncode == 0, deny.stderr
    wait_until(lambda: not visible(), message="topic hidden by the DENY")
    removed = acls(*bootstrap, "--remove", "--force", "--topic", topic)
    assert removed.returncode == 0, removed.stderr
    wait_until(visible, message="topic visible again")
