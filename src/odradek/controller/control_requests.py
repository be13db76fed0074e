"""Build the controller's LeaderAndIsr / UpdateMetadata / StopReplica requests from its
model, and read the errors out of the brokers' responses."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping

from odradek.common import TopicPartition
from odradek.controller.context import ReplicaAssignment
from odradek.protocol import control
from odradek.security.protocols import SECURITY_PROTOCOL_IDS
from odradek.zk.zk_data import BrokerInfo, LeaderAndIsr, topic_id_to_uuid

__all__ = [
    "build_leader_and_isr_request",
    "build_stop_replica_request",
    "build_update_metadata_request",
    "leader_and_isr_response_errors",
    "stop_replica_response_errors",
]

def _by_topic(items: Iterable[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = defaultdict(list)
    for tp in items:
        grouped[tp.topic].append(tp.partition)
    return grouped


def build_leader_and_isr_request(
    *, controller_id: int, controller_epoch: int, broker_epoch: int,
    partitions: Mapping[TopicPartition, tuple[LeaderAndIsr, ReplicaAssignment, bool]],
    topic_ids: Mapping[str, str], live_leaders: Iterable[BrokerInfo], listener: str,
) -> control.LeaderAndIsrRequest:
    topic_states = []
    for topic, parts in sorted(_by_topic(partitions).items()):
        states = []
        for p in sorted(parts):
            state, assignment, is_new = partitions[TopicPartition(topic, p)]
            states.append(control.LeaderAndIsrPartitionState(
                partition_index=p, controller_epoch=state.controller_epoch, leader=state.leader,
                leader_epoch=state.leader_epoch, isr=tuple(state.isr), zk_version=state.zk_version,
                replicas=tuple(assignment.replicas), adding_replicas=tuple(assignment.adding_replicas),
                removing_replicas=tuple(assignment.removing_replicas), is_new=is_new))
        topic_states.append(control.LeaderAndIsrTopicState(
            topic_name=topic, topic_id=topic_id_to_uuid(topic_ids.get(topic)), partition_states=tuple(states)))
    leaders = []
    for info in live_leaders:
        ep = info.endpoint(listener) if any(e.listener == listener for e in info.endpoints) else info.endpoint()
        leaders.append(control.LeaderAndIsrLiveLeader(broker_id=info.id, host_name=ep.host, port=ep.port))
    return control.LeaderAndIsrRequest(
        controller_id=controller_id, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
        topic_states=tuple(topic_states), live_leaders=tuple(leaders))


def build_update_metadata_request(
    *, controller_id: int, controller_epoch: int, broker_epoch: int,
    partitions: Mapping[TopicPartition, tuple[LeaderAndIsr, tuple[int, ...], tuple[int, ...]]],
    topic_ids: Mapping[str, str], live_brokers: Iterable[BrokerInfo],
) -> control.UpdateMetadataRequest:
    topic_states = []
    for topic, parts in sorted(_by_topic(partitions).items()):
        states = []
        for p in sorted(parts):
            state, replicas, offline = partitions[TopicPartition(topic, p)]
            states.append(control.UpdateMetadataPartitionState(
                partition_index=p, controller_epoch=state.controller_epoch, leader=state.leader,
                leader_epoch=state.leader_epoch, isr=tuple(state.isr), zk_version=state.zk_version,
                replicas=tuple(replicas), offline_replicas=tuple(offline)))
        topic_states.append(control.UpdateMetadataTopicState(
            topic_name=topic, topic_id=topic_id_to_uuid(topic_ids.get(topic)), partition_states=tuple(states)))
    brokers = tuple(
        control.UpdateMetadataBroker(
            id=info.id,
            endpoints=tuple(control.UpdateMetadataEndpoint(
                port=e.port, host=e.host, listener=e.listener,
                security_protocol=SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0)) for e in info.endpoints),
            rack=info.rack)
        for info in sorted(live_brokers, key=lambda b: b.id))
    return control.UpdateMetadataRequest(
        controller_id=controller_id, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
        topic_states=tuple(topic_states), live_brokers=brokers)


def build_stop_replica_request(
    *, controller_id: int, controller_epoch: int, broker_epoch: int,
    partitions: Mapping[TopicPartition, tuple[int, bool]],
) -> control.StopReplicaRequest:
    topic_states = tuple(
        control.StopReplicaTopicState(
            topic_name=topic,
            partition_states=tuple(
                control.StopReplicaPartitionState(
                    partition_index=p, leader_epoch=partitions[TopicPartition(topic, p)][0],
                    delete_partition=partitions[TopicPartition(topic, p)][1])
                for p in sorted(parts)))
        for topic, parts in sorted(_by_topic(partitions).items()))
    return control.StopReplicaRequest(controller_id=controller_id, controller_epoch=controller_epoch,
                                      broker_epoch=broker_epoch, topic_states=topic_states)


def leader_and_isr_response_errors(response: control.LeaderAndIsrResponse, topic_ids: Mapping[str, str]
                                   ) -> tuple[int, dict[tuple[str, int], int]]:
    names = {topic_id_to_uuid(tid): topic for topic, tid in topic_ids.items()}
    errors: dict[tuple[str, int], int] = {}
    for topic in response.topics:
        name = names.get(topic.topic_id or uuid.UUID(int=0), str(topic.topic_id))
        for p in topic.partition_errors:
            errors[(name, p.partition_index)] = int(p.error_code)
    return int(response.error_code), errors


def stop_replica_response_errors(response: control.StopReplicaResponse) -> tuple[int, dict[tuple[str, int], int]]:
    return int(response.error_code), {
        (p.topic_name, p.partition_index): int(p.error_code) for p in response.partition_errors}
