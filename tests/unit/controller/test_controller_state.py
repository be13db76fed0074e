"""ControllerState: every controller event has Kafka's state (the ControllerState gauge) and
timer; a broker change is timed as LeaderElectionRateAndTimeMs."""

from __future__ import annotations

import inspect

from odradek.controller import events as ev
from odradek.controller.controller_state import IDLE, TIMERS, state_of


def test_every_event_kind_has_a_state_and_a_timer() -> None:
    kinds = [cls for _name, cls in inspect.getmembers(ev, inspect.isclass)
             if issubclass(cls, ev.ControllerEvent) and cls not in (ev.ControllerEvent, ev.ControllerRequestEvent)]
    assert len(kinds) >= 20
    missing = [cls.__name__ for cls in kinds if state_of(cls.__new__(cls)) is IDLE]
    assert missing == []


def test_broker_change_is_the_leader_election_timer() -> None:
    state = state_of(ev.BrokerChange())
    assert (state.value, state.timer) == (2, "LeaderElectionRateAndTimeMs")
    assert "LeaderElectionRateAndTimeMs" in TIMERS
    assert state_of(ev.TopicChange()).value == 3
