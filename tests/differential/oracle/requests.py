"""Request builders, one per API, over :class:`~oracle.side.Req` (kio's classes at the case's
version): every field any version needs has a default here, so a case names only what its
scenario is about.  Fields a version lacks are dropped by ``build``, so one builder serves
every version of its API."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from oracle.side import Req, now_ms

from odradek.protocol.records import CompressionType, SimpleRecord, build_batch

__all__ = [
    "add_offsets_to_txn", "add_partitions_to_txn", "alter_configs", "alter_partition", "batch", "create_partitions",
    "create_topics", "delete_groups", "delete_records", "delete_topics", "describe_configs", "describe_groups",
    "end_txn", "fetch", "find_coordinator", "heartbeat", "incremental_alter_configs", "init_producer_id",
    "join_group", "leave_group", "list_offsets", "metadata", "offset_commit", "offset_delete", "offset_fetch",
    "offset_for_leader_epoch", "produce", "sync_group", "txn_offset_commit",
]

# Partitions of one topic: {topic: [partition, ...]}.
Partitions = Mapping[str, Sequence[int]]


def batch(*values: bytes, key: bytes | None = b"k", producer_id: int = -1, producer_epoch: int = -1,
          base_sequence: int = -1, transactional: bool = False,
          compression: CompressionType = CompressionType.NONE, timestamp: int | None = None) -> bytes:
    """One record batch (v2) of ``values``, stamped with the run's timestamp."""
    return build_batch([SimpleRecord(v, key=key) for v in values or (b"v",)],
                       timestamp=now_ms() if timestamp is None else timestamp, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=base_sequence,
                       is_transactional=transactional, compression=compression)


def produce(r: Req, topic: str, records: bytes | None, partition: int = 0, acks: int = -1,
            transactional_id: str | None = None, timeout_ms: int = 10_000) -> Any:
    return r.ProduceRequest(transactional_id=transactional_id, acks=acks, timeout=timeout_ms, topic_data=[
        r.TopicProduceData(name=topic, partition_data=[r.PartitionProduceData(index=partition, records=records)])])


def fetch(r: Req, offsets: Mapping[tuple[str, int], int], *, max_wait_ms: int = 0, min_bytes: int = 1,
          max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20, isolation_level: int = 0,
          session_id: int = 0, session_epoch: int = -1, current_leader_epoch: int = -1,
          forgotten: Partitions | None = None, replica_id: int = -1, rack_id: str = "") -> Any:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(r.FetchPartition(
            partition=partition, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=partition_max_bytes))
    return r.FetchRequest(
        cluster_id=None, replica_id=replica_id, max_wait=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=isolation_level, session_id=session_id, session_epoch=session_epoch,
        topics=[r.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        forgotten_topics_data=[r.ForgottenTopic(topic=t, partitions=list(ps)) for t, ps in (forgotten or {}).items()],
        rack_id=rack_id)


def list_offsets(r: Req, topic: str, timestamp: int, partition: int = 0, isolation_level: int = 0,
                 current_leader_epoch: int = -1, replica_id: int = -1) -> Any:
    return r.ListOffsetsRequest(replica_id=replica_id, isolation_level=isolation_level, topics=[
        r.ListOffsetsTopic(name=topic, partitions=[r.ListOffsetsPartition(
            partition_index=partition, current_leader_epoch=current_leader_epoch, timestamp=timestamp,
            max_num_offsets=1)])])


def metadata(r: Req, topics: Iterable[str] | None, *, auto_create: bool = False, topic_ids: Iterable[Any] = (),
             cluster_ops: bool = False, topic_ops: bool = False) -> Any:
    wanted = None if topics is None else [r.MetadataRequestTopic(name=t, topic_id=None) for t in topics] + [
        r.MetadataRequestTopic(name=None, topic_id=i) for i in topic_ids]
    return r.MetadataRequest(topics=wanted, allow_auto_topic_creation=auto_create,
                             include_cluster_authorized_operations=cluster_ops,
                             include_topic_authorized_operations=topic_ops)


def offset_commit(r: Req, group: str, offsets: Mapping[tuple[str, int], int], *, generation: int = -1,
                  member_id: str = "", instance_id: str | None = None, metadata: str | None = "",
                  retention_ms: int = -1) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(r.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata=metadata))
    return r.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=instance_id, retention_time=retention_ms,
        topics=[r.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()])


