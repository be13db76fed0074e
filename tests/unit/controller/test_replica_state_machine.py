"""ReplicaStateMachine over a fake ZooKeeper and a recording request batch (the
replica transitions of Kafka's ZkReplicaStateMachine)."""

from __future__ import annotations

import pytest
from fakes import CONTROLLER_EPOCH, Cluster, pr, run, state_change_log, tp

from odradek.controller.context import ReplicaAssignment
from odradek.controller.replica_state_machine import VALID_PREVIOUS_REPLICA_STATES, ReplicaState
from odradek.zk.client import BadVersionError, ControllerMovedError
from odradek.zk.zk_data import LeaderAndIsr

S = ReplicaState


def test_transition_table_is_kafkas() -> None:
    expected = {
        S.NEW: {S.NON_EXISTENT},
        S.ONLINE: {S.NEW, S.ONLINE, S.OFFLINE, S.DELETION_INELIGIBLE},
        S.OFFLINE: {S.NEW, S.ONLINE, S.OFFLINE, S.DELETION_INELIGIBLE},
        S.DELETION_STARTED: {S.OFFLINE},
        S.DELETION_SUCCESSFUL: {S.DELETION_STARTED},
        S.DELETION_INELIGIBLE: {S.OFFLINE, S.DELETION_STARTED},
        S.NON_EXISTENT: {S.DELETION_SUCCESSFUL},
    }
    assert expected == VALID_PREVIOUS_REPLICA_STATES


def _online(c: Cluster, assignment: dict[int, list[int]], topic: str = "t") -> None:
    run(c.create_topic(topic, assignment))
    c.batch.clear()
    c.zk.writes.clear()


# ----------------------------------------------------------------------------- New, Online


def test_new_replica_of_a_new_partition_is_only_marked() -> None:
    c = Cluster()
    c.add_topic("t", {0: [0, 1]})
    run(c.rsm.handle_state_changes([pr("t", 0, 0), pr("t", 0, 1)], S.NEW))
    assert c.rsm.state(pr("t", 0, 0)) is S.NEW
    assert c.batch.leader_and_isr == []


def test_new_replica_of_a_partition_with_a_leader_gets_leader_and_isr_as_new() -> None:
    c = Cluster(brokers=[0, 1, 2])
    _online(c, {0: [0, 1]})
    c.ctx.update_partition_full_replica_assignment(tp("t", 0), ReplicaAssignment((0, 1, 2)))
    run(c.rsm.handle_state_changes([pr("t", 0, 2)], S.NEW))
    assert c.rsm.state(pr("t", 0, 2)) is S.NEW
    [sent] = c.batch.leader_and_isr
    assert (sent.broker, sent.is_new, sent.state) == (2, True, c.ctx.leadership[tp("t", 0)])


def test_the_current_leader_cannot_become_a_new_replica() -> None:
    c = Cluster()
    _online(c, {0: [0, 1]})
    run(c.rsm.handle_state_changes([pr("t", 0, 0)], S.OFFLINE))
    run(c.rsm.handle_state_changes([pr("t", 0, 0)], S.DELETION_STARTED))
    run(c.rsm.handle_state_changes([pr("t", 0, 0)], S.DELETION_SUCCESSFUL))
    run(c.rsm.handle_state_changes([pr("t", 0, 0)], S.NON_EXISTENT))
    # Pretend ZooKeeper still names 0 as leader.
    c.ctx.leadership[tp("t", 0)] = LeaderAndIsr(0, 9, (0, 1), CONTROLLER_EPOCH, 7)
    c.batch.clear()
    with state_change_log() as log:
        run(c.rsm.handle_state_changes([pr("t", 0, 0)], S.NEW))
    assert c.rsm.state(pr("t", 0, 0)) is S.NON_EXISTENT
    assert c.batch.leader_and_isr == []
    assert any("cannot be moved to NewReplica" in line for line in log.errors())


def test_new_to_online_sends_nothing_and_adds_a_missing_replica_to_the_assignment() -> None:
    c = Cluster()
    c.add_topic("t", {0: [0]})
    run(c.rsm.handle_state_changes([pr("t", 0, 0), pr("t", 0, 1)], S.NEW))
    run(c.rsm.handle_state_changes([pr("t", 0, 0), pr("t", 0, 1)], S.ONLINE))
    assert c.rsm.state(pr("t", 0, 1)) is S.ONLINE
    assert c.ctx.partition_replica_assignment(tp("t", 0)) == (0, 1)
    assert c.batch.leader_and_isr == []


