"""Replica leader elections on request (ElectLeaders, KIP-460) over the real state machines
and a FakeZk: Kafka's per-partition answers for PREFERRED and UNCLEAN elections."""

from __future__ import annotations

from fakes import Cluster, run, tp

from odradek.controller.leader_selectors import ElectionType
from odradek.controller.preferred_election import PreferredReplicaElection
from odradek.protocol.errors import ApiError, ErrorCode

NOT_NEEDED = ApiError(ErrorCode.election_not_needed)


def elector(cluster: Cluster) -> PreferredReplicaElection:
    return PreferredReplicaElection(cluster.ctx, cluster.zk, cluster.psm, cluster.deletion,  # type: ignore[arg-type]
                                    lambda _event: None)


def test_preferred_election_moves_leadership_back_to_the_first_replica() -> None:
    cluster = Cluster((0, 1, 2))
    moved, settled = run(cluster.create_topic("t", {0: (0, 1), 1: (1, 0)}))
    run(cluster.fail_brokers(0))
    run(cluster.start_brokers(0))
    cluster.grow_isr(moved, (1, 0))
    assert cluster.ctx.leadership[moved].leader == 1
    results = run(elector(cluster).elect_leaders([moved, settled], ElectionType.PREFERRED))
    assert results == {moved: 0, settled: NOT_NEEDED}
    assert cluster.zk.states[moved].leader == 0
    assert cluster.batch.leader_and_isr_to(moved)[0].state.leader == 0


def test_preferred_election_errors() -> None:
    cluster = Cluster((0, 1, 2))
    behind, = run(cluster.create_topic("t", {0: (0, 1)}))
    run(cluster.create_topic("doomed", {0: (1, 0)}))
    run(cluster.deletion.enqueue_topics_for_deletion({"doomed"}))
    run(cluster.fail_brokers(0))  # the preferred replica of t-0 is gone
    results = run(elector(cluster).elect_leaders([behind, tp("doomed", 0), tp("t", 5), tp("ghost", 0)]))
    assert results[tp("t", 5)] == results[tp("ghost", 0)] == ApiError(
        ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
    assert results[tp("doomed", 0)] == ApiError(ErrorCode.invalid_topic_exception, "The topic is being deleted")
    error, message = results[behind]
    assert error == ErrorCode.preferred_leader_not_available
    assert message is not None and "Failed to elect leader for partition t-0" in message
    assert cluster.zk.states[behind].leader == 1


def test_unclean_election_elects_outside_the_isr_only_where_there_is_no_leader() -> None:
    cluster = Cluster((0, 1, 2))
    lost, led = run(cluster.create_topic("t", {0: (0, 1), 1: (1, 2)}))
    cluster.grow_isr(lost, (0,))  # replica 1 fell behind
    run(cluster.fail_brokers(0))  # unclean election is off for the topic: no leader
    assert cluster.zk.states[lost].leader == -1
    results = run(elector(cluster).elect_leaders([lost, led], ElectionType.UNCLEAN))
    assert results == {lost: 1, led: NOT_NEEDED}
    assert (cluster.zk.states[lost].leader, cluster.zk.states[lost].isr) == (1, (1,))


def test_unclean_election_without_a_live_replica() -> None:
    cluster = Cluster((0, 1, 2))
    gone, = run(cluster.create_topic("t", {0: (0, 1)}))
    run(cluster.fail_brokers(0, 1))
    (error, message), = run(elector(cluster).elect_leaders([gone], ElectionType.UNCLEAN)).values()
    assert error == ErrorCode.eligible_leaders_not_available
    assert message is not None and "under strategy unclean" in message
