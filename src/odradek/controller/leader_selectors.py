"""Leader election as pure functions (Kafka's PartitionLeaderElectionAlgorithms).

Each takes a partition's assignment, its ISR and which replicas are alive, and returns the
new leader (or None) and the new ISR.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "ElectionResult",
    "ElectionType",
    "controlled_shutdown_election",
    "offline_partition_election",
    "preferred_replica_election",
    "reassign_partition_election",
]


class ElectionType(Enum):
    """Which algorithm elects the leader (Kafka's PartitionLeaderElectionStrategy)."""

    OFFLINE = "offline"
    # An ElectLeaders request of type UNCLEAN: the offline algorithm with unclean election
    # allowed whatever the topic says (Kafka's OfflinePartitionLeaderElectionStrategy(true)).
    UNCLEAN = "unclean"
    REASSIGN = "reassign"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled shutdown"


@dataclass(frozen=True, slots=True)
class ElectionResult:
    leader: int | None
    isr: tuple[int, ...]
    unclean: bool = False


def offline_partition_election(assignment: Sequence[int], isr: Collection[int],
                               live_replicas: Collection[int], unclean_enabled: bool) -> ElectionResult:
    """The first live replica of the assignment that is in the ISR; failing that, and only
    when unclean election is enabled, the first live replica (which may lack acknowledged
    records).  The new ISR is the live part of the old one, or just an unclean leader."""
    leader = next((r for r in assignment if r in live_replicas and r in isr), None)
    if leader is not None:
        return ElectionResult(leader, tuple(r for r in isr if r in live_replicas))
    if unclean_enabled:
        leader = next((r for r in assignment if r in live_replicas), None)
        if leader is not None:
            return ElectionResult(leader, (leader,), unclean=True)
    return ElectionResult(None, tuple(isr))


def reassign_partition_election(reassignment: Sequence[int], isr: Collection[int],
                                live_replicas: Collection[int]) -> ElectionResult:
    leader = next((r for r in reassignment if r in live_replicas and r in isr), None)
    return ElectionResult(leader, tuple(isr))


def preferred_replica_election(assignment: Sequence[int], isr: Collection[int],
                               live_replicas: Collection[int]) -> ElectionResult:
    """Only the first replica of the assignment, and only if it is alive and in sync."""
    preferred = assignment[0] if assignment else None
    if preferred is not None and preferred in live_replicas and preferred in isr:
        return ElectionResult(preferred, tuple(isr))
    return ElectionResult(None, tuple(isr))


def controlled_shutdown_election(assignment: Sequence[int], isr: Collection[int],
                                 live_replicas: Collection[int],
                                 shutting_down: Collection[int]) -> ElectionResult:
    """Move leadership off brokers that are shutting down, and drop them from the ISR."""
    leader = next(
        (r for r in assignment if r in live_replicas and r in isr and r not in shutting_down), None)
    return ElectionResult(leader, tuple(r for r in isr if r not in shutting_down))
