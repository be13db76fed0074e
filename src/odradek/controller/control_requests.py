"""Build the controller's LeaderAndIsr / UpdateMetadata / StopReplica requests from its
model, and read the errors out of the brokers' responses."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from operator import itemgetter
from typing import Any, TypeVar

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

V = TypeVar("V")


def _by_topic(partitions: Mapping[TopicPartition, V]) -> list[tuple[str, list[tuple[int, V]]]]:
    """The entries grouped by topic, topics and partitions in order (as the requests list them)."""
    grouped: dict[str, list[tuple[int, V]]] = defaultdict(list)
    for tp, value in partitions.items():
        grouped[tp.topic].append((tp.partition, value))
    return [(topic, sorted(grouped[topic], key=itemgetter(0))) for topic in sorted(grouped)]


def _leader_fields(partition: int, state: LeaderAndIsr) -> dict[str, Any]:
    """The partition-state fields LeaderAndIsr and UpdateMetadata share."""
    return {"partition_index": partition, "controller_epoch": state.controller_epoch, "leader": state.leader,
            "leader_epoch": state.leader_epoch, "isr": tuple(state.isr), "zk_version": state.zk_version}


def build_leader_and_isr_request(
    *, controller_id: int, controller_epoch: int, broker_epoch: int,
    partitions: Mapping[TopicPartition, tuple[LeaderAndIsr, ReplicaAssignment, bool]],
    topic_ids: Mapping[str, str], live_leaders: Iterable[BrokerInfo], listener: str,
) -> control.LeaderAndIsrRequest:
    topic_states = tuple(
        control.LeaderAndIsrTopicState(
            topic_name=topic, topic_id=topic_id_to_uuid(topic_ids.get(topic)), partition_states=tuple(
                control.LeaderAndIsrPartitionState(
                    **_leader_fields(p, state), replicas=tuple(assignment.replicas),
                    adding_replicas=tuple(assignment.adding_replicas),
                    removing_replicas=tuple(assignment.removing_replicas), is_new=is_new)
                for p, (state, assignment, is_new) in parts))
        for topic, parts in _by_topic(partitions))
    leaders = []
    for info in live_leaders:
        ep = info.endpoint(listener) if any(e.listener == listener for e in info.endpoints) else info.endpoint()
        leaders.append(control.LeaderAndIsrLiveLeader(broker_id=info.id, host_name=ep.host, port=ep.port))
    return control.LeaderAndIsrRequest(
        controller_id=controller_id, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
        topic_states=topic_states, live_leaders=tuple(leaders))


def build_update_metadata_request(
    *, controller_id: int, controller_epoch: int, broker_epoch: int,
    partitions: Mapping[TopicPartition, tuple[LeaderAndIsr, tuple[int, ...], tuple[int, ...]]],
    topic_ids: Mapping[str, str], live_brokers: Iterable[BrokerInfo],
) -> control.UpdateMetadataRequest:
    topic_states = tuple(
        control.UpdateMetadataTopicState(
            topic_name=topic, topic_id=topic_id_to_uuid(topic_ids.get(topic)), partition_states=tuple(
                control.UpdateMetadataPartitionState(
                    **_leader_fields(p, state), replicas=tuple(replicas), offline_replicas=tuple(offline))
                for p, (state, replicas, offline) in parts))
        for topic, parts in _by_topic(partitions))
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
        topic_states=topic_states, live_brokers=brokers)


def build_stop_replica_request(
    *, controller_id: int, controller_epoch: int, broker_epoch: int,
    partitions: Mapping[TopicPartition, tuple[int, bool]],
) -> control.StopReplicaRequest:
    topic_states = tuple(
        control.StopReplicaTopicState(
            topic_name=topic,
            partition_states=tuple(
                control.StopReplicaPartitionState(partition_index=p, leader_epoch=epoch, delete_partition=delete)
                for p, (epoch, delete) in parts))
        for topic, parts in _by_topic(partitions))
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
