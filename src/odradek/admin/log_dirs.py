"""``odradek log-dirs``: Kafka's LogDirsCommand (kafka-log-dirs.sh, 2.8) over the Kafka
protocol, and AlterReplicaLogDirs for the reassignment tool's ``log_dirs``.

``--describe`` asks each broker (every broker of the cluster, or ``--broker-list``) with
DescribeLogDirs and prints Kafka's three parts: "Querying brokers for log directories
information", "Received log directory information from brokers <ids>", then one line of
JSON: per broker its log directories, each with the Java class of its error (null when
healthy) and its partitions (``--topic-list`` filters them) with size, offset lag and whether
the replica is a ``-future`` copy.  Collections come in the order Kafka's tool iterates its
hash maps (:mod:`odradek.admin.hash_map_order`), so the text equals kafka-log-dirs.sh's.
"""

from __future__ import annotations

import json
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from odradek.admin.client import AdminConnection
from odradek.admin.hash_map_order import (
    java_hash_map_order,
    java_topic_partition_hashcode,
    scala_hash_map_order,
)
from odradek.admin.kafka_errors import exception_class
from odradek.broker.group.hashing import java_string_hashcode
from odradek.common import TopicPartition
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import build
from odradek.security.client import ClientSecurity

__all__ = ["LogDirInfo", "LogDirsAdmin", "LogDirsCommandError", "ReplicaLogDirInfo", "TopicPartitionReplica",
           "describe_output", "parse_broker_list"]

_MAX_VERSIONS = {**AdminConnection.max_versions, ApiKey.DESCRIBE_LOG_DIRS: 4, ApiKey.ALTER_REPLICA_LOG_DIRS: 2}
_NAMES = {**AdminConnection.api_names, ApiKey.DESCRIBE_LOG_DIRS: "DescribeLogDirs",
          ApiKey.ALTER_REPLICA_LOG_DIRS: "AlterReplicaLogDirs"}


class LogDirsCommandError(Exception):
    """What the command cannot do, in one line."""


class TopicPartitionReplica(NamedTuple):
    """A partition's replica on one broker (Kafka's TopicPartitionReplica)."""

    topic: str
    partition: int
    broker_id: int


@dataclass(frozen=True, slots=True)
class ReplicaLogDirInfo:
    topic_partition: TopicPartition
    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    path: str
    error: ErrorCode
    replicas: tuple[ReplicaLogDirInfo, ...]
    total_bytes: int = -1
    usable_bytes: int = -1


class _Node(AdminConnection):
    """An AdminConnection that speaks the log-dir APIs too."""

    max_versions = _MAX_VERSIONS
    api_names = _NAMES


