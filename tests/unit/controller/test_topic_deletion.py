"""TopicDeletionManager driven through the real partition and replica state machines, with a
fake ZooKeeper, a recording request batch and a fake DeletionClient (Kafka's TopicDeletionManager)."""

from __future__ import annotations

from fakes import Cluster, pr, run, tp

from odradek.controller.partition_state_machine import PartitionState
from odradek.controller.replica_state_machine import ReplicaState
from odradek.protocol.errors import ErrorCode

S = ReplicaState
OK = int(ErrorCode.none)
STORAGE_ERROR = int(ErrorCode.kafka_storage_error)


def _cluster_with_topic(brokers: tuple[int, ...] = (0, 1, 2), **kwargs: bool) -> Cluster:
    c = Cluster(brokers=brokers, **kwargs)
    run(c.create_topic("t", {0: [0, 1, 2], 1: [1, 2, 0]}, {"retention.ms": "1000"}))
    run(c.create_topic("other", {0: [2, 0, 1]}))
    c.zk.delete_markers.add("t")
    c.batch.clear()
    c.zk.writes.clear()
    return c


def _delete_requests(c: Cluster) -> set[tuple[int, str, int]]:
    return {(s.broker, s.partition.topic, s.partition.partition) for s in c.batch.stop_replica if s.delete}


def _assert_topic_gone(c: Cluster) -> None:
    assert c.client.deleted_topics == ["t"]
    assert c.client.muted == ["t"]
    assert "t" not in c.zk.topics and "t" not in c.zk.configs and "t" not in c.zk.delete_markers
    assert not [p for p in c.zk.states if p.topic == "t"]
    assert "t" not in c.ctx.all_topics and "t" not in c.ctx.assignments
    assert not [p for p in c.ctx.leadership if p.topic == "t"]
    assert c.replica_states("t") == {}
    assert not c.deletion.is_topic_queued_up_for_deletion("t")
    # The other topic is untouched.
    assert "other" in c.zk.topics
    assert c.psm.state(tp("other", 0)) is PartitionState.ONLINE


def test_deleting_a_topic_whose_replicas_are_all_live() -> None:
    c = _cluster_with_topic()
    run(c.deletion.enqueue_topics_for_deletion({"t"}))

    # Partitions are gone from the partition state machine; brokers are told (leader -2 is
    # added by the real batch for topics being deleted).
    assert c.psm.state(tp("t", 0)) is PartitionState.NON_EXISTENT
    assert c.psm.state(tp("t", 1)) is PartitionState.NON_EXISTENT
    assert c.client.metadata_updates == [{tp("t", 0), tp("t", 1)}]
    # Every replica is stopped and then asked to delete, on its own broker.
    replicas = {(r.replica, r.topic, r.partition) for r in c.ctx.replicas_for_topic("t")}
    assert _delete_requests(c) == replicas
    assert {(s.broker, s.partition.topic, s.partition.partition) for s in c.batch.stop_replica
            if not s.delete} == replicas
    assert set(c.replica_states("t").values()) == {S.DELETION_STARTED}
    # Nobody is told to lead or follow a partition of a topic being deleted.
    assert [r for r in c.batch.leader_and_isr if r.partition.topic == "t"] == []
    assert c.client.deleted_topics == []

    run(c.stop_replica_response(0, {tp("t", 0): OK, tp("t", 1): OK}))
    run(c.stop_replica_response(1, {tp("t", 0): OK, tp("t", 1): OK}))
    assert c.client.deleted_topics == []  # broker 2 has not answered yet
    assert c.rsm.state(pr("t", 0, 0)) is S.DELETION_SUCCESSFUL

    run(c.stop_replica_response(2, {tp("t", 0): OK, tp("t", 1): OK}))
    _assert_topic_gone(c)


def test_a_replica_on_a_dead_broker_holds_deletion_until_the_broker_returns() -> None:
    c = _cluster_with_topic()
    run(c.fail_brokers(2))
    c.batch.clear()

    run(c.deletion.enqueue_topics_for_deletion({"t"}))
    assert c.rsm.state(pr("t", 0, 2)) is S.DELETION_INELIGIBLE
    assert c.rsm.state(pr("t", 1, 2)) is S.DELETION_INELIGIBLE
    assert "t" in c.deletion.topics_ineligible
    assert {b for b, _, _ in _delete_requests(c)} == {0, 1}

    run(c.stop_replica_response(0, {tp("t", 0): OK, tp("t", 1): OK}))
    run(c.stop_replica_response(1, {tp("t", 0): OK, tp("t", 1): OK}))
    # The live replicas are deleted; the topic waits for broker 2.
    assert c.rsm.state(pr("t", 0, 0)) is S.DELETION_SUCCESSFUL
    # Its failed replicas are reset to Offline for the retry (Kafka's retryDeletionForIneligibleReplicas).
    assert c.rsm.state(pr("t", 0, 2)) is S.OFFLINE
    assert c.client.deleted_topics == []
    assert "t" in c.zk.topics

    c.batch.clear()
    run(c.start_brokers(2))
    # Only broker 2's replicas are asked to delete again; it is not made a follower first.
    assert _delete_requests(c) == {(2, "t", 0), (2, "t", 1)}
    assert [r for r in c.batch.leader_and_isr if r.partition.topic == "t"] == []
    assert c.rsm.state(pr("t", 0, 2)) is S.DELETION_STARTED
    assert c.client.deleted_topics == []

    run(c.stop_replica_response(2, {tp("t", 0): OK, tp("t", 1): OK}))
    _assert_topic_gone(c)


