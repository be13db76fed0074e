"""Kafka's ``ControllerState``: what the controller is doing, as the ``ControllerState`` gauge's
number, and the ``<name>RateAndTimeMs`` timer (``kafka.controller:type=ControllerStats``) that
times each event of that kind.  BrokerChange's timer is ``LeaderElectionRateAndTimeMs``, as in
Kafka: a broker change is what elects leaders."""

from __future__ import annotations

from typing import Final, NamedTuple

from odradek.controller import events as ev

__all__ = ["IDLE", "TIMERS", "ControllerState", "state_of"]


class ControllerState(NamedTuple):
    value: int  # the ControllerState gauge
    timer: str  # the ControllerStats timer's name


IDLE: Final = ControllerState(0, "")
_CONTROLLER_CHANGE = ControllerState(1, "ControllerChangeRateAndTimeMs")
_TOPIC_DELETION = ControllerState(4, "TopicDeletionRateAndTimeMs")
_BROKER_CHANGE = ControllerState(2, "LeaderElectionRateAndTimeMs")
_TOPIC_CHANGE = ControllerState(3, "TopicChangeRateAndTimeMs")
_REASSIGNMENT = ControllerState(5, "PartitionReassignmentRateAndTimeMs")

_STATES: Final[dict[type, ControllerState]] = {
    ev.Startup: _CONTROLLER_CHANGE,
    ev.ControllerChange: _CONTROLLER_CHANGE,
    ev.Reelect: _CONTROLLER_CHANGE,
    ev.Expire: _CONTROLLER_CHANGE,
    ev.RegisterBrokerAndReelect: _CONTROLLER_CHANGE,
    ev.BrokerChange: _BROKER_CHANGE,
    ev.BrokerModifications: _BROKER_CHANGE,
    ev.TopicChange: _TOPIC_CHANGE,
    ev.PartitionModifications: _TOPIC_CHANGE,
    ev.TopicDeletion: _TOPIC_DELETION,
    ev.TopicDeletionStopReplicaResponseReceived: _TOPIC_DELETION,
    ev.PartitionReassignment: _REASSIGNMENT,
    ev.ApiPartitionReassignment: _REASSIGNMENT,
    ev.AutoPreferredReplicaLeaderElection: ControllerState(6, "AutoLeaderBalanceRateAndTimeMs"),
    ev.ReplicaLeaderElection: ControllerState(7, "ManualLeaderBalanceRateAndTimeMs"),
    ev.ControlledShutdown: ControllerState(8, "ControlledShutdownRateAndTimeMs"),
    ev.AlterPartitionReceived: ControllerState(9, "IsrChangeRateAndTimeMs"),
    ev.LeaderAndIsrResponseReceived: ControllerState(10, "LeaderAndIsrResponseReceivedRateAndTimeMs"),
    ev.LogDirEventNotification: ControllerState(11, "LogDirChangeRateAndTimeMs"),
    ev.TopicUncleanLeaderElectionEnable: ControllerState(14, "TopicUncleanLeaderElectionEnableRateAndTimeMs"),
    ev.ListPartitionReassignments: ControllerState(15, "ListPartitionReassignmentRateAndTimeMs"),
}

# Every timer's name, each exported even before its first event (dashboards find the name).
TIMERS: Final = tuple(sorted({state.timer for state in _STATES.values()}))


def state_of(event: ev.ControllerEvent) -> ControllerState:
    """The state the controller is in while it processes ``event``."""
    return _STATES.get(type(event), IDLE)
