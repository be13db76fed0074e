"""ZooKeeper paths and JSON codecs (Kafka's ZkData).

Decoding is checked against JSON exactly as Kafka 0.10 .. 3.x brokers and tools write it
(the broker-registration samples are those of Kafka's BrokerEndPointTest); encoding is
checked field by field: names and JSON types must be Kafka's, key order does not matter.
"""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.zk.zk_data import (
    PERSISTENT_PATHS,
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerInfo,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    DeleteTopicsZNode,
    EndPoint,
    LeaderAndIsr,
    LogDirEventNotificationSequenceZNode,
    MalformedZNodeError,
    PreferredReplicaElectionZNode,
    ProducerIdBlockZNode,
    ReassignPartitionsZNode,
    TopicAssignment,
    TopicConfigZNode,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicsZNode,
    TopicZNode,
    desanitize_entity_name,
    sanitize_entity_name,
)


def as_json(data: bytes) -> object:
    return json.loads(data.decode())


# ----------------------------------------------------------------------------- paths


def test_paths_are_kafkas():
    assert ClusterIdZNode.path == "/cluster/id"
    assert ControllerZNode.path == "/controller"
    assert ControllerEpochZNode.path == "/controller_epoch"
    assert BrokerIdsZNode.path == "/brokers/ids"
    assert BrokerIdZNode.path(3) == "/brokers/ids/3"
    assert TopicsZNode.path == "/brokers/topics"
    assert TopicZNode.path("topic_a") == "/brokers/topics/topic_a"
    assert TopicPartitionsZNode.path("topic_a") == "/brokers/topics/topic_a/partitions"
    assert TopicPartitionZNode.path("topic_a", 2) == "/brokers/topics/topic_a/partitions/2"
    assert (TopicPartitionStateZNode.path("topic_a", 2)
            == "/brokers/topics/topic_a/partitions/2/state")
    assert TopicConfigZNode.path("topic_a") == "/config/topics/topic_a"
    assert ConfigEntityChangeNotificationSequenceZNode.path_prefix() == "/config/changes/config_change_"
    assert DeleteTopicsZNode.path == "/admin/delete_topics"
    assert DeleteTopicsTopicZNode.path("topic_c") == "/admin/delete_topics/topic_c"
    assert ReassignPartitionsZNode.path == "/admin/reassign_partitions"
    assert PreferredReplicaElectionZNode.path == "/admin/preferred_replica_election"
    assert ProducerIdBlockZNode.path == "/latest_producer_id_block"


def test_persistent_paths_are_kafkas_in_kafkas_order():
    # ZkData.PersistentZkPaths, then ConfigType.all mapped to /config/<type>.
    assert PERSISTENT_PATHS == (
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes",
        "/admin/delete_topics", "/brokers/seqid", "/isr_change_notification",
        "/latest_producer_id_block", "/log_dir_event_notification",
        "/config/topics", "/config/clients", "/config/users", "/config/brokers", "/config/ips",
    )


# ----------------------------------------------------------------------------- /cluster/id


def test_cluster_id_decodes_kafkas_json():
    assert ClusterIdZNode.decode(b'{"version":"1","id":"ez6TyJ8SR4m4PRwvG4ZLtw"}') == (
        "ez6TyJ8SR4m4PRwvG4ZLtw")


def test_cluster_id_encode_has_string_version():
    assert as_json(ClusterIdZNode.encode("abc")) == {"version": "1", "id": "abc"}


def test_new_cluster_id_is_urlsafe_base64_of_16_bytes_without_padding():
    cluster_id = ClusterIdZNode.new_cluster_id()

    assert len(cluster_id) == 22
    assert "=" not in cluster_id
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16
    assert cluster_id != ClusterIdZNode.new_cluster_id()


# ----------------------------------------------------------------------------- /controller


def test_controller_decodes_kafkas_json():
    data = b'{"version":1,"brokerid":1,"timestamp":"1583223145932"}'

    assert ControllerZNode.decode(data) == 1


def test_controller_encode_field_types():
    obj = as_json(ControllerZNode.encode(2, timestamp_ms=1583223145932))

    assert obj == {"version": 1, "brokerid": 2, "timestamp": "1583223145932"}