class LogDirsAdmin:
    """DescribeLogDirs and AlterReplicaLogDirs, each sent to the broker it is about."""

    def __init__(self, bootstrap: str, *, security: ClientSecurity | None = None) -> None:
        self.bootstrap = bootstrap
        self.security = security

    async def broker_addresses(self) -> dict[int, str]:
        """The cluster's brokers, by id: ``host:port``."""
        async with _Node(self.bootstrap, security=self.security) as main:
            view = await main.metadata([])
        return {b: f"{host}:{port}" for b, (host, port, _) in sorted(view.brokers.items())}

    async def describe_log_dirs(self, broker_ids: Iterable[int]) -> dict[int, list[LogDirInfo]]:
        """Every log directory of each broker.  Raises LogDirsCommandError for a broker not in
        the cluster or one that refuses (no Describe on the cluster)."""
        addresses = await self.broker_addresses()
        described = {}
        for broker_id in broker_ids:
            if broker_id not in addresses:
                raise LogDirsCommandError(f"broker {broker_id} is not in the cluster")
            async with _Node(addresses[broker_id], security=self.security) as node:
                response = await node.request(ApiKey.DESCRIBE_LOG_DIRS, lambda m, v: build(
                    m.DescribeLogDirsRequest, topics=None))
            if getattr(response, "error_code", ErrorCode.none) != ErrorCode.none or not response.results:
                # Kafka's admin client: no directory at all means the cluster authorization failed.
                raise LogDirsCommandError("ClusterAuthorizationException: Cluster authorization failed.")
            described[broker_id] = [LogDirInfo(
                r.log_dir, ErrorCode(r.error_code),
                tuple(ReplicaLogDirInfo(TopicPartition(t.name, p.partition_index), p.partition_size, p.offset_lag,
                                        p.is_future_key) for t in r.topics for p in t.partitions),
                getattr(r, "total_bytes", -1), getattr(r, "usable_bytes", -1)) for r in response.results]
        return described

    async def alter_replica_log_dirs(self, moves: Mapping[TopicPartitionReplica, str]
                                     ) -> dict[TopicPartitionReplica, ErrorCode]:
        """Move each replica to its log directory on its broker (Kafka's
        Admin.alterReplicaLogDirs): the error of each, as its broker answered."""
        by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
        for replica, path in moves.items():
            by_broker.setdefault(replica.broker_id, {}).setdefault(path, {}).setdefault(
                replica.topic, []).append(replica.partition)
        addresses = await self.broker_addresses()
        results: dict[TopicPartitionReplica, ErrorCode] = {}
        for broker_id, dirs in by_broker.items():
            if broker_id not in addresses:
                for replica in moves:
                    if replica.broker_id == broker_id:
                        results[replica] = ErrorCode.broker_not_available
                continue

            def body(m: types.ModuleType, _version: int, dirs: dict[str, dict[str, list[int]]] = dirs) -> Any:
                return build(m.AlterReplicaLogDirsRequest, dirs=tuple(
                    build(m.AlterReplicaLogDir, path=path, topics=tuple(
                        build(m.AlterReplicaLogDirTopic, name=t, partitions=tuple(ps)) for t, ps in topics.items()))
                    for path, topics in dirs.items()))

            async with _Node(addresses[broker_id], security=self.security) as node:
                response = await node.request(ApiKey.ALTER_REPLICA_LOG_DIRS, body)
            for t in response.results:
                for p in t.partitions:
                    results[TopicPartitionReplica(t.topic_name, p.partition_index, broker_id)] = ErrorCode(p.error_code)
        return results


def describe_output(queried: Sequence[int], described: Mapping[int, Sequence[LogDirInfo]],
                    topics: Iterable[str] = ()) -> list[str]:
    """kafka-log-dirs.sh --describe's lines, after the "Querying" one: the brokers asked (as
    --broker-list named them, or the cluster's), then the JSON (partitions of ``topics`` only,
    if any are given)."""
    wanted = set(topics)
    brokers = []
    for broker_id in scala_hash_map_order(described, lambda b: b):
        by_path = {d.path: d for d in described[broker_id]}
        log_dirs = []
        for path in java_hash_map_order(by_path, java_string_hashcode, len(by_path)):
            d = by_path[path]
            replicas = {r.topic_partition: r for r in d.replicas if not wanted or r.topic_partition.topic in wanted}
            log_dirs.append({
                "logDir": path, "error": exception_class(d.error),
                "partitions": [{"partition": f"{tp.topic}-{tp.partition}", "size": replicas[tp].size,
                                "offsetLag": replicas[tp].offset_lag, "isFuture": replicas[tp].is_future}
                               for tp in scala_hash_map_order(replicas, lambda tp: java_topic_partition_hashcode(*tp))]})
        brokers.append({"broker": broker_id, "logDirs": log_dirs})
    return [f"Received log directory information from brokers {','.join(map(str, queried))}",
            json.dumps({"version": 1, "brokers": brokers}, separators=(",", ":"), ensure_ascii=False)]


def parse_broker_list(text: str) -> list[int]:
    """``--broker-list 0,1,2``: ids in the order given, empty items skipped (as Kafka's split)."""
    try:
        return list(dict.fromkeys(int(item) for item in text.split(",") if item))
    except ValueError:
        raise LogDirsCommandError(f"--broker-list expects comma-separated broker ids, got {text!r}") from None

