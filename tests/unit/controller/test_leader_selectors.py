"""Leader election algorithms against Kafka's PartitionLeaderElectionAlgorithms and the
new-ISR rules of Election.scala (leaderForOffline / ForReassign / ForPreferredReplica /
ForControlledShutdown)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from odradek.controller.leader_selectors import (
    ElectionResult,
    controlled_shutdown_election,
    offline_partition_election,
    preferred_replica_election,
    reassign_partition_election,
)

# ----------------------------------------------------------------------------- offline


def test_offline_picks_first_live_isr_member_in_assignment_order_not_isr_order() -> None:
    # ISR order is [2, 1]; the assignment decides: 1 comes before 2.
    result = offline_partition_election([0, 1, 2], isr=[2, 1], live_replicas={1, 2},
                                        unclean_enabled=False)
    assert result == ElectionResult(1, (2, 1), unclean=False)


def test_offline_clean_new_isr_is_the_live_part_of_the_old_isr() -> None:
    result = offline_partition_election([0, 1, 2, 3], isr=[0, 1, 3], live_replicas={1, 2},
                                        unclean_enabled=True)
    # 2 is alive but was never in sync: it does not join the ISR, and unclean is not needed.
    assert result.leader == 1
    assert result.isr == (1,)
    assert not result.unclean


def test_offline_skips_a_live_replica_outside_the_isr_when_a_clean_leader_exists() -> None:
    result = offline_partition_election([2, 0, 1], isr=[0, 1], live_replicas={0, 1, 2},
                                        unclean_enabled=True)
    assert result.leader == 0
    assert result.isr == (0, 1)


def test_offline_without_live_isr_and_unclean_disabled_elects_nobody_and_keeps_isr() -> None:
    result = offline_partition_election([0, 1, 2], isr=[0], live_replicas={1, 2},
                                        unclean_enabled=False)
    assert result == ElectionResult(None, (0,), unclean=False)


def test_offline_unclean_elects_first_live_assigned_replica_with_isr_of_just_itself() -> None:
    result = offline_partition_election([0, 2, 1], isr=[0], live_replicas={1, 2},
                                        unclean_enabled=True)
    assert result == ElectionResult(2, (2,), unclean=True)


def test_offline_unclean_with_no_live_replica_elects_nobody() -> None:
    result = offline_partition_election([0, 1], isr=[0], live_replicas=set(), unclean_enabled=True)
    assert result.leader is None
    assert not result.unclean


def test_offline_ignores_live_brokers_that_are_not_assigned_replicas() -> None:
    result = offline_partition_election([0, 1], isr=[0, 1], live_replicas={5}, unclean_enabled=True)
    assert result.leader is None


# ----------------------------------------------------------------------------- reassign


def test_reassign_picks_first_live_isr_member_of_the_target_replicas_and_keeps_isr() -> None:
    result = reassign_partition_election([3, 4, 1], isr=[1, 4, 0], live_replicas={1, 3, 4})
    assert result.leader == 4  # 3 is alive but not in sync
    assert result.isr == (1, 4, 0)


def test_reassign_without_live_in_sync_target_elects_nobody() -> None:
    result = reassign_partition_election([3, 4], isr=[0, 1], live_replicas={0, 1, 3, 4})
    assert result.leader is None


# ----------------------------------------------------------------------------- preferred


def test_preferred_elects_only_the_first_assigned_replica_and_keeps_isr() -> None:
    result = preferred_replica_election([2, 0, 1], isr=[0, 1, 2], live_replicas={0, 1, 2})
    assert result == ElectionResult(2, (0, 1, 2))


def test_preferred_replica_out_of_sync_or_dead_is_not_replaced_by_another() -> None:
    assert preferred_replica_election([2, 0, 1], isr=[0, 1], live_replicas={0, 1, 2}).leader is None
    assert preferred_replica_election([2, 0, 1], isr=[0, 1, 2], live_replicas={0, 1}).leader is None
    assert preferred_replica_election([], isr=[0], live_replicas={0}).leader is None


# ----------------------------------------------------------------------------- controlled shutdown


def test_controlled_shutdown_moves_leadership_off_and_drops_shutting_down_brokers_from_isr() -> None:
    result = controlled_shutdown_election([0, 1, 2], isr=[0, 1, 2], live_replicas={0, 1, 2},
                                          shutting_down={0})
    assert result.leader == 1
    assert result.isr == (1, 2)


def test_controlled_shutdown_needs_a_live_in_sync_replica_that_is_not_shutting_down() -> None:
    result = controlled_shutdown_election([0, 1, 2], isr=[0, 1], live_replicas={0, 1, 2},
                                          shutting_down={0, 1})
    assert result.leader is None  # 2 is alive but not in sync


# ----------------------------------------------------------------------------- properties

_brokers = st.lists(st.integers(0, 7), min_size=1, max_size=5, unique=True)


@st.composite
def _partition(draw: st.DrawFn) -> tuple[list[int], list[int], set[int]]:
    assignment = draw(_brokers)
    isr = draw(st.lists(st.sampled_from(assignment), unique=True))
    live = draw(st.sets(st.integers(0, 7)))
    return assignment, isr, live


@given(_partition(), st.booleans())
def test_offline_election_invariants(partition: tuple[list[int], list[int], set[int]], unclean: bool) -> None:
    assignment, isr, live = partition
    result = offline_partition_election(assignment, isr, live, unclean)
    live_isr = [r for r in assignment if r in live and r in isr]
    live_assigned = [r for r in assignment if r in live]
    if live_isr:
        assert result.leader == live_isr[0]
        assert not result.unclean
        assert result.isr == tuple(r for r in isr if r in live)
        assert result.leader in result.isr
    elif unclean and live_assigned:
        assert result.leader == live_assigned[0]
        assert result.unclean
        assert result.isr == (result.leader,)
    else:
        assert result.leader is None
        assert result.isr == tuple(isr)


@given(_partition(), st.sets(st.integers(0, 7)))
def test_controlled_shutdown_invariants(partition: tuple[list[int], list[int], set[int]],
                                        shutting_down: set[int]) -> None:
    assignment, isr, live = partition
    result = controlled_shutdown_election(assignment, isr, live, shutting_down)
    assert not set(result.isr) & shutting_down
    assert result.isr == tuple(r for r in isr if r not in shutting_down)
    if result.leader is not None:
        assert result.leader in live and result.leader in result.isr
        # the first such replica in assignment order
        assert result.leader == next(r for r in assignment if r in live and r in isr and r not in shutting_down)
    else:
        assert not any(r in live and r in isr and r not in shutting_down for r in assignment)
