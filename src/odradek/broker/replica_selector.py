"""Which replica a consumer should fetch from (KIP-392, Kafka's ``ReplicaSelector``).

``replica.selector.class`` names the selector a leader consults for consumers that send their
rack (Fetch v11+ ``rack_id``); when it picks another replica, the leader answers with no
records and that replica's id as ``preferred_read_replica``, and the consumer fetches from
it.  Kafka ships two: ``LeaderSelector`` (the default behaviour: always the leader) and
``RackAwareReplicaSelector`` (a replica in the consumer's rack, the most caught-up one).
Selectors are pure functions over plain views of the replicas.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["ReplicaSelector", "ReplicaView", "leader_selector", "rack_aware_selector", "replica_selector"]


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """What a selector knows of one replica (Kafka's ``ReplicaView``)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


# (client rack, the leader's view, every candidate including the leader) -> the chosen replica
ReplicaSelector = Callable[[str, ReplicaView, Sequence[ReplicaView]], ReplicaView]


def leader_selector(client_rack: str, leader: ReplicaView, replicas: Sequence[ReplicaView]) -> ReplicaView:
    """Kafka's ``LeaderSelector``: always the leader."""
    return leader


def rack_aware_selector(client_rack: str, leader: ReplicaView, replicas: Sequence[ReplicaView]) -> ReplicaView:
    """Kafka's ``RackAwareReplicaSelector``: the leader unless the client names a rack that
    holds replicas but not the leader; then the replica of that rack with the highest log end
    offset, the most recently caught up among equals."""
    if not client_rack:
        return leader
    same_rack = [r for r in replicas if r.rack == client_rack]
    if not same_rack or leader in same_rack:
        return leader
    return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_last_caught_up_ms))


_SELECTORS: dict[str, ReplicaSelector] = {
    "org.apache.kafka.common.replica.LeaderSelector": leader_selector,
    "org.apache.kafka.common.replica.RackAwareReplicaSelector": rack_aware_selector,
}


def replica_selector(class_name: str | None) -> ReplicaSelector | None:
    """The selector ``replica.selector.class`` names; None when unset (consumers read from
    leaders only).  ValueError for a class odradek does not have."""
    if not class_name:
        return None
    try:
        return _SELECTORS[class_name]
    except KeyError:
        raise ValueError(f"Invalid value {class_name} for configuration replica.selector.class: "
                         f"choose one of {', '.join(_SELECTORS)}") from None
