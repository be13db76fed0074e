"""Dynamic broker configs (Kafka's DynamicBrokerConfig, ZooKeeper mode) driven by real admin
clients against real brokers: AlterConfigs and IncrementalAlterConfigs on BROKER resources
(``""`` is the cluster-wide default) write Kafka's JSON to ``/config/brokers/<id|<default>>``
with a ``/config/changes`` notification, DescribeConfigs reports the new values with their
sources, new topic defaults reach topics without overrides (and their logs), keys that need a
restart and bad values are refused, and the stored configs survive a restart.

The cluster-wide default is the resource Kafka's Java AdminClient names ``""``; librdkafka
(confluent-kafka) and kafka-python insist on a broker id, so those requests go over the wire
with Kafka's own request schemas."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kafka.admin import ConfigResource as KafkaPythonConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kio.schema.alter_configs.v2 import request as alter_req
from kio.schema.alter_configs.v2 import response as alter_resp
from kio.schema.describe_configs.v4 import request as describe_req
from kio.schema.describe_configs.v4 import response as describe_resp
from kio.schema.incremental_alter_configs.v1 import request as incremental_req
from kio.schema.incremental_alter_configs.v1 import response as incremental_resp

from odradek.local.cluster import LocalCluster
from odradek.protocol.errors import ErrorCode
from support import (
    ClusterFactory,
    address_of,
    create_topic,
    kafka_request,
    produce,
    unique_topic,
    wait_until,
    zk_json,
)

TIMEOUT = 30
DEFAULT_PATH = "/config/brokers/<default>"
pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")


@pytest.fixture
def client(module_cluster: LocalCluster):
    yield AdminClient({"bootstrap.servers": module_cluster.bootstrap_servers})


BROKER = 4  # Kafka's ConfigResource.Type.BROKER
SET, DELETE = 0, 1


def default_incremental(cluster: LocalCluster, ops: dict[str, tuple[int, str | None]],
                        validate_only: bool = False) -> tuple[ErrorCode, str | None]:
    """IncrementalAlterConfigs of the cluster-wide default (sent to broker 0)."""
    request = incremental_req.IncrementalAlterConfigsRequest(validate_only=validate_only, resources=(
        incremental_req.AlterConfigsResource(resource_type=BROKER, resource_name="", configs=tuple(
            incremental_req.AlterableConfig(name=k, config_operation=op, value=v) for k, (op, v) in ops.items())),))
    [result] = kafka_request(address_of(cluster, 0), request, incremental_resp.IncrementalAlterConfigsResponse).responses
    return result.error_code, result.error_message


def default_alter(cluster: LocalCluster, config: dict[str, str],
                  validate_only: bool = False) -> tuple[ErrorCode, str | None]:
    """AlterConfigs (replace all) of the cluster-wide default (sent to broker 1)."""
    request = alter_req.AlterConfigsRequest(validate_only=validate_only, resources=(
        alter_req.AlterConfigsResource(resource_type=BROKER, resource_name="", configs=tuple(
            alter_req.AlterableConfig(name=k, value=v) for k, v in config.items())),))
    [result] = kafka_request(address_of(cluster, 1), request, alter_resp.AlterConfigsResponse).responses
    return result.error_code, result.error_message


def default_described(cluster: LocalCluster) -> dict[str, tuple[str | None, int, tuple]]:
    """DescribeConfigs of the cluster-wide default: name -> (value, source, synonym sources)."""
    request = describe_req.DescribeConfigsRequest(include_synonyms=True, resources=(
        describe_req.DescribeConfigsResource(resource_type=BROKER, resource_name="", configuration_keys=None),))
    [result] = kafka_request(address_of(cluster, 2), request, describe_resp.DescribeConfigsResponse).results
    assert result.error_code == ErrorCode.none
    return {c.name: (c.value, c.config_source, tuple(s.source for s in c.synonyms)) for c in result.configs}


def describe(client: AdminClient, resource_type: ResourceType, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(resource_type, name)
    return client.describe_configs([resource])[resource].result(timeout=TIMEOUT)


def incremental(client: AdminClient, name: str, **ops: tuple[AlterConfigOpType, str | None]) -> None:
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(key.replace("__", "."), value, incremental_operation=op) for key, (op, value) in ops.items()])
    assert client.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT) is None


def alter_error(client: AdminClient, name: str, config: dict[str, str], *, validate_only: bool = False) -> KafkaError:
    resource = ConfigResource(ResourceType.BROKER, name, set_config=config)
    with pytest.raises(KafkaException) as info:
        client.alter_configs([resource], validate_only=validate_only)[resource].result(timeout=TIMEOUT)
    return info.value.args[0]


def notifications(cluster: LocalCluster) -> list[dict]:
    zk = cluster.zk_client()
    return [zk_json(cluster, f"/config/changes/{name}") for name in sorted(zk.get_children("/config/changes"))]


def shows(client: AdminClient, broker: str, key: str, value: str | None, source: ConfigSource) -> bool:
    entry = describe(client, ResourceType.BROKER, broker)[key]
    return entry.value == value and entry.source == source.value


def test_cluster_default_then_per_broker_value(module_cluster: LocalCluster, client: AdminClient) -> None:
    assert default_incremental(module_cluster, {"log.cleaner.backoff.ms": (SET, "1234")}) == (ErrorCode.none, None)

    assert zk_json(module_cluster, DEFAULT_PATH) == {"version": 1, "config": {"log.cleaner.backoff.ms": "1234"}}
    assert {"version": 2, "entity_path": "brokers/<default>"} in notifications(module_cluster)
    for broker in ("0", "1", "2"):
        wait_until(lambda b=broker: shows(client, b, "log.cleaner.backoff.ms", "1234",
                                          ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                   message=f"broker {broker} to apply the cluster-wide default")
    dynamic_default = int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert default_described(module_cluster) == {
        "log.cleaner.backoff.ms": ("1234", dynamic_default, (dynamic_default, ConfigSource.DEFAULT_CONFIG.value))}

    incremental(client, "1", log__cleaner__backoff__ms=(AlterConfigOpType.SET, "99"))

    assert zk_json(module_cluster, "/config/brokers/1") == {"version": 1, "config": {"log.cleaner.backoff.ms": "99"}}
    assert {"version": 2, "entity_path": "brokers/1"} in notifications(module_cluster)
    wait_until(lambda: shows(client, "1", "log.cleaner.backoff.ms", "99", ConfigSource.DYNAMIC_BROKER_CONFIG),
               message="broker 1 to apply its own value")
    assert not describe(client, ResourceType.BROKER, "1")["log.cleaner.backoff.ms"].is_read_only
    assert shows(client, "0", "log.cleaner.backoff.ms", "1234", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)

    incremental(client, "1", log__cleaner__backoff__ms=(AlterConfigOpType.DELETE, None))
    assert default_incremental(module_cluster, {"log.cleaner.backoff.ms": (DELETE, None)}) == (ErrorCode.none, None)

    assert zk_json(module_cluster, "/config/brokers/1") == {"version": 1, "config": {}}
    wait_until(lambda: shows(client, "1", "log.cleaner.backoff.ms", "15000", ConfigSource.DEFAULT_CONFIG),
               message="broker 1 back on the default")


def test_new_topic_defaults_reach_topics_without_overrides(module_cluster: LocalCluster,
                                                           client: AdminClient) -> None:
    plain, custom = unique_topic("plain"), unique_topic("custom")
    create_topic(module_cluster, plain, 1, 1, assignment=[[0]])
    create_topic(module_cluster, custom, 1, 1, {"segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.2"},
                 assignment=[[0]])
    assert default_alter(module_cluster, {"log.cleaner.min.cleanable.ratio": "0.75",
                                          "log.segment.bytes": "2048"}) == (ErrorCode.none, None)
    try:
        # A topic's configs may be described by any broker: every one must have taken the defaults first.
        for broker in ("0", "1", "2"):
            wait_until(lambda b=broker: shows(client, b, "log.segment.bytes", "2048",
                                              ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                       message=f"broker {broker} to apply the new defaults")
        ratio = describe(client, ResourceType.TOPIC, plain)["min.cleanable.dirty.ratio"]
        assert ratio.value == "0.75" and ratio.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        assert describe(client, ResourceType.TOPIC, custom)["min.cleanable.dirty.ratio"].value == "0.2"
        # The open logs took the new segment size: only the topic without an override rolls.
        later = unique_topic("later")
        create_topic(module_cluster, later, 1, 1, assignment=[[0]])
        for topic in (plain, custom, later):
            produce(module_cluster.bootstrap_servers, topic, [(0, b"k%d" % i, b"v" * 500) for i in range(20)],
                    **{"linger.ms": "0", "batch.num.messages": "1"})
        assert segment_count(module_cluster, plain) > 2
        assert segment_count(module_cluster, later) > 2
        assert segment_count(module_cluster, custom) == 1
    finally:
        assert default_alter(module_cluster, {}) == (ErrorCode.none, None)
    assert zk_json(module_cluster, DEFAULT_PATH) == {"version": 1, "config": {}}
    wait_until(lambda: shows(client, "0", "log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
               message="broker 0 back on the static defaults")


def segment_count(cluster: LocalCluster, topic: str) -> int:
    directory = Path(cluster.brokers[0].config_path.parent / "data" / f"{topic}-0")
    return len(list(directory.glob("*.log")))


def test_keys_that_need_a_restart_and_bad_values_are_refused(module_cluster: LocalCluster,
                                                             client: AdminClient) -> None:
    before = zk_json(module_cluster, "/config/brokers/2")

    fixed = alter_error(client, "2", {"num.partitions": "3", "log.cleaner.threads": "2"})
    assert fixed.code() == KafkaError.INVALID_REQUEST
    assert fixed.str() == ("Invalid config value for resource ConfigResource(type=BROKER, name='2'): "
                           "Cannot update these configs dynamically: Set(num.partitions)")
    bad = alter_error(client, "2", {"log.cleaner.threads": "many"})
    assert bad.code() == KafkaError.INVALID_REQUEST
    assert "Invalid value many for configuration log.cleaner.threads" in bad.str()
    assert default_alter(module_cluster, {"log.cleaner.threads": "3"}) == (
        ErrorCode.invalid_request, "Invalid config value for resource ConfigResource(type=BROKER, name=''): "
        "Log cleaner threads cannot be increased to more than double the current value 1")
    assert default_incremental(module_cluster, {"log.cleaner.threads": (SET, "2")}, validate_only=True) == (
        ErrorCode.none, None)
    assert zk_json(module_cluster, DEFAULT_PATH) in (None, {"version": 1, "config": {}})
    # validate_only checks and writes nothing.
    resource = ConfigResource(ResourceType.BROKER, "2", set_config={"log.cleaner.threads": "2"})
    assert client.alter_configs([resource], validate_only=True)[resource].result(timeout=TIMEOUT) is None
    assert zk_json(module_cluster, "/config/brokers/2") == before
    assert alter_error(client, "2", {"log.retention.ms": "0"}, validate_only=True).code() == KafkaError.INVALID_REQUEST


def test_kafka_python_sees_dynamic_keys_and_sets_a_broker_value(module_cluster: LocalCluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=module_cluster.bootstrap_servers)
    try:
        # raise_on_unknown: the client checks the keys are writable (not read-only) in DescribeConfigs.
        result = admin.alter_configs([KafkaPythonConfigResource(
            ConfigResourceType.BROKER, "2", {"log.cleaner.io.max.bytes.per.second": "1000000.5"})],
            raise_on_unknown=True, incremental=False)
        assert result == {"broker": {"2": "OK"}}
        with pytest.raises(ValueError, match="Unrecognized configs"):
            admin.alter_configs([KafkaPythonConfigResource(ConfigResourceType.BROKER, "2", {"broker.id": "5"})])

        def described() -> dict:
            return admin.describe_configs([KafkaPythonConfigResource(ConfigResourceType.BROKER, "2")])["broker"]["2"]

        wait_until(lambda: "log.cleaner.io.max.bytes.per.second" in described(), message="broker 2's own value")
        entry = described()["log.cleaner.io.max.bytes.per.second"]
        assert (entry["value"], entry["config_source"]) == ("1000000.5", "DYNAMIC_BROKER_CONFIG")
        # IncrementalAlterConfigs DELETE of the key.
        assert admin.reset_configs([KafkaPythonConfigResource(
            ConfigResourceType.BROKER, "2", ["log.cleaner.io.max.bytes.per.second"])]) == {"broker": {"2": "OK"}}
    finally:
        admin.close()
    assert zk_json(module_cluster, "/config/brokers/2") == {"version": 1, "config": {}}


def test_stored_dynamic_configs_are_applied_at_start_up(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(1)
    client = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    request = incremental_req.IncrementalAlterConfigsRequest(validate_only=False, resources=(
        incremental_req.AlterConfigsResource(resource_type=BROKER, resource_name="", configs=(
            incremental_req.AlterableConfig(name="log.cleaner.min.cleanable.ratio", config_operation=SET,
                                            value="0.6"),)),))
    [result] = kafka_request(address_of(cluster, 0), request, incremental_resp.IncrementalAlterConfigsResponse).responses
    assert result.error_code == ErrorCode.none
    incremental(client, "0", log__cleaner__backoff__ms=(AlterConfigOpType.SET, "321"))
    cluster.stop_broker(0)
    cluster.start_broker(0)

    configs = wait_until(lambda: describe(client, ResourceType.BROKER, "0"), message="broker 0 after restart")
    assert configs["log.cleaner.backoff.ms"].value == "321"
    assert configs["log.cleaner.backoff.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert configs["log.cleaner.min.cleanable.ratio"].value == "0.6"
    assert configs["log.cleaner.min.cleanable.ratio"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value


TOPIC = 2  # Kafka's ConfigResource.Type.TOPIC


def _documentation(cluster: LocalCluster, resource_type: int, name: str, include: bool) -> dict[str, str | None]:
    request = describe_req.DescribeConfigsRequest(include_synonyms=False, include_documentation=include, resources=(
        describe_req.DescribeConfigsResource(resource_type=resource_type, resource_name=name, configuration_keys=None),))
    [result] = kafka_request(address_of(cluster, 0), request, describe_resp.DescribeConfigsResponse).results
    assert result.error_code == ErrorCode.none, result.error_message
    return {c.name: c.documentation for c in result.configs}


def test_describe_configs_documents_every_topic_config_when_asked(module_cluster: LocalCluster) -> None:
    """DescribeConfigs v3+ ``include_documentation`` (the Java AdminClient's
    ``includeDocumentation``): a text for every topic config and for the broker keys that are
    topic defaults; none when not asked."""
    topic = unique_topic("docs")
    create_topic(module_cluster, topic, replication_factor=1)
    documented = _documentation(module_cluster, TOPIC, topic, include=True)
    assert "retention.ms" in documented and "cleanup.policy" in documented
    assert [name for name, text in documented.items() if not text] == []
    assert "compact" in (documented["cleanup.policy"] or "")
    assert set(_documentation(module_cluster, TOPIC, topic, include=False).values()) == {None}
    broker = _documentation(module_cluster, BROKER, "0", include=True)
    assert (broker["log.retention.bytes"] or "").startswith("The default of topic config retention.bytes.")
    assert broker["broker.id"] is None
