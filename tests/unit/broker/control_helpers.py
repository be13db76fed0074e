"""Builders for the controller's requests as a broker receives them, with short defaults."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from odradek.protocol import control

TOPIC_ID = uuid.UUID("6f1c2a0e-0000-4000-8000-00000000000a")
OTHER_TOPIC_ID = uuid.UUID("6f1c2a0e-0000-4000-8000-00000000000b")


def lai_state(partition: int, leader: int, leader_epoch: int, isr: Sequence[int], replicas: Sequence[int], *,
              controller_epoch: int = 1, zk_version: int = 0, is_new: bool = False
              ) -> control.LeaderAndIsrPartitionState:
    return control.LeaderAndIsrPartitionState(
        partition_index=partition, controller_epoch=controller_epoch, leader=leader, leader_epoch=leader_epoch,
        isr=tuple(isr), zk_version=zk_version, replicas=tuple(replicas), is_new=is_new)


def leader_and_isr(states: Iterable[control.LeaderAndIsrPartitionState], *, topic: str = "t",
                   topic_id: uuid.UUID | None = TOPIC_ID, controller_epoch: int = 1, broker_epoch: int = -1,
                   more: Iterable[control.LeaderAndIsrTopicState] = ()) -> control.LeaderAndIsrRequest:
    return control.LeaderAndIsrRequest(
        controller_id=0, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
        topic_states=(control.LeaderAndIsrTopicState(topic_name=topic, topic_id=topic_id,
                                                     partition_states=tuple(states)), *more),
        live_leaders=())


def stop_replica(entries: Iterable[tuple[str, int, int, bool]], *, controller_epoch: int = 1,
                 broker_epoch: int = -1) -> control.StopReplicaRequest:
    """``entries``: (topic, partition, leader_epoch, delete)."""
    by_topic: dict[str, list[control.StopReplicaPartitionState]] = {}
    for topic, partition, epoch, delete in entries:
        by_topic.setdefault(topic, []).append(control.StopReplicaPartitionState(
            partition_index=partition, leader_epoch=epoch, delete_partition=delete))
    return control.StopReplicaRequest(
        controller_id=0, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
        topic_states=tuple(control.StopReplicaTopicState(topic_name=t, partition_states=tuple(ps))
                           for t, ps in by_topic.items()))


def um_state(partition: int, leader: int, leader_epoch: int = 0, isr: Sequence[int] = (0,),
             replicas: Sequence[int] = (0,), offline: Sequence[int] = (), zk_version: int = 0
             ) -> control.UpdateMetadataPartitionState:
    return control.UpdateMetadataPartitionState(
        partition_index=partition, controller_epoch=1, leader=leader, leader_epoch=leader_epoch,
        isr=tuple(isr), zk_version=zk_version, replicas=tuple(replicas), offline_replicas=tuple(offline))


def um_broker(broker_id: int, rack: str | None = None, listeners: Iterable[tuple[str, int]] = (("PLAINTEXT", 0),)
              ) -> control.UpdateMetadataBroker:
    return control.UpdateMetadataBroker(
        id=broker_id, rack=rack,
        endpoints=tuple(control.UpdateMetadataEndpoint(port=9090 + broker_id + offset, host=f"h{broker_id}",
                                                       listener=name, security_protocol=0)
                        for name, offset in listeners))


def update_metadata(topics: dict[str, tuple[uuid.UUID | None, Iterable[control.UpdateMetadataPartitionState]]],
                    brokers: Iterable[control.UpdateMetadataBroker] = (), *, controller_id: int = 0,
                    controller_epoch: int = 1, broker_epoch: int = -1) -> control.UpdateMetadataRequest:
    return control.UpdateMetadataRequest(
        controller_id=controller_id, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
        topic_states=tuple(control.UpdateMetadataTopicState(topic_name=t, topic_id=tid, partition_states=tuple(ps))
                           for t, (tid, ps) in topics.items()),
        live_brokers=tuple(brokers))
