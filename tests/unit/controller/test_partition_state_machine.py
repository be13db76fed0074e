"""PartitionStateMachine over a fake ZooKeeper and a recording request batch (the
partition transitions of Kafka's ZkPartitionStateMachine)."""

from __future__ import annotations

import pytest
from fakes import CONTROLLER_EPOCH, Cluster, run, state_change_log, tp

from odradek.controller.leader_selectors import ElectionType
from odradek.controller.partition_state_machine import (
    VALID_PREVIOUS_STATES,
    PartitionState,
    StateChangeFailed,
)
from odradek.zk.client import ControllerMovedError, NodeExistsError
from odradek.zk.zk_data import LeaderAndIsr

NEW, ONLINE, OFFLINE, NON_EXISTENT = (PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE,
                                      PartitionState.NON_EXISTENT)


def test_transition_table_is_kafkas() -> None:
    expected = {
        NEW: {NON_EXISTENT},
        ONLINE: {NEW, ONLINE, OFFLINE},
        OFFLINE: {NEW, ONLINE, OFFLINE},
        NON_EXISTENT: {OFFLINE},
    }
    assert expected == VALID_PREVIOUS_STATES


# ----------------------------------------------------------------------------- NonExistent -> New -> Online


def test_non_existent_to_new_only_marks_the_state() -> None:
    c = Cluster()
    parts = c.add_topic("t", {0: [0, 1, 2]})
    failed = run(c.psm.handle_state_changes(parts, NEW))
    assert failed == {}
    assert c.psm.state(tp("t", 0)) is NEW
    assert c.zk.writes == []
    assert c.batch.leader_and_isr == []


def test_new_to_online_leader_is_first_live_replica_and_isr_the_live_assigned_replicas() -> None:
    c = Cluster(brokers=[0, 1, 2, 3])
    c.ctx.remove_live_brokers([2])
    parts = c.add_topic("t", {0: [2, 3, 0, 1], 1: [1, 2, 3, 0]})
    run(c.psm.handle_state_changes(parts, NEW))
    failed = run(c.psm.handle_state_changes(parts, ONLINE, ElectionType.OFFLINE))

    assert failed == {}
    assert c.psm.state(tp("t", 0)) is ONLINE and c.psm.state(tp("t", 1)) is ONLINE
    # Written to ZooKeeper (created, version 0) with this controller's epoch, leader epoch 0.
    assert c.zk.states[tp("t", 0)] == LeaderAndIsr(3, 0, (3, 0, 1), CONTROLLER_EPOCH, 0)
    assert c.zk.states[tp("t", 1)] == LeaderAndIsr(1, 0, (1, 3, 0), CONTROLLER_EPOCH, 0)
    assert [w[0] for w in c.zk.writes] == ["create", "create"]
    assert c.ctx.leadership[tp("t", 0)] == c.zk.states[tp("t", 0)]
    # LeaderAndIsr (is_new) to each ISR member, i.e. every live replica, none to the dead one.
    sent = c.batch.leader_and_isr_to(tp("t", 0))
    assert set(sent) == {3, 0, 1}
    assert all(r.is_new and r.state == c.zk.states[tp("t", 0)] for r in sent.values())
    assert sent[0].replicas == (2, 3, 0, 1)
    assert all(b.controller_epoch == CONTROLLER_EPOCH for b in c.batch.sent)


def test_new_to_online_without_any_live_replica_fails_and_stays_new() -> None:
    c = Cluster(brokers=[0])
    parts = c.add_topic("t", {0: [1, 2]})
    run(c.psm.handle_state_changes(parts, NEW))
    with state_change_log() as log:
        failed = run(c.psm.handle_state_changes(parts, ONLINE, ElectionType.OFFLINE))
    assert isinstance(failed[tp("t", 0)], StateChangeFailed)
    assert c.psm.state(tp("t", 0)) is NEW
    assert c.zk.states == {}
    assert any("No assigned replica is alive" in line for line in log.errors())


def test_new_to_online_when_the_state_znode_cannot_be_created_stays_new() -> None:
    c = Cluster()
    parts = c.add_topic("t", {0: [0, 1], 1: [1, 0]})
    run(c.psm.handle_state_changes(parts, NEW))
    c.zk.fail_writes[tp("t", 0)] = NodeExistsError()
    failed = run(c.psm.handle_state_changes(parts, ONLINE, ElectionType.OFFLINE))
    assert set(failed) == {tp("t", 0)}
    assert c.psm.state(tp("t", 0)) is NEW
    assert tp("t", 0) not in c.ctx.leadership
    assert c.batch.leader_and_isr_to(tp("t", 0)) == {}
    # The other partition is unaffected.
    assert c.psm.state(tp("t", 1)) is ONLINE


