"""ReassignmentManager over the real state machines, a FakeZk and a recording batch.

Kafka's steps for a partition moving from ORS to TRS: the assignment becomes RS = TRS + ORS
with AR = TRS - ORS being added and RR = ORS - TRS being removed; AR become NewReplica and
every replica in RS gets LeaderAndIsr at a bumped leader epoch; once TRS is in the ISR,
leadership moves into TRS if the leader is leaving, RR get StopReplica (delete) and go to
NonExistent, TRS is written as the assignment and the request is removed.
"""

from __future__ import annotations

import pytest
from fakes import CONTROLLER_EPOCH, Cluster, pr, run, tp

from odradek.controller.context import ReplicaAssignment
from odradek.controller.replica_state_machine import ReplicaState
from odradek.protocol.errors import ApiError, ErrorCode
from odradek.zk.client import BadVersionError

P = tp("moving", 0)


def cluster_with_partition(replicas: tuple[int, ...] = (0, 1), brokers: tuple[int, ...] = (0, 1, 2, 3)) -> Cluster:
    cluster = Cluster(brokers)
    run(cluster.create_topic("moving", {0: replicas}))
    cluster.batch.clear()
    return cluster


def test_start_writes_rs_marks_ar_new_and_sends_leader_and_isr_to_rs() -> None:
    cluster = cluster_with_partition((0, 1))
    before = cluster.zk.states[P]
    cluster.reassign_client.requests[P] = (1, 2)
    run(cluster.reassignment.on_request_znode())

    # RS = TRS + ORS, AR = [2], RR = [0]: stored in ZooKeeper and the context.
    assert cluster.ctx.partition_full_replica_assignment(P) == ReplicaAssignment((1, 2, 0), (2,), (0,))
    assert cluster.zk.topics["moving"][0] == (1, 2, 0)
    assert cluster.reassign_client.reassigning[P] == ((2,), (0,))
    assert P in cluster.ctx.partitions_being_reassigned
    assert cluster.rsm.states[pr("moving", 0, 2)] is ReplicaState.NEW
    # A new leader epoch, same leader, and every replica in RS hears of it.
    after = cluster.zk.states[P]
    assert (after.leader, after.leader_epoch) == (before.leader, before.leader_epoch + 1)
    sent = cluster.batch.leader_and_isr_to(P)
    assert set(sent) == {0, 1, 2}
    assert all(r.replicas == (1, 2, 0) and r.state.leader_epoch == after.leader_epoch for r in sent.values())
    assert all(b.controller_epoch == CONTROLLER_EPOCH for b in cluster.batch.sent)
    # Not complete: the new replica is not in the ISR yet, so nothing is removed.
    assert cluster.reassign_client.requests == {P: (1, 2)}
    assert cluster.batch.stop_replica == []


def test_completion_waits_for_trs_in_isr_then_moves_the_leader_and_removes_rr() -> None:
    cluster = cluster_with_partition((0, 1))
    cluster.reassign_client.requests[P] = (1, 2)
    run(cluster.reassignment.on_request_znode())
    run(cluster.reassignment.maybe_complete(P))  # ISR still [0, 1]: nothing happens
    assert P in cluster.ctx.partitions_being_reassigned
    cluster.batch.clear()

    cluster.grow_isr(P, (0, 1, 2))
    run(cluster.reassignment.maybe_complete(P))

    state = cluster.zk.states[P]
    assert state.leader in (1, 2)  # the old leader 0 is leaving: leadership moves into TRS
    assert 0 not in state.isr
    assert cluster.ctx.partition_full_replica_assignment(P) == ReplicaAssignment((1, 2))
    assert cluster.zk.topics["moving"][0] == (1, 2)
    assert P not in cluster.reassign_client.reassigning
    # The removed replica is stopped and deleted, and forgotten by the replica state machine.
    assert [(s.broker, s.delete) for s in cluster.batch.stop_replica if s.delete] == [(0, True)]
    assert pr("moving", 0, 0) not in cluster.rsm.states
    assert cluster.rsm.states[pr("moving", 0, 2)] is ReplicaState.ONLINE
    # The request is gone, the partition is no longer reassigning, and metadata was published.
    assert cluster.reassign_client.requests == {}
    assert cluster.reassign_client.removed == [P]
    assert P not in cluster.ctx.partitions_being_reassigned
    assert any(P in u.partitions for u in cluster.batch.update_metadata)


def test_a_leader_that_stays_keeps_leadership_at_a_new_epoch() -> None:
    cluster = cluster_with_partition((0, 1))
    cluster.reassign_client.requests[P] = (0, 2)
    run(cluster.reassignment.on_request_znode())
    started = cluster.zk.states[P]
    cluster.grow_isr(P, (0, 1, 2))
    cluster.batch.clear()
    run(cluster.reassignment.maybe_complete(P))

    state = cluster.zk.states[P]
    assert state.leader == 0
    assert state.leader_epoch == started.leader_epoch + 1
    assert state.isr == (0, 2)
    sent = cluster.batch.leader_and_isr_to(P)
    assert {b for b, r in sent.items() if r.replicas == (0, 2)} >= {0, 2}
    assert [s.broker for s in cluster.batch.stop_replica if s.delete] == [1]


