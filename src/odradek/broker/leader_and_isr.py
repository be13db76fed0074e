"""LeaderAndIsr, decided per partition (sans-IO part of Kafka's
``ReplicaManager.becomeLeaderOrFollower``).

A request is refused whole when it comes from an older controller epoch or for an older
broker epoch (:func:`stale_request_error`, shared with StopReplica and UpdateMetadata).
Otherwise each partition state is classified against the local partition
(:func:`classify`): only a newer leader epoch makes this broker leader or follower; the
:class:`~odradek.broker.replica_manager.ReplicaManager` applies the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from odradek.protocol import control
from odradek.protocol.errors import ErrorCode

__all__ = ["Decision", "LocalPartition", "Transition", "classify", "describe_state", "leader_and_isr_response",
           "stale_request_error"]


class Transition(Enum):
    """What a LeaderAndIsr partition state does to the local replica."""

    BECOME_LEADER = "become-leader"
    BECOME_FOLLOWER = "become-follower"
    NOT_A_REPLICA = "not-a-replica"          # this broker is not in the assigned replicas
    STALE_LEADER_EPOCH = "stale-leader-epoch"  # older than the local leader epoch
    SAME_LEADER_EPOCH = "same-leader-epoch"    # already applied (or a recreated topic's)

    @property
    def applies(self) -> bool:
        return self in (Transition.BECOME_LEADER, Transition.BECOME_FOLLOWER)


@dataclass(frozen=True, slots=True)
class Decision:
    transition: Transition
    error: ErrorCode = ErrorCode.none


class LocalPartition(Protocol):
    """The local replica state a decision depends on (a :class:`Partition` is one)."""

    leader_epoch: int
    topic_id: Any


def stale_request_error(controller_epoch: int, broker_epoch: int, current_controller_epoch: int,
                        current_broker_epoch: int) -> ErrorCode:
    """Kafka's checks on every control request: STALE_CONTROLLER_EPOCH for a deposed
    controller, STALE_BROKER_EPOCH for a request meant for an earlier registration of this
    broker (-1: the sender does not know the epoch), else NONE."""
    if controller_epoch < current_controller_epoch:
        return ErrorCode.stale_controller_epoch
    if broker_epoch != -1 and broker_epoch < current_broker_epoch:
        return ErrorCode.stale_broker_epoch
    return ErrorCode.none


def classify(broker_id: int, topic_id: Any, state: control.LeaderAndIsrPartitionState,
             local: LocalPartition | None) -> Decision:
    """The transition ``state`` asks of this broker's replica ``local`` (None: not hosted
    yet, so any leader epoch is newer).  A replica at an older epoch than the request is
    made leader or follower; an older request epoch is refused with STALE_CONTROLLER_EPOCH
    (Kafka's code for it); the same epoch is a repeat, unless the topic id differs (the
    topic was deleted and recreated meanwhile), which is refused too."""
    if broker_id not in state.replicas:
        return Decision(Transition.NOT_A_REPLICA, ErrorCode.unknown_topic_or_partition)
    local_epoch = local.leader_epoch if local is not None else -1
    if state.leader_epoch > local_epoch:
        leads = state.leader == broker_id
        return Decision(Transition.BECOME_LEADER if leads else Transition.BECOME_FOLLOWER)
    if state.leader_epoch < local_epoch:
        return Decision(Transition.STALE_LEADER_EPOCH, ErrorCode.stale_controller_epoch)
    same_topic = local is None or local.topic_id is None or local.topic_id == topic_id
    return Decision(Transition.SAME_LEADER_EPOCH, ErrorCode.none if same_topic else ErrorCode.stale_controller_epoch)


def leader_and_isr_response(top: ErrorCode, errors: Mapping[tuple[Any, int], ErrorCode]) -> control.LeaderAndIsrResponse:
    """The LeaderAndIsr response: ``top`` and a per-partition error for each (topic id, partition)."""
    by_topic: dict[Any, list[control.LeaderAndIsrPartitionError]] = {}
    for (topic_id, p), err in errors.items():
        by_topic.setdefault(topic_id, []).append(control.LeaderAndIsrPartitionError(partition_index=p, error_code=err))
    return control.LeaderAndIsrResponse(error_code=top, topics=tuple(
        control.LeaderAndIsrTopicError(topic_id=tid, partition_errors=tuple(errs)) for tid, errs in by_topic.items()))


def describe_state(ps: control.LeaderAndIsrPartitionState) -> str:
    """A partition state as Kafka's state-change log writes it."""
    return (f"(leader={ps.leader}, leaderEpoch={ps.leader_epoch}, isr=[{','.join(map(str, ps.isr))}], "
            f"zkVersion={ps.zk_version}, replicas=[{','.join(map(str, ps.replicas))}], "
            f"isNew={str(ps.is_new).lower()})")