def test_a_broker_dying_during_deletion_fails_its_replicas_and_they_are_retried() -> None:
    c = _cluster_with_topic()
    run(c.deletion.enqueue_topics_for_deletion({"t"}))
    run(c.fail_brokers(1))
    assert c.rsm.state(pr("t", 0, 1)) is S.DELETION_INELIGIBLE
    assert "t" in c.deletion.topics_ineligible

    run(c.stop_replica_response(0, {tp("t", 0): OK, tp("t", 1): OK}))
    run(c.stop_replica_response(2, {tp("t", 0): OK, tp("t", 1): OK}))
    assert c.client.deleted_topics == []

    c.batch.clear()
    run(c.start_brokers(1))
    assert _delete_requests(c) == {(1, "t", 0), (1, "t", 1)}
    run(c.stop_replica_response(1, {tp("t", 0): OK, tp("t", 1): OK}))
    _assert_topic_gone(c)


def test_failed_stop_replica_responses_mark_the_replica_ineligible_and_halt_deletion() -> None:
    c = _cluster_with_topic()
    run(c.deletion.enqueue_topics_for_deletion({"t"}))

    run(c.stop_replica_response(1, {tp("t", 0): STORAGE_ERROR, tp("t", 1): OK}))
    assert c.rsm.state(pr("t", 0, 1)) is S.DELETION_INELIGIBLE
    assert c.rsm.state(pr("t", 1, 1)) is S.DELETION_SUCCESSFUL
    assert "t" in c.deletion.topics_ineligible

    run(c.stop_replica_response(0, {tp("t", 0): OK, tp("t", 1): OK}))
    # A top-level error fails every partition of the response, whatever the partition codes.
    run(c.stop_replica_response(2, {tp("t", 0): OK, tp("t", 1): OK}, top_error=STORAGE_ERROR))
    assert c.rsm.state(pr("t", 0, 2)) is not S.DELETION_SUCCESSFUL
    assert c.rsm.state(pr("t", 1, 2)) is not S.DELETION_SUCCESSFUL
    assert c.client.deleted_topics == []

    # Deletion is retried when something resumes it (a broker start, as in Kafka).
    c.batch.clear()
    run(c.deletion.resume_deletion_for_topics({"t"}))
    assert _delete_requests(c) == {(1, "t", 0), (2, "t", 0), (2, "t", 1)}
    run(c.stop_replica_response(1, {tp("t", 0): OK}))
    run(c.stop_replica_response(2, {tp("t", 0): OK, tp("t", 1): OK}))
    _assert_topic_gone(c)


def test_deletion_disabled_removes_the_markers_and_keeps_the_topic() -> None:
    c = _cluster_with_topic(delete_topic_enable=False)
    run(c.deletion.init({"t"}, set()))
    assert c.client.removed_markers == [{"t"}]
    assert c.zk.delete_markers == set()

    run(c.deletion.enqueue_topics_for_deletion({"t"}))
    run(c.deletion.try_topic_deletion())
    assert not c.deletion.is_topic_queued_up_for_deletion("t")
    assert c.batch.stop_replica == []
    assert "t" in c.zk.topics and c.client.deleted_topics == []
    assert c.psm.state(tp("t", 0)) is PartitionState.ONLINE
    assert set(c.replica_states("t").values()) == {S.ONLINE}


def test_topics_ineligible_at_failover_wait_until_resumed() -> None:
    c = _cluster_with_topic()
    run(c.deletion.init({"t"}, {"t"}))
    run(c.deletion.try_topic_deletion())
    assert c.batch.stop_replica == []
    assert c.deletion.is_topic_queued_up_for_deletion("t")
    # While queued, its partitions are not brought back online.
    assert c.psm.topics_being_deleted == {"t"} and c.rsm.topics_being_deleted == {"t"}

    run(c.deletion.resume_deletion_for_topics({"t", "unknown"}))
    assert {b for b, _, _ in _delete_requests(c)} == {0, 1, 2}


def test_partition_reassignment_in_progress_halts_deletion() -> None:
    c = _cluster_with_topic()
    c.ctx.partitions_being_reassigned.add(tp("t", 1))
    run(c.deletion.enqueue_topics_for_deletion({"t"}))
    assert "t" in c.deletion.topics_ineligible
    assert c.batch.stop_replica == []
    assert c.psm.state(tp("t", 0)) is PartitionState.ONLINE


def test_responses_for_topics_not_queued_are_ignored() -> None:
    c = _cluster_with_topic()
    run(c.deletion.complete_replica_deletion([pr("other", 0, 0)]))
    run(c.deletion.fail_replica_deletion([pr("other", 0, 1)]))
    assert set(c.replica_states("other").values()) == {S.ONLINE}
    assert c.client.deleted_topics == []
