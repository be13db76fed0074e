"""CreateAcls/DescribeAcls/DeleteAcls and Describe/AlterUserScramCredentials driven by
confluent-kafka's AdminClient against a real broker with the authorizer on
(super.users=User:ANONYMOUS, so the PLAINTEXT client may manage), checked against ZooKeeper's
contents in Kafka's exact JSON."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kazoo.exceptions import NoNodeError

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.security.scram import ScramClient, ScramCredential, ScramServer
from support import ClusterFactory, run_odradek, wait_until

TIMEOUT = 30
SECURE = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}


@pytest.fixture(scope="module")
def secure_cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[LocalCluster]:
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("secure-admin"))
    try:
        yield factory(1, overrides=SECURE)
    finally:
        factory.stop_all()


def admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def znode(cluster: LocalCluster, path: str) -> dict | None:
    try:
        return json.loads(cluster.zk_client().get(path)[0])
    except NoNodeError:
        return None


def change_nodes(cluster: LocalCluster, path: str) -> list[bytes]:
    zk = cluster.zk_client()
    try:
        return [zk.get(f"{path}/{c}")[0] for c in sorted(zk.get_children(path))]
    except NoNodeError:
        return []


def test_acls_created_described_and_deleted(secure_cluster: LocalCluster) -> None:
    topic, prefix = f"t-{uuid.uuid4().hex[:8]}", f"app-{uuid.uuid4().hex[:6]}-"
    client = admin(secure_cluster)
    read = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)
    deny = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:bob", "127.0.0.1",
                      AclOperation.WRITE, AclPermissionType.DENY)
    prefixed = AclBinding(ResourceType.GROUP, prefix, ResourcePatternType.PREFIXED, "User:alice", "*",
                          AclOperation.ALL, AclPermissionType.ALLOW)
    for future in client.create_acls([read, deny, prefixed], request_timeout=TIMEOUT).values():
        future.result()

    assert znode(secure_cluster, f"/kafka-acl/Topic/{topic}") == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "Write", "host": "127.0.0.1"}]}
    assert znode(secure_cluster, f"/kafka-acl-extended/prefixed/Group/{prefix}") == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "All", "host": "*"}]}
    assert f"TOPIC:{topic}".encode() in change_nodes(secure_cluster, "/kafka-acl-changes")
    assert {"version": 1, "resourceType": "GROUP", "name": prefix, "patternType": "PREFIXED"} in [
        json.loads(n) for n in change_nodes(secure_cluster, "/kafka-acl-extended-changes")]

    topic_filter = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.ANY, None, None,
                                    AclOperation.ANY, AclPermissionType.ANY)
    assert set(client.describe_acls(topic_filter, request_timeout=TIMEOUT).result()) == {read, deny}
    # MATCH: every pattern that applies to a concrete group name.
    match = AclBindingFilter(ResourceType.GROUP, prefix + "x", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert client.describe_acls(match, request_timeout=TIMEOUT).result() == [prefixed]

    only_bob = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:bob", None,
                                AclOperation.ANY, AclPermissionType.ANY)
    deleted = client.delete_acls([only_bob], request_timeout=TIMEOUT)[only_bob].result()
    assert deleted == [deny]
    assert znode(secure_cluster, f"/kafka-acl/Topic/{topic}")["acls"] == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]
    everything_on_topic = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                                           AclOperation.ANY, AclPermissionType.ANY)
    assert client.delete_acls([everything_on_topic], request_timeout=TIMEOUT)[everything_on_topic].result() == [read]
    assert znode(secure_cluster, f"/kafka-acl/Topic/{topic}") is None  # an emptied pattern's znode goes


def test_invalid_acl_refused(secure_cluster: LocalCluster) -> None:
    bad = AclBinding(ResourceType.BROKER, "other-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.ALTER, AclPermissionType.ALLOW)
    client = admin(secure_cluster)
    with pytest.raises(KafkaException) as err:
        client.create_acls([bad], request_timeout=TIMEOUT)[bad].result()
    assert err.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "kafka-cluster" in err.value.args[0].str()


def test_acl_apis_without_authorizer(cluster_factory: ClusterFactory) -> None:
    plain = cluster_factory(1)
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    client = admin(plain)
    with pytest.raises(KafkaException) as err:
        client.create_acls([binding], request_timeout=TIMEOUT)[binding].result()
    assert err.value.args[0].code() == KafkaError.SECURITY_DISABLED
    assert plain.zk_client().exists("/kafka-acl/Topic/t") is None


def test_scram_credentials_altered_and_described(secure_cluster: LocalCluster) -> None:
    client = admin(secure_cluster)
    user = f"alice-{uuid.uuid4().hex[:6]}"
    upsert_512 = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                              b"alice-secret")
    upsert_256 = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                              b"alice-secret")
    client.alter_user_scram_credentials([upsert_512, upsert_256], request_timeout=TIMEOUT)[user].result()

    stored = znode(secure_cluster, f"/config/users/{user}")
    assert stored["version"] == 1 and set(stored["config"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert stored["config"]["SCRAM-SHA-512"].endswith(",iterations=8192")
    # The stored credential verifies the password: run a whole SCRAM exchange against it.
    credential = ScramCredential.from_string(stored["config"]["SCRAM-SHA-512"])
    server = ScramServer("SCRAM-SHA-512", lambda name: credential if name == user else None)
    scram = ScramClient("SCRAM-SHA-512", user, "alice-secret")
    scram.verify_server_final(server.evaluate(scram.final_message(server.evaluate(scram.first_message()))))

    described = client.describe_user_scram_credentials([user], request_timeout=TIMEOUT)[user].result()
    assert {(i.mechanism, i.iterations) for i in described.scram_credential_infos} == {
        (ScramMechanism.SCRAM_SHA_512, 8192), (ScramMechanism.SCRAM_SHA_256, 4096)}

    delete = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)
    client.alter_user_scram_credentials([delete], request_timeout=TIMEOUT)[user].result()
    assert set(znode(secure_cluster, f"/config/users/{user}")["config"]) == {"SCRAM-SHA-512"}
    assert json.dumps({"version": 2, "entity_path": f"users/{user}"}, separators=(",", ":")).encode() in \
        change_nodes(secure_cluster, "/config/changes")


def test_scram_refusals(secure_cluster: LocalCluster) -> None:
    client = admin(secure_cluster)
    few = UserScramCredentialUpsertion("few", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"p")
    with pytest.raises(KafkaException) as err:
        client.alter_user_scram_credentials([few], request_timeout=TIMEOUT)["few"].result()
    assert err.value.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL
    assert secure_cluster.zk_client().exists("/config/users/few") is None

    gone = UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_512)
    with pytest.raises(KafkaException) as err:
        client.alter_user_scram_credentials([gone], request_timeout=TIMEOUT)["nobody"].result()
    assert err.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND

    with pytest.raises(KafkaException) as err:
        client.describe_user_scram_credentials(["nobody"], request_timeout=TIMEOUT)["nobody"].result()
    assert err.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND


def test_cluster_authorization_required(cluster_factory: ClusterFactory) -> None:
    """Alter on the Cluster to create ACLs or credentials, Describe to list them."""
    guarded = cluster_factory(1, overrides={**SECURE, "super.users": "User:nobody",
                                            "allow.everyone.if.no.acl.found": "true"})
    zk = guarded.zk_client()
    deny = {"version": 1, "acls": [
        {"principal": "User:ANONYMOUS", "permissionType": "Deny", "operation": op, "host": "*"}
        for op in ("Alter", "Describe")]}
    zk.create("/kafka-acl/Cluster/kafka-cluster", json.dumps(deny).encode(), makepath=True)
    zk.create("/kafka-acl-changes/acl_changes_", b"CLUSTER:kafka-cluster", sequence=True, makepath=True)
    client = admin(guarded)
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)

    def deletion_refused() -> bool:
        # Writes nothing either way: RESOURCE_NOT_FOUND until the DENY is loaded.
        gone = UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_256)
        try:
            client.alter_user_scram_credentials([gone], request_timeout=TIMEOUT)["nobody"].result()
        except KafkaException as e:
            return e.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        return False

    wait_until(deletion_refused, message="the broker loads the DENY")
    with pytest.raises(KafkaException) as err:
        client.create_acls([binding], request_timeout=TIMEOUT)[binding].result()
    assert err.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert zk.exists("/kafka-acl/Topic/t") is None
    # (librdkafka's describe_acls does not surface DescribeAcls' top-level error: the command does.)
    listed = run_odradek("acls", "--bootstrap-server", guarded.bootstrap_servers, "--list")
    assert listed.returncode == 1 and "Cluster authorization failed." in listed.stderr
    upsert = UserScramCredentialUpsertion("eve", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"p")
    with pytest.raises(KafkaException) as err:
        client.alter_user_scram_credentials([upsert], request_timeout=TIMEOUT)["eve"].result()
    assert err.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert zk.exists("/config/users/eve") is None