def offset_fetch(r: Req, group: str, topics: Partitions | None, require_stable: bool = False) -> Any:
    if r.version >= 8:
        wanted = None if topics is None else [
            r.OffsetFetchRequestTopics(name=t, partition_indexes=list(ps)) for t, ps in topics.items()]
        return r.OffsetFetchRequest(groups=[r.OffsetFetchRequestGroup(group_id=group, topics=wanted)],
                                    require_stable=require_stable)
    wanted = None if topics is None else [
        r.OffsetFetchRequestTopic(name=t, partition_indexes=list(ps)) for t, ps in topics.items()]
    return r.OffsetFetchRequest(group_id=group, topics=wanted, require_stable=require_stable)


def find_coordinator(r: Req, key: str, key_type: int = 0) -> Any:
    return r.FindCoordinatorRequest(key=key, key_type=key_type, coordinator_keys=[key])


def join_group(r: Req, group: str, member_id: str = "", *, protocol_type: str = "consumer",
               protocols: Sequence[tuple[str, bytes]] = (("range", b"\x00\x01"),), session_timeout_ms: int = 30_000,
               rebalance_timeout_ms: int = 30_000, instance_id: str | None = None) -> Any:
    return r.JoinGroupRequest(
        group_id=group, session_timeout=session_timeout_ms, rebalance_timeout=rebalance_timeout_ms,
        member_id=member_id, group_instance_id=instance_id, protocol_type=protocol_type,
        protocols=[r.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols], reason=None)


def sync_group(r: Req, group: str, generation: int, member_id: str, assignments: Mapping[str, bytes] | None = None,
               *, protocol_type: str | None = "consumer", protocol_name: str | None = "range",
               instance_id: str | None = None) -> Any:
    return r.SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance_id,
        protocol_type=protocol_type, protocol_name=protocol_name,
        assignments=[r.SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in (assignments or {}).items()])


def heartbeat(r: Req, group: str, generation: int, member_id: str, instance_id: str | None = None) -> Any:
    return r.HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                              group_instance_id=instance_id)


def leave_group(r: Req, group: str, *member_ids: str) -> Any:
    return r.LeaveGroupRequest(group_id=group, member_id=member_ids[0] if member_ids else "",
                               members=[r.MemberIdentity(member_id=m, group_instance_id=None, reason=None)
                                        for m in member_ids])


def describe_groups(r: Req, *groups: str, authorized_operations: bool = False) -> Any:
    return r.DescribeGroupsRequest(groups=list(groups), include_authorized_operations=authorized_operations)


def delete_groups(r: Req, *groups: str) -> Any:
    return r.DeleteGroupsRequest(groups_names=list(groups))


def offset_delete(r: Req, group: str, topics: Partitions) -> Any:
    return r.OffsetDeleteRequest(group_id=group, topics=[
        r.OffsetDeleteRequestTopic(name=t, partitions=[r.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
        for t, ps in topics.items()])


def create_topics(r: Req, *topics: tuple[str, int, int], configs: Mapping[str, str | None] | None = None,
                  assignments: Mapping[int, Sequence[int]] | None = None, validate_only: bool = False,
                  timeout_ms: int = 30_000) -> Any:
    """``topics`` as (name, partitions, replication factor); configs and assignments apply to each."""
    return r.CreateTopicsRequest(timeout=timeout_ms, validate_only=validate_only, topics=[r.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[r.CreatableReplicaAssignment(partition_index=p, broker_ids=list(b))
                     for p, b in (assignments or {}).items()],
        configs=[r.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
        for name, partitions, rf in topics])


def delete_topics(r: Req, *names: str, topic_ids: Sequence[Any] = (), timeout_ms: int = 30_000) -> Any:
    return r.DeleteTopicsRequest(timeout=timeout_ms, topic_names=list(names), topics=[
        r.DeleteTopicState(name=n, topic_id=None) for n in names] + [
        r.DeleteTopicState(name=None, topic_id=i) for i in topic_ids])


def create_partitions(r: Req, topic: str, count: int, assignments: Sequence[Sequence[int]] | None = None,
                      validate_only: bool = False, timeout_ms: int = 30_000) -> Any:
    return r.CreatePartitionsRequest(timeout=timeout_ms, validate_only=validate_only, topics=[r.CreatePartitionsTopic(
        name=topic, count=count, assignments=None if assignments is None else [
            r.CreatePartitionsAssignment(broker_ids=list(b)) for b in assignments])])


def delete_records(r: Req, topic: str, offset: int, partition: int = 0, timeout_ms: int = 10_000) -> Any:
    return r.DeleteRecordsRequest(timeout=timeout_ms, topics=[r.DeleteRecordsTopic(
        name=topic, partitions=[r.DeleteRecordsPartition(partition_index=partition, offset=offset)])])


# Config resource types (Kafka's ConfigResource.Type).
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


def describe_configs(r: Req, resource_type: int, name: str, keys: Sequence[str] | None = None, *,
                     synonyms: bool = False, documentation: bool = False) -> Any:
    return r.DescribeConfigsRequest(
        resources=[r.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                             configuration_keys=None if keys is None else list(keys))],
        include_synonyms=synonyms, include_documentation=documentation)


def alter_configs(r: Req, resource_type: int, name: str, configs: Mapping[str, str | None],
                  validate_only: bool = False) -> Any:
    return r.AlterConfigsRequest(validate_only=validate_only, resources=[r.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[r.AlterableConfig(name=k, value=v) for k, v in configs.items()])])


# IncrementalAlterConfigs operations.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def incremental_alter_configs(r: Req, resource_type: int, name: str, ops: Sequence[tuple[str, int, str | None]],
                              validate_only: bool = False) -> Any:
    return r.IncrementalAlterConfigsRequest(validate_only=validate_only, resources=[r.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[r.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])])