def test_invalid_requests_are_removed_and_change_nothing() -> None:
    cluster = cluster_with_partition((0, 1))
    run(cluster.create_topic("doomed", {0: (0, 1)}))
    run(cluster.deletion.enqueue_topics_for_deletion({"doomed"}))
    cluster.batch.clear()
    bad = {
        tp("moving", 7): (1, 2),  # no such partition
        tp("ghost", 0): (1, 2),  # no such topic
        tp("doomed", 0): (1, 2),  # being deleted
        P: (),  # empty target
    }
    cluster.reassign_client.requests.update(bad)
    run(cluster.reassignment.on_request_znode())
    assert sorted(cluster.reassign_client.removed) == sorted(bad)
    assert cluster.ctx.partitions_being_reassigned == set()
    assert cluster.ctx.partition_full_replica_assignment(P) == ReplicaAssignment((0, 1))
    assert cluster.batch.leader_and_isr == []

    cluster.reassign_client.requests[P] = (2, 2)  # duplicates
    run(cluster.reassignment.on_request_znode())
    assert cluster.reassign_client.requests == {}
    assert cluster.ctx.partition_full_replica_assignment(P) == ReplicaAssignment((0, 1))


def test_a_request_for_the_current_replicas_completes_at_once() -> None:
    """As Kafka: no replica moves, the leader stays at a new epoch and the request is removed."""
    cluster = cluster_with_partition((0, 1))
    before = cluster.zk.states[P]
    cluster.reassign_client.requests[P] = (0, 1)
    run(cluster.reassignment.on_request_znode())
    assert cluster.reassign_client.removed == [P]
    after = cluster.zk.states[P]
    assert (after.leader, after.leader_epoch, after.isr) == (before.leader, before.leader_epoch + 1, before.isr)
    assert cluster.ctx.partition_full_replica_assignment(P) == ReplicaAssignment((0, 1))
    assert P not in cluster.ctx.partitions_being_reassigned
    assert cluster.batch.stop_replica == []


def test_deletion_waits_for_the_reassignment_and_resumes_after_it() -> None:
    cluster = cluster_with_partition((0, 1))
    cluster.reassign_client.requests[P] = (1, 2)
    run(cluster.reassignment.on_request_znode())
    run(cluster.deletion.enqueue_topics_for_deletion({"moving"}))
    assert "moving" in cluster.deletion.topics_ineligible  # halted while reassigning
    assert cluster.client.deleted_topics == []

    cluster.grow_isr(P, (0, 1, 2))
    run(cluster.reassignment.maybe_complete(P))
    assert "moving" not in cluster.deletion.topics_ineligible
    # Deletion resumed: the remaining replicas got StopReplica with delete.
    deleting = {s.broker for s in cluster.batch.stop_replica if s.delete and s.partition == P}
    assert deleting >= {1, 2}


def test_initialize_resumes_reassignments_recorded_in_the_topic_znode() -> None:
    cluster = Cluster((0, 1, 2))
    run(cluster.create_topic("moving", {0: (0, 1)}))
    # A previous controller had started moving [0, 1] -> [1, 2] and died.
    cluster.ctx.update_partition_full_replica_assignment(P, ReplicaAssignment((1, 2, 0), (2,), (0,)))
    cluster.grow_isr(P, (0, 1, 2))
    run(cluster.reassignment.initialize())
    assert cluster.ctx.partition_full_replica_assignment(P) == ReplicaAssignment((1, 2))
    assert P not in cluster.ctx.partitions_being_reassigned
    assert cluster.zk.states[P].leader in (1, 2)


def test_a_failed_epoch_bump_leaves_the_cached_state_alone() -> None:
    cluster = cluster_with_partition((0, 1))
    before = cluster.ctx.leadership[P]
    cluster.zk.fail_writes[P] = BadVersionError()
    cluster.reassign_client.requests[P] = (1, 2)
    run(cluster.reassignment.on_request_znode())
    assert cluster.ctx.leadership[P] == before
    # Only the NewReplica's own LeaderAndIsr went out, at the old epoch; no bumped one.
    assert [(r.broker, r.state) for r in cluster.batch.leader_and_isr] == [(2, before)]
    assert P in cluster.ctx.partitions_being_reassigned  # the request stays; completion can follow


# ----------------------------------------------------------------------------- KIP-455 (the API)


