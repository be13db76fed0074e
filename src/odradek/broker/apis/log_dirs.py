"""DescribeLogDirs (key 35) and AlterReplicaLogDirs (key 34), KIP-113 (Kafka's
KafkaApis.handleDescribeLogDirsRequest and handleAlterReplicaLogDirsRequest).

DescribeLogDirs needs Describe on the cluster: without it the answer lists no directory (and,
from v3, carries CLUSTER_AUTHORIZATION_FAILED).  AlterReplicaLogDirs needs Alter on the
cluster: without it every partition is answered CLUSTER_AUTHORIZATION_FAILED.  Versions 1-4
and 1-2: kio has no schema of the v0s (which equal the v1s), and Kafka 4.0 dropped them too.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from odradek.broker.apis.authorization import cluster_authorized
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.common import TopicPartition
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import Operation

if TYPE_CHECKING:
    from odradek.broker.context import LogDirsContext
    from odradek.net.server import Request, Response


@api(ApiKey.DESCRIBE_LOG_DIRS, "DescribeLogDirs", 1, 4)
def handle_describe_log_dirs(broker: LogDirsContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.DESCRIBE_LOG_DIRS, request.api_version)
    if not cluster_authorized(broker, request, Operation.DESCRIBE):
        return respond(request, build(m.DescribeLogDirsResponse, throttle_time=0,
                                      error_code=ErrorCode.cluster_authorization_failed, results=()))
    wanted = None if body.topics is None else {
        TopicPartition(t.topic, p) for t in body.topics for p in t.partitions}
    results = []
    for d in broker.replica_manager.describe_log_dirs(wanted):
        by_topic: dict[str, list[object]] = defaultdict(list)
        for r in d.replicas:
            by_topic[r.topic_partition.topic].append(build(
                m.DescribeLogDirsPartition, partition_index=r.topic_partition.partition, partition_size=r.size,
                offset_lag=r.offset_lag, is_future_key=r.is_future))
        results.append(build(
            m.DescribeLogDirsResult, error_code=d.error, log_dir=d.path, total_bytes=d.total_bytes,
            usable_bytes=d.usable_bytes,
            topics=tuple(build(m.DescribeLogDirsTopic, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())))
    return respond(request, build(m.DescribeLogDirsResponse, throttle_time=0, error_code=ErrorCode.none,
                                  results=tuple(results)))


@api(ApiKey.ALTER_REPLICA_LOG_DIRS, "AlterReplicaLogDirs", 1, 2)
async def handle_alter_replica_log_dirs(broker: LogDirsContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.ALTER_REPLICA_LOG_DIRS, request.api_version)
    # The last directory named for a partition wins (Kafka reads the request into a map).
    partition_dirs = {TopicPartition(t.name, p): d.path for d in body.dirs for t in d.topics for p in t.partitions}
    if cluster_authorized(broker, request, Operation.ALTER):
        async with broker.replica_manager.state_change_lock:
            errors = broker.replica_manager.alter_log_dirs.alter_replica_log_dirs(partition_dirs)
    else:
        errors = dict.fromkeys(partition_dirs, ErrorCode.cluster_authorization_failed)
    by_topic: dict[str, list[object]] = defaultdict(list)
    for tp, error in errors.items():
        by_topic[tp.topic].append(build(m.AlterReplicaLogDirPartitionResult, partition_index=tp.partition,
                                        error_code=error))
    return respond(request, build(m.AlterReplicaLogDirsResponse, throttle_time=0, results=tuple(
        build(m.AlterReplicaLogDirTopicResult, topic_name=t, partitions=tuple(ps)) for t, ps in by_topic.items())))