def test_controller_encode_default_timestamp_is_now_as_a_string():
    obj = as_json(ControllerZNode.encode(0))

    assert isinstance(obj["timestamp"], str)
    assert int(obj["timestamp"]) > 1_600_000_000_000


def test_controller_epoch_is_a_bare_number():
    assert ControllerEpochZNode.encode(7) == b"7"
    assert ControllerEpochZNode.decode(b"12") == 12


# ----------------------------------------------------------------------------- /brokers/ids


def test_broker_v1_host_and_port_only():
    # BrokerEndPointTest.testFromJsonV1
    data = b'{"jmx_port":-1,"timestamp":"1420485325400","host":"172.16.8.243","version":1,"port":9091}'

    info = BrokerIdZNode.decode(1, data)

    assert info.id == 1
    assert info.endpoints == (EndPoint("PLAINTEXT", "172.16.8.243", 9091, "PLAINTEXT"),)
    assert info.rack is None
    assert info.timestamp_ms == 1420485325400


def test_broker_v2_endpoints():
    # BrokerEndPointTest.testFromJsonV2
    data = b"""{"version":2,"host":"localhost","port":9092,"jmx_port":9999,
               "timestamp":"1416974968782","endpoints":["PLAINTEXT://localhost:9092"]}"""

    info = BrokerIdZNode.decode(1, data)

    assert info.endpoint("PLAINTEXT") == EndPoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT")


def test_broker_v3_rack_and_listener_named_after_protocol():
    # BrokerEndPointTest.testFromJsonV3: no protocol map, so each listener is its protocol.
    data = b"""{"version":3,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",
               "endpoints":["PLAINTEXT://host1:9092", "SSL://host1:9093"],"rack":"dc1"}"""

    info = BrokerIdZNode.decode(1, data)

    assert info.endpoint("SSL") == EndPoint("SSL", "host1", 9093, "SSL")
    assert info.endpoint() == EndPoint("PLAINTEXT", "host1", 9092, "PLAINTEXT")
    assert info.rack == "dc1"
    assert info.timestamp_ms == 2233345666


@pytest.mark.parametrize("rack_field", [',"rack":null', ""])
def test_broker_v4_protocol_map_with_null_or_no_rack(rack_field):
    # BrokerEndPointTest.testFromJsonV4WithNullRack / testFromJsonV4WithNoRack
    data = ('{"version":4,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
            '"endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],'
            '"listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"}'
            + rack_field + "}").encode()

    info = BrokerIdZNode.decode(1, data)

    assert info.endpoint("CLIENT") == EndPoint("CLIENT", "host1", 9092, "SSL")
    assert info.endpoint("REPLICATION") == EndPoint("REPLICATION", "host1", 9093, "PLAINTEXT")
    assert info.rack is None


def test_broker_v4_as_kafka_2x_registers_it():
    data = (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
            b'"endpoints":["PLAINTEXT://kafka-0.kafka-headless:9092"],"jmx_port":-1,'
            b'"host":"kafka-0.kafka-headless","timestamp":"1583223145932","port":9092,"version":4}')

    info = BrokerIdZNode.decode(0, data)

    assert info == BrokerInfo(0, (EndPoint("PLAINTEXT", "kafka-0.kafka-headless", 9092),),
                              None, 1583223145932)


def test_broker_v5_with_features_and_rack():
    # BrokerEndPointTest.testFromJsonV5
    data = b"""{"version":5,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",
      "endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],
      "listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"},
      "rack":"dc1",
      "features": {"feature1": {"min_version": 1, "max_version": 2},
                   "feature2": {"min_version": 2, "max_version": 4}}}"""

    info = BrokerIdZNode.decode(1, data)

    assert info.endpoint("CLIENT") == EndPoint("CLIENT", "host1", 9092, "SSL")
    assert info.rack == "dc1"


def test_broker_future_version_with_unknown_fields():
    # BrokerEndPointTest.testFromJsonFutureVersion
    data = b"""{"foo":"bar","version":100,"host":"localhost","port":9092,"jmx_port":9999,
               "timestamp":"1416974968782","endpoints":["SSL://localhost:9093"]}"""

    assert BrokerIdZNode.decode(1, data).endpoint("SSL") == EndPoint("SSL", "localhost", 9093, "SSL")