# ----------------------------------------------------------------------------- invalid transitions


@pytest.mark.parametrize(("start", "target"), [
    (NON_EXISTENT, ONLINE),
    (NON_EXISTENT, OFFLINE),
    (NON_EXISTENT, NON_EXISTENT),
    (NEW, NEW),
    (NEW, NON_EXISTENT),
    (ONLINE, NEW),
    (ONLINE, NON_EXISTENT),
    (OFFLINE, NEW),
])
def test_invalid_transitions_are_refused_and_logged(start: PartitionState, target: PartitionState) -> None:
    c = Cluster()
    parts = c.add_topic("t", {0: [0, 1, 2]})
    if start is not NON_EXISTENT:
        run(c.psm.handle_state_changes(parts, NEW))
    if start in (ONLINE, OFFLINE):
        run(c.psm.handle_state_changes(parts, ONLINE, ElectionType.OFFLINE))
    if start is OFFLINE:
        run(c.psm.handle_state_changes(parts, OFFLINE))
    assert c.psm.state(parts[0]) is start
    writes, sent = len(c.zk.writes), len(c.batch.leader_and_isr)

    with state_change_log() as log:
        failed = run(c.psm.handle_state_changes(parts, target, ElectionType.OFFLINE))

    assert isinstance(failed[parts[0]], StateChangeFailed)
    assert c.psm.state(parts[0]) is start
    assert len(c.zk.writes) == writes and len(c.batch.leader_and_isr) == sent
    assert any(f"Invalid state transition for partition t-0: {start} -> {target}" in line
               for line in log.errors())


def test_valid_partitions_proceed_when_others_in_the_same_call_are_invalid() -> None:
    c = Cluster()
    c.add_topic("t", {0: [0, 1], 1: [1, 0]})
    run(c.psm.handle_state_changes([tp("t", 0)], NEW))
    failed = run(c.psm.handle_state_changes([tp("t", 0), tp("t", 1)], ONLINE, ElectionType.OFFLINE))
    assert set(failed) == {tp("t", 1)}
    assert c.psm.state(tp("t", 0)) is ONLINE
    assert c.psm.state(tp("t", 1)) is NON_EXISTENT


# ----------------------------------------------------------------------------- Online -> Offline -> Online


def _online(c: Cluster, assignment: dict[int, list[int]], config: dict[str, str] | None = None) -> None:
    run(c.create_topic("t", assignment, config))
    c.batch.clear()
    c.zk.writes.clear()


def test_online_to_offline_touches_neither_zookeeper_nor_brokers() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    run(c.psm.handle_state_changes([tp("t", 0)], OFFLINE))
    assert c.psm.state(tp("t", 0)) is OFFLINE
    assert c.zk.writes == [] and c.batch.leader_and_isr == []


def test_offline_to_online_clean_election_from_the_live_isr() -> None:
    c = Cluster(brokers=[0, 1, 2, 3])
    _online(c, {0: [0, 1, 2, 3]})
    # The controller had already shrunk the ISR to [0, 2, 3] before 0 and 3 died.
    c.ctx.leadership[tp("t", 0)] = c.zk.bump(tp("t", 0), isr=(0, 2, 3))
    c.ctx.remove_live_brokers([0, 3])
    before = c.zk.states[tp("t", 0)]

    run(c.psm.handle_state_changes([tp("t", 0)], OFFLINE))
    failed = run(c.psm.handle_state_changes([tp("t", 0)], ONLINE, ElectionType.OFFLINE))

    assert failed == {}
    assert c.psm.state(tp("t", 0)) is ONLINE
    # 1 is alive but not in the ISR, so 2 leads; the ISR keeps only its live members.
    after = c.zk.states[tp("t", 0)]
    assert after == LeaderAndIsr(2, before.leader_epoch + 1, (2,), CONTROLLER_EPOCH, before.zk_version + 1)
    assert c.ctx.leadership[tp("t", 0)] == after
    sent = c.batch.leader_and_isr_to(tp("t", 0))
    assert {1, 2} <= set(sent)
    assert all(not r.is_new and r.state == after for r in sent.values())
    assert c.zk.config_reads == []  # a live ISR member exists: no need to read the topic config


def test_offline_without_live_isr_stays_leaderless_when_unclean_election_is_disabled() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    c.ctx.leadership[tp("t", 0)] = c.zk.bump(tp("t", 0), isr=(0,))
    c.ctx.remove_live_brokers([0])
    before = c.zk.states[tp("t", 0)]
    run(c.psm.handle_state_changes([tp("t", 0)], OFFLINE))

    with state_change_log() as log:
        failed = run(c.psm.handle_state_changes([tp("t", 0)], ONLINE, ElectionType.OFFLINE))

    assert isinstance(failed[tp("t", 0)], StateChangeFailed)
    assert c.psm.state(tp("t", 0)) is OFFLINE
    assert c.zk.states[tp("t", 0)] == before
    assert c.batch.leader_and_isr == []
    assert c.zk.config_reads == [{"t"}]
    assert any("unclean leader election is disabled" in line for line in log.errors())
    assert c.psm.offline_partition_count() == 1


