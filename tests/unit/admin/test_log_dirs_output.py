"""kafka-log-dirs.sh's output: the JSON, its error classes, --topic-list, and the order Kafka
2.8's tool gives its hash maps, checked against what that tool printed about a real cluster
(3 brokers, 2 log dirs each, topics "t" and "u.v-w")."""

from __future__ import annotations

import json
import random

from odradek.admin.hash_map_order import (
    java_hash_map_order,
    java_topic_partition_hashcode,
    scala_hash_map_order,
)
from odradek.admin.log_dirs import LogDirInfo, ReplicaLogDirInfo, describe_output
from odradek.broker.group.hashing import java_string_hashcode
from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode

# Printed by Kafka 2.8.2's kafka.admin.LogDirsCommand --describe (broker 1 lists data-b first).
KAFKA_28 = (
    '{"version":1,"brokers":[{"broker":0,"logDirs":[{"logDir":"/tmp/jbodtry/broker-0/data-a","error":null,'
    '"partitions":[{"partition":"u.v-w-1","size":0,"offsetLag":0,"isFuture":false},{"partition":"t-3","size":1161,'
    '"offsetLag":0,"isFuture":false},{"partition":"t-0","size":1161,"offsetLag":0,"isFuture":false}]},{"logDir":'
    '"/tmp/jbodtry/broker-0/data-b","error":null,"partitions":[{"partition":"u.v-w-2","size":0,"offsetLag":0,'
    '"isFuture":false},{"partition":"t-1","size":1161,"offsetLag":0,"isFuture":false},{"partition":"u.v-w-0",'
    '"size":0,"offsetLag":0,"isFuture":false}]}]},{"broker":1,"logDirs":[{"logDir":"/tmp/jbodtry/broker-1/data-b",'
    '"error":null,"partitions":[{"partition":"u.v-w-2","size":0,"offsetLag":0,"isFuture":false},{"partition":"t-2",'
    '"size":1161,"offsetLag":0,"isFuture":false},{"partition":"u.v-w-0","size":0,"offsetLag":0,"isFuture":false}]},'
    '{"logDir":"/tmp/jbodtry/broker-1/data-a","error":null,"partitions":[{"partition":"u.v-w-1","size":0,'
    '"offsetLag":0,"isFuture":false},{"partition":"t-3","size":1161,"offsetLag":0,"isFuture":false},{"partition":'
    '"t-1","size":1161,"offsetLag":0,"isFuture":false}]}]},{"broker":2,"logDirs":[{"logDir":'
    '"/tmp/jbodtry/broker-2/data-a","error":null,"partitions":[{"partition":"u.v-w-2","size":0,"offsetLag":0,'
    '"isFuture":false},{"partition":"t-0","size":1161,"offsetLag":0,"isFuture":false},{"partition":"u.v-w-0",'
    '"size":0,"offsetLag":0,"isFuture":false}]},{"logDir":"/tmp/jbodtry/broker-2/data-b","error":null,'
    '"partitions":[{"partition":"u.v-w-1","size":0,"offsetLag":0,"isFuture":false},{"partition":"t-2","size":1161,'
    '"offsetLag":0,"isFuture":false}]}]}]}')


def topic_partition(name: str) -> TopicPartition:
    topic, _, partition = name.rpartition("-")
    return TopicPartition(topic, int(partition))


def described_as_brokers_answer() -> dict[int, list[LogDirInfo]]:
    """The same cluster as DescribeLogDirs answers (configuration order), shuffled within."""
    shuffle = random.Random(7).shuffle
    described = {}
    for entry in json.loads(KAFKA_28)["brokers"]:
        dirs = []
        for d in sorted(entry["logDirs"], key=lambda d: d["logDir"]):
            replicas = [ReplicaLogDirInfo(topic_partition(p["partition"]), p["size"], p["offsetLag"], p["isFuture"])
                        for p in d["partitions"]]
            shuffle(replicas)
            dirs.append(LogDirInfo(d["logDir"], ErrorCode.none, tuple(replicas)))
        described[entry["broker"]] = dirs
    return dict(sorted(described.items(), reverse=True))


def test_the_output_is_kafka_28s_to_the_byte() -> None:
    assert describe_output([0, 1, 2], described_as_brokers_answer()) == [
        "Received log directory information from brokers 0,1,2", KAFKA_28]


def test_topic_list_filters_partitions_and_an_offline_dir_names_its_java_exception() -> None:
    described = described_as_brokers_answer()
    described[1][1] = LogDirInfo(described[1][1].path, ErrorCode.kafka_storage_error, ())
    moving = ReplicaLogDirInfo(TopicPartition("t", 2), 10, 7, True)
    described[2][0] = LogDirInfo(described[2][0].path, ErrorCode.none, (*described[2][0].replicas, moving))
    header, text = describe_output([2, 1], described, ["t"])
    assert header == "Received log directory information from brokers 2,1"
    out = {b["broker"]: {d["logDir"].rsplit("/", 1)[1]: d for d in b["logDirs"]} for b in json.loads(text)["brokers"]}
    assert out[1]["data-b"] == {"logDir": "/tmp/jbodtry/broker-1/data-b",
                                "error": "org.apache.kafka.common.errors.KafkaStorageException", "partitions": []}
    assert [p["partition"] for p in out[0]["data-b"]["partitions"]] == ["t-1"]
    assert {"partition": "t-2", "size": 10, "offsetLag": 7, "isFuture": True} in out[2]["data-a"]["partitions"]


def test_hash_map_orders() -> None:
    # Java's HashMap(2) of two log dirs: bucket order, insertion order within a bucket.
    dirs = ["/tmp/jbodtry/broker-1/data-a", "/tmp/jbodtry/broker-1/data-b"]
    assert java_hash_map_order(dirs, java_string_hashcode, 2) == list(reversed(dirs))
    # Small integer keys come out ascending from a Scala HashMap; TopicPartition as Java hashes it.
    assert scala_hash_map_order([2, 0, 1], lambda b: b) == [0, 1, 2]
    assert java_topic_partition_hashcode("t", 0) == 31 * 31 + 116
    assert scala_hash_map_order(range(40), lambda b: b) == list(range(40))  # grown past 16 buckets