@pytest.mark.parametrize(("endpoint", "host"), [
    ("PLAINTEXT://[::1]:9092", "::1"),
    ("PLAINTEXT://[fe80::b1da:69ca:57f7:63d8%3]:9092", "fe80::b1da:69ca:57f7:63d8%3"),
    ("PLAINTEXT://local_host:9092", "local_host"),
    ("PLAINTEXT://MyHostname:9092", "MyHostname"),
])
def test_broker_endpoint_hosts(endpoint, host):
    # BrokerEndPointTest.testEndpointFromUri
    data = json.dumps({"version": 5, "endpoints": [endpoint], "host": None, "port": -1,
                       "jmx_port": -1, "timestamp": "1"}).encode()

    info = BrokerIdZNode.decode(1, data)

    assert info.endpoint().host == host
    assert info.endpoint().port == 9092
    assert info.endpoint().connection_string == endpoint


def test_endpoint_connection_string_brackets_ipv6_and_keeps_empty_host():
    # Kafka's EndPoint.connectionString (Utils.formatAddress)
    assert EndPoint("PLAINTEXT", "::1", 9092).connection_string == "PLAINTEXT://[::1]:9092"
    assert EndPoint("PLAINTEXT", "", 9092).connection_string == "PLAINTEXT://:9092"
    assert EndPoint("SSL", "host1", 9093).connection_string == "SSL://host1:9093"


def test_broker_endpoint_lookup_of_missing_listener():
    info = BrokerInfo(3, (EndPoint("PLAINTEXT", "h", 1),))

    with pytest.raises(KeyError, match="broker 3 has no listener SSL"):
        info.endpoint("SSL")


def test_broker_encode_is_kafkas_v5_json():
    info = BrokerInfo(1, (EndPoint("PLAINTEXT", "10.0.0.5", 9092),
                          EndPoint("INTERNAL", "10.0.0.5", 9093, "PLAINTEXT")),
                      rack="us-east-1a", timestamp_ms=1650000000000)

    obj = as_json(BrokerIdZNode.encode(info))

    assert obj == {
        "version": 5,
        "host": "10.0.0.5",
        "port": 9092,
        "endpoints": ["PLAINTEXT://10.0.0.5:9092", "INTERNAL://10.0.0.5:9093"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "PLAINTEXT"},
        "jmx_port": -1,
        "timestamp": "1650000000000",
        "features": {},
        "rack": "us-east-1a",
    }


def test_broker_encode_without_rack_omits_the_field():
    obj = as_json(BrokerIdZNode.encode(BrokerInfo(1, (EndPoint("PLAINTEXT", "h", 9092),),
                                                  timestamp_ms=5)))

    assert "rack" not in obj
    assert obj["timestamp"] == "5"


def test_broker_encode_top_level_host_port_is_first_plaintext_endpoint():
    # Kafka puts the first PLAINTEXT endpoint there for old clients, whatever comes first.
    info = BrokerInfo(1, (EndPoint("SSL", "secure", 9093, "SSL"), EndPoint("PLAINTEXT", "plain", 9092)))

    obj = as_json(BrokerIdZNode.encode(info))

    assert (obj["host"], obj["port"]) == ("plain", 9092)


def test_broker_encode_without_plaintext_endpoint_has_null_host():
    obj = as_json(BrokerIdZNode.encode(BrokerInfo(1, (EndPoint("SSL", "secure", 9093, "SSL"),))))

    assert (obj["host"], obj["port"]) == (None, -1)


def test_broker_encode_ipv6_endpoint_in_brackets():
    obj = as_json(BrokerIdZNode.encode(BrokerInfo(1, (EndPoint("PLAINTEXT", "::1", 9092),))))

    assert obj["endpoints"] == ["PLAINTEXT://[::1]:9092"]
    assert obj["host"] == "::1"