@pytest.mark.parametrize(("broker_default", "topic_config", "elected"), [
    (False, {}, False),
    (True, {}, True),
    (False, {"unclean.leader.election.enable": "true"}, True),
    (True, {"unclean.leader.election.enable": "false"}, False),
    (False, {"unclean.leader.election.enable": " TRUE "}, True),
])
def test_unclean_election_follows_topic_config_then_broker_default(
        broker_default: bool, topic_config: dict[str, str], elected: bool) -> None:
    c = Cluster(unclean=broker_default)
    _online(c, {0: [0, 1, 2]}, topic_config)
    c.ctx.leadership[tp("t", 0)] = c.zk.bump(tp("t", 0), isr=(0,))
    c.ctx.remove_live_brokers([0])
    before = c.zk.states[tp("t", 0)]
    run(c.psm.handle_state_changes([tp("t", 0)], OFFLINE))

    with state_change_log() as log:
        run(c.psm.handle_state_changes([tp("t", 0)], ONLINE, ElectionType.OFFLINE))

    if elected:
        assert c.psm.state(tp("t", 0)) is ONLINE
        assert c.zk.states[tp("t", 0)] == LeaderAndIsr(1, before.leader_epoch + 1, (1,), CONTROLLER_EPOCH,
                                                       before.zk_version + 1)
        assert any("Unclean leader election for partition t-0" in line for line in log.lines())
    else:
        assert c.psm.state(tp("t", 0)) is OFFLINE
        assert c.zk.states[tp("t", 0)] == before


def test_unclean_setting_is_per_topic() -> None:
    c = Cluster()
    run(c.create_topic("a", {0: [0, 1]}, {"unclean.leader.election.enable": "true"}))
    run(c.create_topic("b", {0: [0, 1]}))
    for topic in ("a", "b"):
        c.ctx.leadership[tp(topic, 0)] = c.zk.bump(tp(topic, 0), isr=(0,))
    c.ctx.remove_live_brokers([0])
    run(c.psm.handle_state_changes([tp("a", 0), tp("b", 0)], OFFLINE))
    failed = run(c.psm.handle_state_changes([tp("a", 0), tp("b", 0)], ONLINE, ElectionType.OFFLINE))
    assert set(failed) == {tp("b", 0)}
    assert c.zk.states[tp("a", 0)].leader == 1
    assert c.zk.states[tp("b", 0)].leader == 0


def test_election_is_aborted_for_state_written_by_a_newer_controller() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    c.ctx.leadership[tp("t", 0)] = c.zk.bump(tp("t", 0), controller_epoch=CONTROLLER_EPOCH + 1)
    c.ctx.remove_live_brokers([0])
    run(c.psm.handle_state_changes([tp("t", 0)], OFFLINE))
    failed = run(c.psm.handle_state_changes([tp("t", 0)], ONLINE, ElectionType.OFFLINE))
    assert "newer controller" in str(failed[tp("t", 0)])
    assert c.zk.writes == []
    assert c.psm.state(tp("t", 0)) is OFFLINE


def test_conditional_write_conflict_rereads_the_state_and_retries() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    stale = c.ctx.leadership[tp("t", 0)]
    # Someone wrote the znode behind the cache: ISR [0, 2] at a newer version.
    fresh = c.zk.bump(tp("t", 0), isr=(0, 2), leader_epoch=stale.leader_epoch + 3)
    c.ctx.remove_live_brokers([0])
    run(c.psm.handle_state_changes([tp("t", 0)], OFFLINE))
    failed = run(c.psm.handle_state_changes([tp("t", 0)], ONLINE, ElectionType.OFFLINE))

    assert failed == {}
    # Elected from the re-read state: 1 is no longer in sync, so 2 leads.
    assert c.zk.states[tp("t", 0)] == LeaderAndIsr(2, fresh.leader_epoch + 1, (2,), CONTROLLER_EPOCH,
                                                   fresh.zk_version + 1)


def test_a_deposed_controller_changes_nothing() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    before = dict(c.zk.states)
    c.ctx.remove_live_brokers([0])
    run(c.psm.handle_state_changes([tp("t", 0)], OFFLINE))
    c.zk.move_controller()
    with pytest.raises(ControllerMovedError):
        run(c.psm.handle_state_changes([tp("t", 0)], ONLINE, ElectionType.OFFLINE))
    assert c.zk.states == before
    assert c.psm.state(tp("t", 0)) is OFFLINE


