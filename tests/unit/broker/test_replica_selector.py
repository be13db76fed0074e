"""KIP-392's replica selectors as pure functions (Kafka's LeaderSelector and
RackAwareReplicaSelector)."""

from __future__ import annotations

import pytest

from odradek.broker.replica_selector import (
    ReplicaView,
    leader_selector,
    rack_aware_selector,
    replica_selector,
)

LEADER = ReplicaView(0, "r0", 100, 0)
SAME_RACK_BEHIND = ReplicaView(1, "r1", 90, 0)
SAME_RACK_AHEAD = ReplicaView(2, "r1", 100, 500)
SAME_RACK_AHEAD_RECENT = ReplicaView(3, "r1", 100, 20)
OTHER_RACK = ReplicaView(4, "r2", 100, 0)
ALL = [LEADER, SAME_RACK_BEHIND, SAME_RACK_AHEAD, SAME_RACK_AHEAD_RECENT, OTHER_RACK]


def test_rack_aware_picks_the_most_caught_up_replica_of_the_clients_rack() -> None:
    # Highest log end offset first, then the most recently caught up.
    assert rack_aware_selector("r1", LEADER, ALL) is SAME_RACK_AHEAD_RECENT
    assert rack_aware_selector("r1", LEADER, [LEADER, SAME_RACK_BEHIND, SAME_RACK_AHEAD]) is SAME_RACK_AHEAD
    assert rack_aware_selector("r2", LEADER, ALL) is OTHER_RACK


def test_rack_aware_keeps_the_leader_when_it_shares_the_rack_or_none_does() -> None:
    assert rack_aware_selector("r0", LEADER, ALL) is LEADER
    assert rack_aware_selector("r0", LEADER, [*ALL, ReplicaView(5, "r0", 200, 0)]) is LEADER
    assert rack_aware_selector("r9", LEADER, ALL) is LEADER
    assert rack_aware_selector("", LEADER, ALL) is LEADER


def test_selectors_by_class_name() -> None:
    assert replica_selector(None) is None and replica_selector("") is None
    assert replica_selector("org.apache.kafka.common.replica.RackAwareReplicaSelector") is rack_aware_selector
    assert replica_selector("org.apache.kafka.common.replica.LeaderSelector") is leader_selector
    assert leader_selector("r1", LEADER, ALL) is LEADER
    with pytest.raises(ValueError, match=r"replica\.selector\.class"):
        replica_selector("com.example.MySelector")