def test_the_api_starts_a_reassignment_and_takes_precedence_over_a_zookeeper_request() -> None:
    cluster = cluster_with_partition((0, 1))
    cluster.reassign_client.requests[P] = (0, 3)  # an older request through ZooKeeper
    results = run(cluster.reassignment.alter_partition_reassignments({P: (1, 2)}))
    assert results == {P: ApiError(ErrorCode.none)}
    assert cluster.ctx.partition_full_replica_assignment(P) == ReplicaAssignment((1, 2, 0), (2,), (0,))
    assert cluster.reassign_client.requests == {}  # the API's request won
    assert cluster.reassignment.list_partition_reassignments(None) == {
        P: ReplicaAssignment((1, 2, 0), (2,), (0,))}
    assert cluster.reassignment.list_partition_reassignments([P, tp("moving", 9)]) == {
        P: ReplicaAssignment((1, 2, 0), (2,), (0,))}

    cluster.grow_isr(P, (0, 1, 2))
    run(cluster.reassignment.maybe_complete(P))
    assert cluster.ctx.partition_full_replica_assignment(P) == ReplicaAssignment((1, 2))
    assert cluster.reassignment.list_partition_reassignments(None) == {}


def test_cancelling_returns_to_the_origin_replicas_and_deletes_the_added_ones() -> None:
    cluster = cluster_with_partition((0, 1))
    run(cluster.reassignment.alter_partition_reassignments({P: (1, 2)}))
    epoch = cluster.zk.states[P].leader_epoch
    cluster.batch.clear()

    assert run(cluster.reassignment.alter_partition_reassignments({P: None})) == {P: ApiError(ErrorCode.none)}
    assert cluster.ctx.partition_full_replica_assignment(P) == ReplicaAssignment((1, 0))
    assert cluster.zk.topics["moving"][0] == (1, 0)
    assert P not in cluster.reassign_client.reassigning
    assert P not in cluster.ctx.partitions_being_reassigned
    assert [(s.broker, s.delete) for s in cluster.batch.stop_replica if s.delete] == [(2, True)]
    assert pr("moving", 0, 2) not in cluster.rsm.states
    state = cluster.zk.states[P]
    assert state.leader == 0 and state.leader_epoch > epoch and 2 not in state.isr
    # Nothing left to cancel.
    assert run(cluster.reassignment.alter_partition_reassignments({P: None})) == {
        P: ApiError(ErrorCode.no_reassignment_in_progress)}


def test_a_new_target_starts_from_the_origin_replicas() -> None:
    cluster = cluster_with_partition((0, 1))
    run(cluster.reassignment.alter_partition_reassignments({P: (1, 2)}))
    cluster.batch.clear()
    run(cluster.reassignment.alter_partition_reassignments({P: (1, 3)}))
    # ORS stays [0, 1]: RS = [1, 3, 0], adding 3, removing 0; replica 2 is no longer wanted.
    assert cluster.ctx.partition_full_replica_assignment(P) == ReplicaAssignment((1, 3, 0), (3,), (0,))
    assert [s.broker for s in cluster.batch.stop_replica if s.delete] == [2]
    assert cluster.rsm.states[pr("moving", 0, 3)] is ReplicaState.NEW


@pytest.mark.parametrize(("target", "error", "message"), [
    ((), ErrorCode.invalid_replica_assignment, "Empty replica list specified in partition reassignment."),
    ((1, 1), ErrorCode.invalid_replica_assignment,
     "Duplicate replica ids in partition reassignment replica list: ArrayBuffer(1, 1)"),
    ((1, -1), ErrorCode.invalid_replica_assignment, "Invalid broker id in replica list: ArrayBuffer(1, -1)"),
    ((1, 7), ErrorCode.invalid_replica_assignment,
     "Replica assignment has brokers that are not alive. Replica list: ArrayBuffer(7), "
     "live broker list: Set(0, 1, 2, 3)"),
], ids=["empty", "duplicates", "negative", "dead-broker"])
def test_invalid_targets_are_refused_with_kafkas_errors(target: tuple[int, ...], error: ErrorCode,
                                                       message: str) -> None:
    cluster = cluster_with_partition((0, 1))
    assert run(cluster.reassignment.alter_partition_reassignments({P: target})) == {P: ApiError(error, message)}
    assert cluster.ctx.partitions_being_reassigned == set()
    assert cluster.batch.leader_and_isr == []


def test_unknown_and_deleted_partitions_and_a_refused_replication_factor_change() -> None:
    cluster = cluster_with_partition((0, 1))
    run(cluster.create_topic("doomed", {0: (0, 1)}))
    run(cluster.deletion.enqueue_topics_for_deletion({"doomed"}))
    results = run(cluster.reassignment.alter_partition_reassignments(
        {tp("ghost", 0): (1, 2), tp("doomed", 0): (1, 2), tp("ghost", 1): None}))
    not_found = ApiError(ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
    assert results == {tp("ghost", 0): not_found, tp("doomed", 0): not_found,
                       tp("ghost", 1): ApiError(ErrorCode.no_reassignment_in_progress)}
    assert run(cluster.reassignment.alter_partition_reassignments({P: (1, 2, 3)}, False)) == {
        P: ApiError(ErrorCode.invalid_replication_factor, "The replication factor is changed from 2 to 3")}
    assert run(cluster.reassignment.alter_partition_reassignments({P: (2, 3)}, False)) == {P: ApiError(ErrorCode.none)}