hosts = st.one_of(
    st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True),
    st.ip_addresses().map(str),
)
endpoint_lists = st.lists(
    st.tuples(st.from_regex(r"[A-Z][A-Z_]{0,10}", fullmatch=True), hosts, st.integers(0, 65535),
              st.sampled_from(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])),
    min_size=1, max_size=4, unique_by=lambda t: t[0],
).map(lambda items: tuple(EndPoint(*item) for item in items))


@given(st.integers(0, 2**31 - 1), endpoint_lists, st.one_of(st.none(), st.text(min_size=1)),
       st.integers(1, 2**62))
def test_broker_round_trip(broker_id, endpoints, rack, timestamp):
    info = BrokerInfo(broker_id, endpoints, rack, timestamp)

    assert BrokerIdZNode.decode(broker_id, BrokerIdZNode.encode(info)) == info


# ----------------------------------------------------------------------------- /brokers/topics/<t>


def test_topic_v1_partitions_only():
    # Kafka 0.8 .. 2.3 (kafka-topics.sh --create of a 3-partition topic on 3 brokers)
    data = b'{"version":1,"partitions":{"2":[0,1,2],"1":[2,0,1],"0":[1,2,0]}}'

    assignment = TopicZNode.decode(data)

    assert assignment.partitions == {0: [1, 2, 0], 1: [2, 0, 1], 2: [0, 1, 2]}
    assert assignment.topic_id is None
    assert assignment.adding_replicas == {}
    assert assignment.removing_replicas == {}


def test_topic_v2_with_reassignment_in_progress():
    # Kafka 2.4+: adding/removing replicas of an ongoing reassignment (KIP-455)
    data = (b'{"version":2,"partitions":{"0":[1,2,3],"1":[2,3]},'
            b'"adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]}}')

    assignment = TopicZNode.decode(data)

    assert assignment.partitions == {0: [1, 2, 3], 1: [2, 3]}
    assert assignment.adding_replicas == {0: [3]}
    assert assignment.removing_replicas == {0: [1]}


def test_topic_v3_with_topic_id():
    # Kafka 2.8 / 3.x
    data = (b'{"partitions":{"0":[0,1]},"topic_id":"5fUmp5ldTWqcv5j6Vx_EwA",'
            b'"adding_replicas":{},"removing_replicas":{},"version":3}')

    assignment = TopicZNode.decode(data)

    assert assignment.partitions == {0: [0, 1]}
    assert assignment.topic_id == "5fUmp5ldTWqcv5j6Vx_EwA"


def test_topic_encode_with_topic_id_is_version_3():
    obj = as_json(TopicZNode.encode(TopicAssignment({1: [2, 0, 1], 0: [1, 2, 0]},
                                                    topic_id="5fUmp5ldTWqcv5j6Vx_EwA")))

    assert obj == {
        "version": 3,
        "partitions": {"0": [1, 2, 0], "1": [2, 0, 1]},
        "adding_replicas": {},
        "removing_replicas": {},
        "topic_id": "5fUmp5ldTWqcv5j6Vx_EwA",
    }


def test_topic_encode_without_topic_id_has_no_topic_id_field():
    obj = as_json(TopicZNode.encode(TopicAssignment({0: [0]})))

    assert "topic_id" not in obj
    assert obj["version"] == 2
    assert obj["partitions"] == {"0": [0]}


def test_topic_encode_keys_are_strings_in_numeric_order():
    text = TopicZNode.encode(TopicAssignment({10: [1], 2: [0], 1: [2]})).decode()

    assert '"partitions":{"1":[2],"2":[0],"10":[1]}' in text


def test_new_topic_id_is_a_kafka_uuid_string():
    topic_id = TopicZNode.new_topic_id()

    assert len(topic_id) == 22
    assert len(base64.urlsafe_b64decode(topic_id + "==")) == 16


replica_maps = st.dictionaries(st.integers(0, 10_000),
                               st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=5),
                               max_size=20)


@given(replica_maps, st.one_of(st.none(), st.just("5fUmp5ldTWqcv5j6Vx_EwA")), replica_maps,
       replica_maps)
def test_topic_round_trip(partitions, topic_id, adding, removing):
    original = TopicAssignment(partitions, topic_id, adding, removing)

    decoded = TopicZNode.decode(TopicZNode.encode(original))

    assert decoded == original


