"""ControllerContext: the controller's cached view (no I/O)."""

from __future__ import annotations

from fakes import broker_info, pr, tp

from odradek.controller.context import ControllerContext, ReplicaAssignment
from odradek.zk.zk_data import LeaderAndIsr


def _ctx() -> ControllerContext:
    ctx = ControllerContext(epoch=3, epoch_zk_version=2)
    ctx.add_live_brokers({b: (broker_info(b), 10 + b) for b in (0, 1, 2)})
    ctx.all_topics = {"a", "b"}
    for p, replicas in {0: (0, 1), 1: (1, 2), 2: (2, 0)}.items():
        ctx.update_partition_full_replica_assignment(tp("a", p), ReplicaAssignment(replicas))
    ctx.update_partition_full_replica_assignment(tp("b", 0), ReplicaAssignment((2,)))
    ctx.leadership[tp("a", 0)] = LeaderAndIsr(0, 1, (0, 1), 3, 1)
    ctx.leadership[tp("a", 1)] = LeaderAndIsr(2, 1, (1, 2), 3, 1)
    ctx.leadership[tp("b", 0)] = LeaderAndIsr(2, 0, (2,), 3, 0)
    return ctx


def test_live_and_shutting_down_brokers() -> None:
    ctx = _ctx()
    ctx.shutting_down_broker_ids.add(1)
    assert ctx.live_broker_ids == {0, 2}
    assert ctx.live_or_shutting_down_broker_ids == {0, 1, 2}
    assert not ctx.is_replica_online(1, tp("a", 0))
    assert ctx.is_replica_online(1, tp("a", 0), include_shutting_down=True)
    assert not ctx.is_replica_online(7, tp("a", 0), include_shutting_down=True)
    assert ctx.broker_epochs == {0: 10, 1: 11, 2: 12}
    # A replica on a shutting-down broker does not count as live.
    assert pr("a", 0, 1) not in ctx.all_live_replicas()
    assert pr("a", 0, 0) in ctx.all_live_replicas()


def test_a_replica_in_a_failed_log_dir_is_offline_until_its_broker_restarts() -> None:
    ctx = _ctx()
    ctx.replicas_on_offline_dirs[0] = {tp("a", 0)}
    assert not ctx.is_replica_online(0, tp("a", 0), include_shutting_down=True)
    assert ctx.is_replica_online(0, tp("b", 0))  # its other directory still serves
    assert pr("a", 0, 0) not in ctx.all_live_replicas()
    ctx.add_live_brokers({0: (ctx.live_brokers[0], 20)})  # registered again: reports anew
    assert ctx.is_replica_online(0, tp("a", 0))
    ctx.replicas_on_offline_dirs[2] = {tp("b", 0)}
    ctx.remove_live_brokers([2])
    assert 2 not in ctx.replicas_on_offline_dirs


def test_removing_a_broker_forgets_its_epoch_and_shutdown_flag() -> None:
    ctx = _ctx()
    ctx.shutting_down_broker_ids.add(1)
    ctx.remove_live_brokers([1, 9])
    assert set(ctx.live_brokers) == {0, 2}
    assert 1 not in ctx.broker_epochs
    assert ctx.shutting_down_broker_ids == set()
    # Coming back with a new registration epoch.
    ctx.add_live_brokers({1: (broker_info(1), 99)})
    assert ctx.broker_epochs[1] == 99
    assert ctx.live_broker_ids == {0, 1, 2}


def test_partition_queries() -> None:
    ctx = _ctx()
    assert ctx.partitions_for_topic("a") == [tp("a", 0), tp("a", 1), tp("a", 2)]
    assert set(ctx.all_partitions()) == {tp("a", 0), tp("a", 1), tp("a", 2), tp("b", 0)}
    assert ctx.replicas_for_topic("a") == [pr("a", 0, 0), pr("a", 0, 1), pr("a", 1, 1), pr("a", 1, 2),
                                           pr("a", 2, 2), pr("a", 2, 0)]
    assert set(ctx.replicas_on_brokers([2])) == {pr("a", 1, 2), pr("a", 2, 2), pr("b", 0, 2)}
    assert set(ctx.partitions_on_broker(0)) == {tp("a", 0), tp("a", 2)}
    assert set(ctx.partitions_led_by_broker(2)) == {tp("a", 1), tp("b", 0)}


def test_unknown_partitions_have_no_replicas_and_are_not_created_by_lookups() -> None:
    ctx = _ctx()
    assert ctx.partition_replica_assignment(tp("zz", 0)) == ()
    assert ctx.partition_full_replica_assignment(tp("zz", 0)) == ReplicaAssignment(())
    assert ctx.partitions_for_topic("zz") == []
    assert "zz" not in ctx.assignments


def test_partitions_with_leaders_only_counts_known_topics() -> None:
    ctx = _ctx()
    ctx.all_topics.discard("b")
    assert set(ctx.partitions_with_leaders()) == {tp("a", 0), tp("a", 1)}


def test_remove_topic_forgets_everything_about_it() -> None:
    ctx = _ctx()
    ctx.topic_ids = {"a": "x", "b": "y"}
    ctx.partitions_being_reassigned = {tp("a", 1), tp("b", 0)}
    ctx.remove_topic("a")
    assert ctx.all_topics == {"b"}
    assert ctx.topic_ids == {"b": "y"}
    assert "a" not in ctx.assignments
    assert set(ctx.leadership) == {tp("b", 0)}
    assert ctx.partitions_being_reassigned == {tp("b", 0)}


def test_reset_forgets_everything() -> None:
    ctx = _ctx()
    ctx.reset()
    assert (ctx.epoch, ctx.epoch_zk_version) == (0, -1)
    assert not ctx.live_brokers and not ctx.assignments and not ctx.leadership and not ctx.all_topics
    # Still usable afterwards.
    ctx.update_partition_full_replica_assignment(tp("c", 0), ReplicaAssignment((1,)))
    assert ctx.partition_replica_assignment(tp("c", 0)) == (1,)


def test_replica_assignment_during_reassignment() -> None:
    a = ReplicaAssignment((0, 1, 2, 3), adding_replicas=(3,), removing_replicas=(0,))
    assert a.target_replicas == (1, 2, 3)
    assert a.is_being_reassigned
    assert not ReplicaAssignment((0, 1)).is_being_reassigned
    assert ReplicaAssignment((0, 1)).target_replicas == (0, 1)


def test_names_print_as_kafka_does() -> None:
    assert str(tp("a", 3)) == "a-3"
    assert str(pr("a", 3, 1)) == "[Topic=a,Partition=3,Replica=1]"
    assert pr("a", 3, 1).topic_partition == tp("a", 3)