def test_other_strategies_preferred_and_controlled_shutdown() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    # Leadership moved to 1 earlier; the preferred replica 0 is back in sync.
    c.ctx.leadership[tp("t", 0)] = c.zk.bump(tp("t", 0), leader=1, isr=(1, 2, 0))
    run(c.psm.handle_state_changes([tp("t", 0)], ONLINE, ElectionType.PREFERRED))
    assert c.zk.states[tp("t", 0)].leader == 0
    assert c.zk.states[tp("t", 0)].isr == (1, 2, 0)

    c.ctx.shutting_down_broker_ids.add(0)
    run(c.psm.handle_state_changes([tp("t", 0)], ONLINE, ElectionType.CONTROLLED_SHUTDOWN))
    assert c.zk.states[tp("t", 0)].leader == 1
    assert c.zk.states[tp("t", 0)].isr == (1, 2)


# ----------------------------------------------------------------------------- startup and triggers


def test_initialize_partition_states_from_the_context() -> None:
    c = Cluster(brokers=[0, 1])
    c.add_topic("t", {0: [0, 1], 1: [1, 2], 2: [2, 0]})
    c.ctx.leadership[tp("t", 0)] = LeaderAndIsr(0, 0, (0, 1), 1, 0)
    c.ctx.leadership[tp("t", 1)] = LeaderAndIsr(2, 0, (2,), 1, 0)
    c.psm.initialize_partition_states()
    assert c.psm.state(tp("t", 0)) is ONLINE
    assert c.psm.state(tp("t", 1)) is OFFLINE
    assert c.psm.state(tp("t", 2)) is NEW


def test_trigger_online_skips_topics_being_deleted() -> None:
    c = Cluster()
    c.add_topic("keep", {0: [0, 1]})
    c.add_topic("gone", {0: [0, 1]})
    run(c.psm.handle_state_changes([tp("keep", 0), tp("gone", 0)], NEW))
    c.psm.topics_being_deleted = {"gone"}
    run(c.psm.trigger_online_partition_state_change())
    assert c.psm.state(tp("keep", 0)) is ONLINE
    assert c.psm.state(tp("gone", 0)) is NEW
    assert c.psm.offline_partition_count() == 0


def test_offline_to_non_existent_forgets_the_partition() -> None:
    c = Cluster()
    _online(c, {0: [0, 1]})
    run(c.psm.handle_state_changes([tp("t", 0)], OFFLINE))
    run(c.psm.handle_state_changes([tp("t", 0)], NON_EXISTENT))
    assert c.psm.state(tp("t", 0)) is NON_EXISTENT
    assert tp("t", 0) not in c.psm.states


# ----------------------------------------------------------------------------- broker failure flows


def test_leader_broker_failure_and_return() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2], 1: [1, 2, 0]})
    run(c.fail_brokers(0))

    # t-0 was led by 0: the next in-sync replica in assignment order leads, 0 leaves the ISR.
    assert c.psm.state(tp("t", 0)) is ONLINE
    s0, s1 = c.zk.states[tp("t", 0)], c.zk.states[tp("t", 1)]
    assert (s0.leader, s0.isr) == (1, (1, 2))
    # t-1 keeps its leader; only the ISR shrinks.
    assert (s1.leader, s1.isr) == (1, (1, 2))
    assert all(s.controller_epoch == CONTROLLER_EPOCH for s in (s0, s1))

    c.batch.clear()
    run(c.start_brokers(0))
    # The returning replica is told the current state and follows; leadership does not move back.
    sent = c.batch.leader_and_isr_to(tp("t", 0))
    assert sent[0].state == c.zk.states[tp("t", 0)] and sent[0].state.leader == 1
    assert c.zk.states[tp("t", 0)].leader == 1


def test_losing_the_last_in_sync_replica_leaves_the_partition_leaderless_until_it_returns() -> None:
    c = Cluster()
    _online(c, {0: [0, 1]})
    c.ctx.leadership[tp("t", 0)] = c.zk.bump(tp("t", 0), isr=(0,))
    run(c.fail_brokers(0))

    assert c.psm.state(tp("t", 0)) is OFFLINE
    state = c.zk.states[tp("t", 0)]
    # Leader none, but 0 stays in the ISR: a clean election must wait for it.
    assert (state.leader, state.isr) == (LeaderAndIsr.NO_LEADER, (0,))

    run(c.start_brokers(0))
    assert c.psm.state(tp("t", 0)) is ONLINE
    state = c.zk.states[tp("t", 0)]
    assert (state.leader, state.isr) == (0, (0,))
