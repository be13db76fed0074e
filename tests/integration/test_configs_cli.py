"""``odradek configs`` (kafka-configs.sh) over ZooKeeper and over the Kafka protocol, against a
real broker: SCRAM credentials in Kafka's stored form, topic and broker configs, refusals."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from kazoo.exceptions import NoNodeError

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.security.scram import (
    ScramAuthenticationError,
    ScramClient,
    ScramCredential,
    ScramServer,
)
from support import ClusterFactory, run_odradek

TIMEOUT = 30


@pytest.fixture(scope="module")
def cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("configs-cli"))
    try:
        yield factory(1, overrides={"sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                                                         'required username="a" password="s3cret";'})
    finally:
        factory.stop_all()


@pytest.fixture(params=["zookeeper", "bootstrap"])
def connection(request: pytest.FixtureRequest, cluster: LocalCluster) -> list[str]:
    if request.param == "zookeeper":
        return ["--zookeeper", cluster.zookeeper_connect]
    return ["--bootstrap-server", cluster.bootstrap_servers]


def configs(*args: str) -> subprocess.CompletedProcess[str]:
    return run_odradek("configs", *args)


def znode(cluster: LocalCluster, path: str) -> dict | None:
    try:
        return json.loads(cluster.zk_client().get(path)[0])
    except NoNodeError:
        return None


def authenticates(stored: str, mechanism: str, user: str, password: str) -> bool:
    """A whole SCRAM exchange against the stored credential string."""
    credential = ScramCredential.from_string(stored)
    server = ScramServer(mechanism, lambda name: credential if name == user else None)
    client = ScramClient(mechanism, user, password)
    try:
        client.verify_server_final(server.evaluate(client.final_message(server.evaluate(client.first_message()))))
    except ScramAuthenticationError:
        return False
    return True


def test_scram_credentials(cluster: LocalCluster, connection: list[str]) -> None:
    user = f"alice-{uuid.uuid4().hex[:6]}"
    done = configs(*connection, "--alter", "--add-config",
                   "SCRAM-SHA-512=[iterations=8192,password=alice-secret],SCRAM-SHA-256=[password=other]",
                   "--entity-type", "users", "--entity-name", user)
    assert done.returncode == 0, done.stderr
    via_zk = connection[0] == "--zookeeper"
    assert done.stdout == (f"Completed updating config for entity: user-principal '{user}'.\n" if via_zk
                           else f"Completed updating config for user {user}.\n")
    stored = znode(cluster, f"/config/users/{user}")
    assert stored["version"] == 1 and set(stored["config"]) == {"SCRAM-SHA-512", "SCRAM-SHA-256"}
    assert stored["config"]["SCRAM-SHA-512"].endswith(",iterations=8192")
    assert stored["config"]["SCRAM-SHA-256"].endswith(",iterations=4096")
    assert authenticates(stored["config"]["SCRAM-SHA-512"], "SCRAM-SHA-512", user, "alice-secret")
    assert not authenticates(stored["config"]["SCRAM-SHA-512"], "SCRAM-SHA-512", user, "wrong")
    assert authenticates(stored["config"]["SCRAM-SHA-256"], "SCRAM-SHA-256", user, "other")

    described = configs(*connection, "--describe", "--entity-type", "users", "--entity-name", user)
    assert described.returncode == 0, described.stderr
    if via_zk:
        assert described.stdout.startswith(f"Configs for user-principal '{user}' are SCRAM-SHA-")
    else:
        assert described.stdout == (f"SCRAM credential configs for user-principal '{user}' are "
                                    "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192\n")

    done = configs(*connection, "--alter", "--delete-config", "SCRAM-SHA-256", "--user", user)
    assert done.returncode == 0, done.stderr
    assert set(znode(cluster, f"/config/users/{user}")["config"]) == {"SCRAM-SHA-512"}
    changes = cluster.zk_client().get_children("/config/changes")
    assert json.dumps({"version": 2, "entity_path": f"users/{user}"}, separators=(",", ":")).encode() in [
        cluster.zk_client().get(f"/config/changes/{c}")[0] for c in changes]


def test_scram_refusals(cluster: LocalCluster, connection: list[str]) -> None:
    user = f"bob-{uuid.uuid4().hex[:6]}"
    few = configs(*connection, "--alter", "--add-config", "SCRAM-SHA-512=[iterations=100,password=x]",
                  "--entity-type", "users", "--entity-name", user)
    assert few.returncode == 1 and "less than the minimum 4096" in few.stderr
    bad = configs(*connection, "--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192]",
                  "--entity-type", "users", "--entity-name", user)
    assert bad.returncode == 1 and "Invalid credential property" in bad.stderr
    unknown = configs(*connection, "--alter", "--add-config", "foo=1", "--entity-type", "users", "--entity-name", user)
    assert unknown.returncode == 1 and len(unknown.stderr.strip().splitlines()) == 1 and "foo" in unknown.stderr
    missing = configs(*connection, "--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type", "users",
                      "--entity-name", user)
    assert missing.returncode == 1
    assert cluster.zk_client().exists(f"/config/users/{user}") is None


def test_topic_configs(cluster: LocalCluster, connection: list[str]) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=TIMEOUT)[topic].result()
    done = configs(*connection, "--alter", "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]",
                   "--entity-type", "topics", "--entity-name", topic)
    assert done.returncode == 0, done.stderr
    assert znode(cluster, f"/config/topics/{topic}") == {
        "version": 1, "config": {"retention.ms": "1000", "cleanup.policy": "compact,delete"}}
    described = configs(*connection, "--describe", "--topic", topic)
    assert described.returncode == 0, described.stderr
    if connection[0] == "--zookeeper":
        assert described.stdout == f"Configs for topic '{topic}' are retention.ms=1000,cleanup.policy=compact,delete\n"
    else:
        assert described.stdout.splitlines() == [
            f"Dynamic configs for topic {topic} are:",
            "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy="
            "compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}",
            # Kafka lists broker synonyms from the topic config's own broker key on
            # (ConfigHelper.configSynonyms): log.retention.ms has no value, so none is listed.
            "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}"]
    done = configs(*connection, "--alter", "--delete-config", "retention.ms", "--topic", topic)
    assert done.returncode == 0, done.stderr
    assert znode(cluster, f"/config/topics/{topic}")["config"] == {"cleanup.policy": "compact,delete"}
    missing = configs(*connection, "--alter", "--delete-config", "retention.ms", "--topic", topic)
    assert missing.returncode == 1 and "Invalid config(s): retention.ms" in missing.stderr


def test_broker_configs(cluster: LocalCluster) -> None:
    bootstrap = ["--bootstrap-server", cluster.bootstrap_servers]
    broker_id = str(next(iter(cluster.brokers)))
    done = configs(*bootstrap, "--alter", "--add-config", "log.cleaner.threads=2", "--entity-type", "brokers",
                   "--entity-default")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Completed updating default config for brokers in the cluster.\n"
    assert znode(cluster, "/config/brokers/<default>")["config"] == {"log.cleaner.threads": "2"}
    # --zookeeper refuses while the broker runs, as kafka-configs.sh.
    refused = configs("--zookeeper", cluster.zookeeper_connect, "--alter", "--add-config", "log.cleaner.threads=3",
                      "--entity-type", "brokers", "--entity-name", broker_id)
    assert refused.returncode == 1 and f"broker {broker_id} is running" in refused.stderr
    assert znode(cluster, f"/config/brokers/{broker_id}") is None
    described = configs(*bootstrap, "--describe", "--entity-type", "brokers", "--entity-default")
    assert described.stdout.splitlines()[0] == "Default configs for brokers in the cluster are:"
    assert described.stdout.splitlines()[1].startswith("  log.cleaner.threads=2 sensitive=false synonyms={")


def test_password_configs_are_sensitive(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    resource = ConfigResource(ResourceType.BROKER, str(next(iter(cluster.brokers))))
    entries = admin.describe_configs([resource], request_timeout=TIMEOUT)[resource].result()
    jaas = entries["sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None


@pytest.mark.parametrize(("args", "message"), [
    (["--describe", "--alter", "--entity-type", "topics"], "exactly one action"),
    (["--alter", "--entity-type", "topics", "--add-config", "a=b"], "An entity name must be specified"),
    (["--alter", "--entity-type", "topics", "--entity-name", "t"], "At least one of --add-config"),
    (["--alter", "--entity-type", "topics", "--entity-name", "t", "--add-config", "novalue"], "key=val"),
    (["--describe", "--entity-type", "ips"], "Invalid entity type"),
    (["--describe", "--entity-type", "users", "--entity-type", "topics"], "Only 'users' and 'clients'"),
    (["--describe", "--entity-type", "users", "--entity-name", "a", "--entity-name", "b"], "More entity names"),
    (["--alter", "--entity-type", "users", "--entity-type", "clients", "--entity-name", "a", "--add-config",
      "producer_byte_rate=1"], "An entity name must be specified for every entity type"),
    (["--alter", "--entity-type", "topics", "--entity-default", "--add-config", "a=b"], "--entity-default"),
    (["--alter", "--entity-type", "brokers", "--entity-name", "x", "--add-config", "a=b"], "integer broker id"),
    (["--describe", "--topic", "t", "--add-config", "a=b"], "only be used with --alter"),
])
def test_bad_flags(cluster: LocalCluster, args: list[str], message: str) -> None:
    done = configs("--zookeeper", cluster.zookeeper_connect, *args)
    assert done.returncode == 1
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert cluster.zk_client().exists("/config/topics/t") is None


def test_user_names_are_sanitized_in_znodes(cluster: LocalCluster) -> None:
    user = f"alice-{uuid.uuid4().hex[:6]}@example.com"
    done = configs("--zookeeper", cluster.zookeeper_connect, "--alter", "--add-config",
                   "SCRAM-SHA-256=[password=p]", "--entity-type", "users", "--entity-name", user)
    assert done.returncode == 0, done.stderr
    assert znode(cluster, f"/config/users/{user.replace('@', '%40')}")["config"].keys() == {"SCRAM-SHA-256"}
    described = configs("--bootstrap-server", cluster.bootstrap_servers, "--describe", "--entity-type", "users")
    assert f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=4096" \
        in described.stdout.splitlines()


def test_client_quotas_over_zookeeper(cluster: LocalCluster) -> None:
    """Kafka 2.8's --zookeeper path for quotas: the znodes and notifications the bootstrap path
    writes too, its own output and refusals."""
    zk = ["--zookeeper", cluster.zookeeper_connect]
    client, user = f"app-{uuid.uuid4().hex[:6]}", f"carol-{uuid.uuid4().hex[:6]}"
    done = configs(*zk, "--alter", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients",
                   "--entity-name", client, "--add-config", "producer_byte_rate=2048,request_percentage=12.5")
    assert (done.returncode, done.stdout) == (0, f"Completed updating config for entity: user-principal '{user}', "
                                                 f"client-id '{client}'.\n"), done.stderr
    assert znode(cluster, f"/config/users/{user}/clients/{client}") == {
        "version": 1, "config": {"producer_byte_rate": "2048", "request_percentage": "12.5"}}
    changes = cluster.zk_client().get_children("/config/changes")
    assert json.dumps({"version": 2, "entity_path": f"users/{user}/clients/{client}"}, separators=(",", ":")).encode() \
        in [cluster.zk_client().get(f"/config/changes/{c}")[0] for c in changes]
    done = configs(*zk, "--alter", "--client-defaults", "--add-config", "consumer_byte_rate=4096")
    assert done.stdout == "Completed updating config for entity: default client-id.\n", done.stderr
    described = configs(*zk, "--describe", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients")
    assert described.stdout == f"Configs for user-principal '{user}', client-id '{client}' are " \
                               "producer_byte_rate=2048,request_percentage=12.5\n"
    assert "Configs for default client-id are consumer_byte_rate=4096\n" in configs(
        *zk, "--describe", "--entity-type", "clients").stdout
    # The broker's view, over the Kafka protocol.
    assert configs("--bootstrap-server", cluster.bootstrap_servers, "--describe", "--entity-type", "users",
                   "--entity-name", user, "--entity-type", "clients").stdout == (
        f"Quota configs for user-principal '{user}', client-id '{client}' are producer_byte_rate=2048.0, "
        "request_percentage=12.5\n")
    bad = configs(*zk, "--alter", "--entity-type", "clients", "--entity-name", client, "--add-config",
                  "producer_byte_rate=1.5")
    assert bad.returncode == 1
    assert "Invalid value 1.5 for configuration producer_byte_rate: Not a number of type LONG" in bad.stderr
    assert cluster.zk_client().exists(f"/config/clients/{client}") is None
    done = configs(*zk, "--alter", "--client-defaults", "--delete-config", "consumer_byte_rate")
    assert done.returncode == 0 and znode(cluster, "/config/clients/<default>")["config"] == {}
