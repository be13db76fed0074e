"""The sans-IO LeaderAndIsr decisions: request-level epoch checks and the per-partition
classifier (Kafka's ReplicaManager.becomeLeaderOrFollower rules)."""

from __future__ import annotations

import pytest
from control_helpers import OTHER_TOPIC_ID, TOPIC_ID, lai_state

from odradek.broker.leader_and_isr import (
    Decision,
    Transition,
    classify,
    describe_state,
    stale_request_error,
)
from odradek.broker.partition import Partition
from odradek.protocol.errors import ErrorCode

BROKER = 1


def local(leader_epoch: int, topic_id: object = TOPIC_ID) -> Partition:
    return Partition("t", 0, BROKER, topic_id=topic_id, leader_id=2, leader_epoch=leader_epoch)


@pytest.mark.parametrize(("controller_epoch", "broker_epoch", "expected"), [
    (5, 100, ErrorCode.none),
    (6, 101, ErrorCode.none),
    (5, -1, ErrorCode.none),               # the sender does not know the broker epoch
    (4, 100, ErrorCode.stale_controller_epoch),
    (5, 99, ErrorCode.stale_broker_epoch),
    (4, 99, ErrorCode.stale_controller_epoch),  # the controller epoch is checked first
])
def test_stale_request_error(controller_epoch: int, broker_epoch: int, expected: ErrorCode) -> None:
    assert stale_request_error(controller_epoch, broker_epoch, 5, 100) == expected


def test_a_new_partition_becomes_leader_or_follower_by_the_states_leader() -> None:
    assert classify(BROKER, TOPIC_ID, lai_state(0, BROKER, 0, (1, 2), (1, 2)), None) == \
        Decision(Transition.BECOME_LEADER)
    assert classify(BROKER, TOPIC_ID, lai_state(0, 2, 0, (2, 1), (2, 1)), None) == \
        Decision(Transition.BECOME_FOLLOWER)


def test_a_broker_outside_the_replicas_is_refused() -> None:
    decision = classify(BROKER, TOPIC_ID, lai_state(0, 2, 3, (2, 3), (2, 3)), local(1))
    assert decision == Decision(Transition.NOT_A_REPLICA, ErrorCode.unknown_topic_or_partition)
    assert not decision.transition.applies


def test_leader_epoch_rules() -> None:
    state = lai_state(0, BROKER, 5, (1, 2), (2, 1))
    assert classify(BROKER, TOPIC_ID, state, local(4)) == Decision(Transition.BECOME_LEADER)
    assert classify(BROKER, TOPIC_ID, state, local(6)) == \
        Decision(Transition.STALE_LEADER_EPOCH, ErrorCode.stale_controller_epoch)
    # The same epoch again: a repeat, answered without error ...
    assert classify(BROKER, TOPIC_ID, state, local(5)) == Decision(Transition.SAME_LEADER_EPOCH)
    assert classify(BROKER, TOPIC_ID, state, local(5, topic_id=None)) == Decision(Transition.SAME_LEADER_EPOCH)
    # ... unless it is for a recreated topic (another topic id).
    assert classify(BROKER, OTHER_TOPIC_ID, state, local(5)) == \
        Decision(Transition.SAME_LEADER_EPOCH, ErrorCode.stale_controller_epoch)
    assert {t for t in Transition if t.applies} == {Transition.BECOME_LEADER, Transition.BECOME_FOLLOWER}


def test_describe_state_as_kafkas_state_change_log() -> None:
    assert describe_state(lai_state(3, 1, 7, (1, 2), (1, 2, 0), zk_version=4, is_new=True)) == \
        "(leader=1, leaderEpoch=7, isr=[1,2], zkVersion=4, replicas=[1,2,0], isNew=true)"