# ----------------------------------------------------------------------------- partition state

EXAMPLE_STATE = b'{"controller_epoch":6,"leader":6,"version":1,"leader_epoch":24,"isr":[7,6]}'


def test_partition_state_decodes_kafka_json():
    state = TopicPartitionStateZNode.decode(EXAMPLE_STATE, zk_version=3)

    assert state == LeaderAndIsr(leader=6, leader_epoch=24, isr=(7, 6), controller_epoch=6,
                                 zk_version=3)


def test_partition_state_encode_matches_kafka_json():
    state = LeaderAndIsr(leader=6, leader_epoch=24, isr=(7, 6), controller_epoch=6, zk_version=3)

    assert as_json(TopicPartitionStateZNode.encode(state)) == as_json(EXAMPLE_STATE)


def test_partition_state_ignores_kafka_3_leader_recovery_state():
    data = b'{"version":1,"leader":-1,"leader_epoch":3,"isr":[1],"controller_epoch":2,"leader_recovery_state":1}'

    state = TopicPartitionStateZNode.decode(data, zk_version=0)

    assert (state.leader, state.leader_epoch, state.isr) == (LeaderAndIsr.NO_LEADER, 3, (1,))


@given(st.integers(-2, 2**31 - 1), st.integers(0, 2**31 - 1),
       st.lists(st.integers(0, 2**31 - 1), max_size=6).map(tuple), st.integers(0, 2**31 - 1),
       st.integers(0, 2**31 - 1))
def test_partition_state_round_trip_keeps_isr_order(leader, leader_epoch, isr, controller_epoch,
                                                    zk_version):
    state = LeaderAndIsr(leader, leader_epoch, isr, controller_epoch, zk_version)

    assert TopicPartitionStateZNode.decode(TopicPartitionStateZNode.encode(state), zk_version) == state


def test_new_leader_and_isr_bumps_the_leader_epoch_only():
    state = LeaderAndIsr(leader=6, leader_epoch=24, isr=(7, 6), controller_epoch=6, zk_version=3)

    moved = state.new_leader_and_isr(7, [7])
    shrunk = state.new_isr([6])

    assert moved == LeaderAndIsr(7, 25, (7,), 6, 3)
    assert shrunk == LeaderAndIsr(6, 25, (6,), 6, 3)


# ----------------------------------------------------------------------------- /config


def test_topic_config_decodes_kafkas_json():
    data = b'{"version":1,"config":{"retention.ms":"3600000","cleanup.policy":"compact"}}'

    assert TopicConfigZNode.decode(data) == {"retention.ms": "3600000", "cleanup.policy": "compact"}


@pytest.mark.parametrize("data", [b'{"version":1,"config":{}}', b"", None])
def test_topic_config_empty(data):
    assert TopicConfigZNode.decode(data) == {}


def test_topic_config_encode_values_are_strings():
    # kafka-topics.sh --create without --config writes {"version":1,"config":{}}.
    assert as_json(TopicConfigZNode.encode({})) == {"version": 1, "config": {}}
    assert as_json(TopicConfigZNode.encode({"retention.ms": 1000, "min.insync.replicas": "2"})) == {
        "version": 1, "config": {"retention.ms": "1000", "min.insync.replicas": "2"}}


def test_config_change_notification():
    encoded = ConfigEntityChangeNotificationSequenceZNode.encode("topics", "topic_a")

    assert as_json(encoded) == {"version": 2, "entity_path": "topics/topic_a"}
    assert ConfigEntityChangeNotificationSequenceZNode.decode(
        b'{"version":2,"entity_path":"users/alice/clients/app"}') == ("users", "alice/clients/app")


# ----------------------------------------------------------------------------- /admin


def test_reassign_partitions_decodes_kafka_tool_json_with_log_dirs():
    # kafka-reassign-partitions.sh --execute writes log_dirs too; they are not ours to use.
    data = (b'{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2,3],'
            b'"log_dirs":["any","any","any"]},{"topic":"bar","partition":0,"replicas":[3]}]}')

    assert ReassignPartitionsZNode.decode(data) == {("foo", 1): [1, 2, 3], ("bar", 0): [3]}