def test_offline_to_online_sends_the_current_leader_and_isr() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    run(c.rsm.handle_state_changes([pr("t", 0, 2)], S.OFFLINE))
    c.batch.clear()
    run(c.rsm.handle_state_changes([pr("t", 0, 2)], S.ONLINE))
    assert c.rsm.state(pr("t", 0, 2)) is S.ONLINE
    [sent] = c.batch.leader_and_isr
    assert (sent.broker, sent.is_new, sent.state) == (2, False, c.ctx.leadership[tp("t", 0)])


# ----------------------------------------------------------------------------- Online -> Offline


def test_follower_going_offline_is_stopped_and_removed_from_the_isr() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    before = c.zk.states[tp("t", 0)]
    run(c.rsm.handle_state_changes([pr("t", 0, 2)], S.OFFLINE))

    assert c.rsm.state(pr("t", 0, 2)) is S.OFFLINE
    assert [(s.broker, s.partition, s.delete) for s in c.batch.stop_replica] == [(2, tp("t", 0), False)]
    after = c.zk.states[tp("t", 0)]
    assert after == LeaderAndIsr(0, before.leader_epoch + 1, (0, 1), CONTROLLER_EPOCH, before.zk_version + 1)
    assert c.ctx.leadership[tp("t", 0)] == after
    # The remaining replicas learn the new ISR; the stopped one does not.
    sent = c.batch.leader_and_isr_to(tp("t", 0))
    assert set(sent) == {0, 1}
    assert all(r.state == after and not r.is_new for r in sent.values())


def test_leader_going_offline_leaves_the_partition_without_leader() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    run(c.rsm.handle_state_changes([pr("t", 0, 0)], S.OFFLINE))
    after = c.zk.states[tp("t", 0)]
    assert after.leader == LeaderAndIsr.NO_LEADER == -1
    assert after.isr == (1, 2)


def test_the_last_isr_member_stays_in_the_isr() -> None:
    c = Cluster()
    _online(c, {0: [0, 1]})
    c.ctx.leadership[tp("t", 0)] = c.zk.bump(tp("t", 0), isr=(0,))
    run(c.rsm.handle_state_changes([pr("t", 0, 0)], S.OFFLINE))
    after = c.zk.states[tp("t", 0)]
    assert (after.leader, after.isr) == (-1, (0,))
    assert c.rsm.state(pr("t", 0, 0)) is S.OFFLINE


def test_isr_removal_is_written_with_this_controllers_epoch() -> None:
    # The state was last written by an earlier controller; Kafka's updateLeaderAndIsr
    # stamps every write with the current controller epoch.
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    c.ctx.leadership[tp("t", 0)] = c.zk.bump(tp("t", 0), controller_epoch=CONTROLLER_EPOCH - 2)
    run(c.rsm.handle_state_changes([pr("t", 0, 1)], S.OFFLINE))
    assert c.zk.states[tp("t", 0)].controller_epoch == CONTROLLER_EPOCH
    assert c.ctx.leadership[tp("t", 0)].controller_epoch == CONTROLLER_EPOCH


def test_replica_outside_the_isr_goes_offline_without_a_zookeeper_write() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    c.ctx.leadership[tp("t", 0)] = c.zk.bump(tp("t", 0), isr=(0, 1))
    run(c.rsm.handle_state_changes([pr("t", 0, 2)], S.OFFLINE))
    assert c.zk.writes == []
    assert c.rsm.state(pr("t", 0, 2)) is S.OFFLINE
    assert [s.broker for s in c.batch.stop_replica] == [2]


def test_replica_of_a_partition_without_leader_only_triggers_update_metadata() -> None:
    c = Cluster()
    c.add_topic("t", {0: [0, 1]})
    run(c.rsm.handle_state_changes([pr("t", 0, 1)], S.NEW))
    run(c.rsm.handle_state_changes([pr("t", 0, 1)], S.OFFLINE))
    assert c.rsm.state(pr("t", 0, 1)) is S.OFFLINE
    assert c.zk.writes == []
    [um] = c.batch.update_metadata
    assert um.brokers == {0, 1, 2} and um.partitions == {tp("t", 0)}


def test_no_leader_and_isr_for_topics_being_deleted() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    c.rsm.topics_being_deleted = {"t"}
    run(c.rsm.handle_state_changes([pr("t", 0, 2)], S.OFFLINE))
    assert c.zk.states[tp("t", 0)].isr == (0, 1)
    assert c.batch.leader_and_isr == []


def test_failed_isr_write_is_logged_and_keeps_the_cached_state() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    before = c.ctx.leadership[tp("t", 0)]
    c.zk.fail_writes[tp("t", 0)] = BadVersionError()
    with state_change_log() as log:
        run(c.rsm.handle_state_changes([pr("t", 0, 2)], S.OFFLINE))
    assert c.ctx.leadership[tp("t", 0)] == before
    assert c.batch.leader_and_isr == []
    assert any("Failed to remove replica 2 from ISR" in line for line in log.errors())


