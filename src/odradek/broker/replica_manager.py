"""ReplicaManager: which partitions this broker leads or follows, as the controller says.

``become_leader_or_follower`` is Kafka's: refuse a request from a stale controller epoch;
per partition, accept only a newer leader epoch; then make leaders and followers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.partition import Partition
from odradek.controller.context import TopicPartition
from odradek.protocol import control
from odradek.protocol.errors import ErrorCode
from odradek.state_change_log import StateChangeLogger

log = logging.getLogger(__name__)

__all__ = ["ReplicaManager"]

# StopReplica leader epochs that bypass the stale-epoch check: unknown, and "topic deleted".
_NO_EPOCH = -1
_EPOCH_DURING_DELETE = -2


class ReplicaManager:
    def __init__(self, broker_id: int, metadata_cache: MetadataCache,
                 broker_epoch: Callable[[], int]) -> None:
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self._broker_epoch = broker_epoch
        self.controller_epoch = 0
        self.partitions: dict[TopicPartition, Partition] = {}
        self.logger = StateChangeLogger(broker_id)
        # Hooks the data plane and replication attach to (log creation, fetchers, deletion).
        self.on_become_leader: list[Callable[[list[Partition]], None]] = []
        self.on_become_follower: list[Callable[[list[Partition]], None]] = []
        self.on_stop_replica: list[Callable[[list[tuple[Partition | None, TopicPartition, bool]]], None]] = []

    # ------------------------------------------------------------------ queries

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get(TopicPartition(topic, partition))

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self.partitions.values() if p.is_leader]

    def _stale_broker_epoch(self, request_epoch: int) -> bool:
        return request_epoch != -1 and request_epoch < self._broker_epoch()

    # ------------------------------------------------------------------ LeaderAndIsr

    def become_leader_or_follower(self, correlation_id: int, request: control.LeaderAndIsrRequest
                                  ) -> control.LeaderAndIsrResponse:
        ctrl = f"controller {request.controller_id} epoch {request.controller_epoch}"

        def response(top: ErrorCode, errors: dict[tuple[Any, int], ErrorCode]) -> control.LeaderAndIsrResponse:
            by_topic: dict[Any, list[control.LeaderAndIsrPartitionError]] = {}
            for (topic_id, p), err in errors.items():
                by_topic.setdefault(topic_id, []).append(
                    control.LeaderAndIsrPartitionError(partition_index=p, error_code=err))
            return control.LeaderAndIsrResponse(error_code=top, topics=tuple(
                control.LeaderAndIsrTopicError(topic_id=tid, partition_errors=tuple(errs))
                for tid, errs in by_topic.items()))

        all_parts = {(ts.topic_id, ps.partition_index): ErrorCode.none
                     for ts in request.topic_states for ps in ts.partition_states}
        if request.controller_epoch < self.controller_epoch:
            self.logger.warn(f"Ignoring LeaderAndIsr request from {ctrl} with correlation id {correlation_id}: "
                             f"the controller epoch is older than the current {self.controller_epoch}")
            return response(ErrorCode.stale_controller_epoch,
                            dict.fromkeys(all_parts, ErrorCode.stale_controller_epoch))
        if self._stale_broker_epoch(request.broker_epoch):
            self.logger.warn(f"Ignoring LeaderAndIsr request from {ctrl}: broker epoch {request.broker_epoch} "
                             f"is older than the current {self._broker_epoch()}")
            return response(ErrorCode.stale_broker_epoch, dict.fromkeys(all_parts, ErrorCode.stale_broker_epoch))
        self.controller_epoch = request.controller_epoch
        errors: dict[tuple[Any, int], ErrorCode] = {}
        accepted: list[tuple[Partition, control.LeaderAndIsrPartitionState]] = []
        for ts in request.topic_states:
            for ps in ts.partition_states:
                tp = TopicPartition(ts.topic_name, ps.partition_index)
                key = (ts.topic_id, ps.partition_index)
                self.logger.info(f"Received LeaderAndIsr request {_fmt(ps)} correlation id {correlation_id} "
                                 f"from {ctrl} for partition {tp}")
                if self.broker_id not in ps.replicas:
                    self.logger.warn(f"Ignoring LeaderAndIsr request for partition {tp}: this broker is not "
                                     f"in the assigned replicas [{','.join(map(str, ps.replicas))}]")
                    errors[key] = ErrorCode.unknown_topic_or_partition
                    continue
                partition = self.partitions.get(tp)
                if partition is None:
                    partition = Partition(tp.topic, tp.partition, self.broker_id, topic_id=ts.topic_id)
                    self.partitions[tp] = partition
                if ps.leader_epoch > partition.leader_epoch:
                    accepted.append((partition, ps))
                    errors[key] = ErrorCode.none
                elif ps.leader_epoch < partition.leader_epoch:
                    self.logger.warn(f"Ignoring LeaderAndIsr request for partition {tp}: its leader epoch "
                                     f"{ps.leader_epoch} is smaller than the current {partition.leader_epoch}")
                    errors[key] = ErrorCode.stale_controller_epoch
                else:
                    same_topic = partition.topic_id is None or partition.topic_id == ts.topic_id
                    self.logger.info(f"Ignoring LeaderAndIsr request for partition {tp}: its leader epoch "
                                     f"{ps.leader_epoch} matches the current one")
                    errors[key] = ErrorCode.none if same_topic else ErrorCode.stale_controller_epoch
        leaders = [(p, s) for p, s in accepted if s.leader == self.broker_id]
        followers = [(p, s) for p, s in accepted if s.leader != self.broker_id]
        if leaders:
            self._make_leaders(leaders, ctrl, correlation_id)
        if followers:
            self._make_followers(followers, ctrl, correlation_id)
        return response(ErrorCode.none, errors)

    def _make_leaders(self, items: list[tuple[Partition, control.LeaderAndIsrPartitionState]],
                      ctrl: str, correlation_id: int) -> None:
        became = []
        for partition, ps in items:
            partition.make_leader(ps)
            became.append(partition)
            self.logger.info(f"Completed become-leader transition for partition {partition.name} with leader "
                             f"epoch {ps.leader_epoch}, ISR [{','.join(map(str, ps.isr))}] (from {ctrl}, "
                             f"correlation id {correlation_id})")
        for hook in self.on_become_leader:
            hook(became)

    def _make_followers(self, items: list[tuple[Partition, control.LeaderAndIsrPartitionState]],
                        ctrl: str, correlation_id: int) -> None:
        became = []
        for partition, ps in items:
            partition.make_follower(ps)
            became.append(partition)
            leader = ps.leader if ps.leader >= 0 else "none"
            self.logger.info(f"Completed become-follower transition for partition {partition.name} with new "
                             f"leader {leader} and leader epoch {ps.leader_epoch} (from {ctrl}, "
                             f"correlation id {correlation_id})")
        for hook in self.on_become_follower:
            hook(became)

    # ------------------------------------------------------------------ StopReplica

    def stop_replicas(self, correlation_id: int, request: control.StopReplicaRequest) -> control.StopReplicaResponse:
        ctrl = f"controller {request.controller_id} epoch {request.controller_epoch}"
        entries = [(ts.topic_name, ps) for ts in request.topic_states for ps in ts.partition_states]

        def all_with(err: ErrorCode) -> control.StopReplicaResponse:
            return control.StopReplicaResponse(error_code=err, partition_errors=tuple(
                control.StopReplicaPartitionError(topic_name=t, partition_index=ps.partition_index, error_code=err)
                for t, ps in entries))

        if request.controller_epoch < self.controller_epoch:
            self.logger.warn(f"Ignoring StopReplica request from {ctrl}: stale controller epoch")
            return all_with(ErrorCode.stale_controller_epoch)
        if self._stale_broker_epoch(request.broker_epoch):
            return all_with(ErrorCode.stale_broker_epoch)
        self.controller_epoch = request.controller_epoch
        errors = []
        stopped: list[tuple[Partition | None, TopicPartition, bool]] = []
        for topic, ps in entries:
            tp = TopicPartition(topic, ps.partition_index)
            partition = self.partitions.get(tp)
            err = ErrorCode.none
            if (partition is not None and ps.leader_epoch not in (_NO_EPOCH, _EPOCH_DURING_DELETE)
                    and ps.leader_epoch < partition.leader_epoch):
                self.logger.warn(f"Ignoring StopReplica request for partition {tp}: leader epoch "
                                 f"{ps.leader_epoch} is smaller than the current {partition.leader_epoch}")
                err = ErrorCode.fenced_leader_epoch
            else:
                self.logger.info(f"Handling StopReplica request for partition {tp} (delete="
                                 f"{str(ps.delete_partition).lower()}) correlation id {correlation_id} from {ctrl}")
                if ps.delete_partition:
                    self.partitions.pop(tp, None)
                stopped.append((partition, tp, ps.delete_partition))
            errors.append(control.StopReplicaPartitionError(
                topic_name=topic, partition_index=ps.partition_index, error_code=err))
        for hook in self.on_stop_replica:
            hook(stopped)
        return control.StopReplicaResponse(error_code=ErrorCode.none, partition_errors=tuple(errors))

    # ------------------------------------------------------------------ UpdateMetadata

    def maybe_update_metadata_cache(self, correlation_id: int, request: control.UpdateMetadataRequest) -> ErrorCode:
        if request.controller_epoch < self.controller_epoch:
            self.logger.warn(f"Ignoring UpdateMetadata request from controller {request.controller_id} with "
                             f"correlation id {correlation_id}: stale controller epoch {request.controller_epoch}")
            return ErrorCode.stale_controller_epoch
        if self._stale_broker_epoch(request.broker_epoch):
            return ErrorCode.stale_broker_epoch
        self.controller_epoch = request.controller_epoch
        deleted = self.metadata_cache.update(request)
        n = sum(len(ts.partition_states) for ts in request.topic_states)
        self.logger.info(f"Cached metadata for {n} partitions and {len(request.live_brokers)} live brokers from "
                         f"controller {request.controller_id} epoch {request.controller_epoch} with correlation id "
                         f"{correlation_id}" + (f"; deleted {len(deleted)} partitions" if deleted else ""))
        return ErrorCode.none


def _fmt(ps: control.LeaderAndIsrPartitionState) -> str:
    return (f"(leader={ps.leader}, leaderEpoch={ps.leader_epoch}, isr=[{','.join(map(str, ps.isr))}], "
            f"zkVersion={ps.zk_version}, replicas=[{','.join(map(str, ps.replicas))}], "
            f"isNew={str(ps.is_new).lower()})")