def test_reassign_partitions_encode():
    obj = as_json(ReassignPartitionsZNode.encode({("foo", 1): [1, 2, 3], ("bar", 0): [3]}))

    assert obj["version"] == 1
    assert sorted(obj["partitions"], key=lambda e: (e["topic"], e["partition"])) == [
        {"topic": "bar", "partition": 0, "replicas": [3]},
        {"topic": "foo", "partition": 1, "replicas": [1, 2, 3]},
    ]


def test_preferred_replica_election():
    data = b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":2}]}'

    assert PreferredReplicaElectionZNode.decode(data) == {("t", 0), ("u", 2)}
    obj = as_json(PreferredReplicaElectionZNode.encode({("u", 2), ("t", 0)}))
    assert obj == {"version": 1, "partitions": [{"topic": "t", "partition": 0},
                                                 {"topic": "u", "partition": 2}]}


def test_producer_id_block_strings_for_block_bounds():
    data = b'{"version":1,"broker":0,"block_start":"1000","block_end":"1999"}'

    assert ProducerIdBlockZNode.decode(data) == (0, 1000, 1999)
    assert ProducerIdBlockZNode.decode(None) is None
    assert as_json(ProducerIdBlockZNode.encode(2, 0, 999)) == {
        "version": 1, "broker": 2, "block_start": "0", "block_end": "999"}


def test_entity_names_sanitized_as_kafka() -> None:
    assert sanitize_entity_name("alice") == "alice"
    assert sanitize_entity_name("CN=alice,O=odradek") == "CN%3Dalice%2CO%3Dodradek"
    assert sanitize_entity_name("a b*c~d/é") == "a%20b%2Ac%7Ed%2F%C3%A9"
    assert desanitize_entity_name(sanitize_entity_name("a b*c~d/é@x")) == "a b*c~d/é@x"


def test_log_dir_event_notification_as_kafka_writes_it() -> None:
    assert LogDirEventNotificationSequenceZNode.encode(3) == b'{"version":1,"broker":3,"event":1}'
    assert LogDirEventNotificationSequenceZNode.decode(b'{"version":1,"broker":3,"event":1}') == 3
    assert LogDirEventNotificationSequenceZNode.decode(b"") is None
    assert LogDirEventNotificationSequenceZNode.path_prefix() == "/log_dir_event_notification/log_dir_event_"
    assert LogDirEventNotificationSequenceZNode.path("log_dir_event_0000000004") == \
        "/log_dir_event_notification/log_dir_event_0000000004"


# Content a foreign tool could leave (fuzz/znode_json.py found each kind): every decoder
# refuses it with MalformedZNodeError (a ValueError), never a KeyError, TypeError,
# AttributeError, OverflowError or RecursionError, and never returns mistyped values.
@pytest.mark.parametrize(("decode", "data"), [
    (ClusterIdZNode.decode, b""),
    (ClusterIdZNode.decode, b'{"id":7}'),
    (ControllerZNode.decode, b"true"),
    (ControllerZNode.decode, b"[1]"),
    (lambda data: BrokerIdZNode.decode(1, data), b'{"endpoints":[1]}'),
    (lambda data: BrokerIdZNode.decode(1, data), b'{"endpoints":["L://h:1"],"rack":2}'),
    (TopicZNode.decode, b'{"partitions":{"0":"abc"}}'),
    (TopicZNode.decode, b'{"partitions":{},"topic_id":5}'),
    (ConfigEntityChangeNotificationSequenceZNode.decode, b'{"entity_path":[]}'),
    (LogDirEventNotificationSequenceZNode.decode, b'{"broker":1e999}'),
    (ProducerIdBlockZNode.decode, b"[1]"),
    (ReassignPartitionsZNode.decode, b'{"partitions":[{"topic":1,"partition":0,"replicas":[1]}]}'),
    (lambda data: TopicPartitionStateZNode.decode(data, 0), b"[" * 100_000),
])
def test_malformed_znodes_are_one_value_error(decode, data):
    with pytest.raises(MalformedZNodeError):
        decode(data)