def test_a_deposed_controller_cannot_shrink_the_isr() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    before = dict(c.zk.states)
    c.zk.move_controller()
    with pytest.raises(ControllerMovedError):
        run(c.rsm.handle_state_changes([pr("t", 0, 2)], S.OFFLINE))
    assert c.zk.states == before


# ----------------------------------------------------------------------------- deletion states


def test_offline_deletion_started_successful_non_existent() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    r = pr("t", 0, 2)
    run(c.rsm.handle_state_changes([r], S.OFFLINE))
    c.batch.clear()

    run(c.rsm.handle_state_changes([r], S.DELETION_STARTED))
    assert c.rsm.state(r) is S.DELETION_STARTED
    assert [(s.broker, s.delete) for s in c.batch.stop_replica] == [(2, True)]
    assert not c.rsm.are_all_replicas_for_topic_deleted("t")

    run(c.rsm.handle_state_changes([r], S.DELETION_SUCCESSFUL))
    assert c.rsm.state(r) is S.DELETION_SUCCESSFUL
    assert c.rsm.replicas_in_state("t", S.DELETION_SUCCESSFUL) == [r]

    run(c.rsm.handle_state_changes([r], S.NON_EXISTENT))
    assert r not in c.rsm.states
    assert c.ctx.partition_replica_assignment(tp("t", 0)) == (0, 1)


def test_deletion_ineligible_and_back() -> None:
    c = Cluster()
    _online(c, {0: [0, 1, 2]})
    r = pr("t", 0, 1)
    run(c.rsm.handle_state_changes([r], S.OFFLINE))
    run(c.rsm.handle_state_changes([r], S.DELETION_STARTED))
    run(c.rsm.handle_state_changes([r], S.DELETION_INELIGIBLE))
    assert c.rsm.is_any_replica_in_state("t", S.DELETION_INELIGIBLE)
    run(c.rsm.handle_state_changes([r], S.OFFLINE))
    assert c.rsm.state(r) is S.OFFLINE
    run(c.rsm.handle_state_changes([r], S.DELETION_INELIGIBLE))
    run(c.rsm.handle_state_changes([r], S.ONLINE))
    assert c.rsm.state(r) is S.ONLINE


@pytest.mark.parametrize(("start", "target"), [
    (S.ONLINE, S.DELETION_STARTED),
    (S.ONLINE, S.DELETION_SUCCESSFUL),
    (S.ONLINE, S.NON_EXISTENT),
    (S.ONLINE, S.NEW),
    (S.ONLINE, S.DELETION_INELIGIBLE),
    (S.OFFLINE, S.DELETION_SUCCESSFUL),
    (S.OFFLINE, S.NON_EXISTENT),
    (S.NON_EXISTENT, S.ONLINE),
    (S.NON_EXISTENT, S.OFFLINE),
])
def test_invalid_replica_transitions_are_refused_and_logged(start: ReplicaState, target: ReplicaState) -> None:
    c = Cluster()
    c.add_topic("t", {0: [0, 1]})
    r = pr("t", 0, 1)
    if start is not S.NON_EXISTENT:
        run(c.create_topic("t", {0: [0, 1]}))
    if start is S.OFFLINE:
        run(c.rsm.handle_state_changes([r], S.OFFLINE))
    c.batch.clear()
    writes = len(c.zk.writes)
    with state_change_log() as log:
        run(c.rsm.handle_state_changes([r], target))
    assert c.rsm.state(r) is start
    assert len(c.zk.writes) == writes
    assert c.batch.stop_replica == [] and c.batch.leader_and_isr == []
    assert any(f"Invalid state transition for replica {r}: {start} -> {target}" in line for line in log.errors())


# ----------------------------------------------------------------------------- startup


def test_startup_brings_live_replicas_online_and_dead_ones_offline() -> None:
    c = Cluster(brokers=[0, 1, 2])
    c.add_topic("t", {0: [0, 1, 2]})
    state = LeaderAndIsr(0, 3, (0, 1, 2), CONTROLLER_EPOCH - 1, 0)
    c.zk.states[tp("t", 0)] = state
    c.ctx.leadership[tp("t", 0)] = state
    c.ctx.remove_live_brokers([2])

    run(c.rsm.startup())

    assert c.rsm.state(pr("t", 0, 0)) is S.ONLINE
    assert c.rsm.state(pr("t", 0, 2)) is S.OFFLINE
    # Every live replica is told the current state (not as new).
    sent_to = {r.broker for r in c.batch.leader_and_isr if r.state == state}
    assert sent_to == {0, 1}
    # The dead replica left the ISR.
    assert c.zk.states[tp("t", 0)].isr == (0, 1)