def init_producer_id(r: Req, transactional_id: str | None = None, timeout_ms: int = 60_000,
                     producer_id: int = -1, producer_epoch: int = -1) -> Any:
    return r.InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout=timeout_ms,
                                   producer_id=producer_id, producer_epoch=producer_epoch)


def add_partitions_to_txn(r: Req, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Partitions, verify_only: bool = False) -> Any:
    topics = [r.AddPartitionsToTxnTopic(name=t, partitions=list(ps)) for t, ps in partitions.items()]
    if r.version >= 4:
        return r.AddPartitionsToTxnRequest(transactions=[r.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=verify_only, topics=topics)])
    return r.AddPartitionsToTxnRequest(v3_and_below_transactional_id=transactional_id,
                                       v3_and_below_producer_id=producer_id,
                                       v3_and_below_producer_epoch=producer_epoch, v3_and_below_topics=topics)


def add_offsets_to_txn(r: Req, transactional_id: str, producer_id: int, producer_epoch: int, group: str) -> Any:
    return r.AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                    producer_epoch=producer_epoch, group_id=group)


def end_txn(r: Req, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> Any:
    return r.EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                           producer_epoch=producer_epoch, committed=commit)


def txn_offset_commit(r: Req, transactional_id: str, group: str, producer_id: int, producer_epoch: int,
                      offsets: Mapping[tuple[str, int], int], generation: int = -1, member_id: str = "") -> Any:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(r.TxnOffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""))
    return r.TxnOffsetCommitRequest(
        transactional_id=transactional_id, group_id=group, producer_id=producer_id, producer_epoch=producer_epoch,
        generation_id=generation, member_id=member_id, group_instance_id=None,
        topics=[r.TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()])


def offset_for_leader_epoch(r: Req, topic: str, leader_epoch: int, partition: int = 0,
                            current_leader_epoch: int = -1, replica_id: int = -2) -> Any:
    return r.OffsetForLeaderEpochRequest(replica_id=replica_id, topics=[r.OffsetForLeaderTopic(
        topic=topic, partitions=[r.OffsetForLeaderPartition(
            partition=partition, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch)])])


def alter_partition(r: Req, broker_id: int, broker_epoch: int, topic_id: Any, partition: int, leader_epoch: int,
                    isr: Sequence[int], partition_epoch: int) -> Any:
    return r.AlterPartitionRequest(broker_id=broker_id, broker_epoch=broker_epoch, topics=[r.TopicData(
        topic_id=topic_id, partitions=[r.PartitionData(
            partition_index=partition, leader_epoch=leader_epoch, new_isr=list(isr),
            new_isr_with_epochs=[r.BrokerState(broker_id=b, broker_epoch=-1) for b in isr],
            leader_recovery_state=0, partition_epoch=partition_epoch)])])
