"""LogDirEventHandler over the fake cluster: a log dir event notification makes the controller
ask the broker about every replica it hosts; the replicas it answers KAFKA_STORAGE_ERROR for
go offline (leadership moves, they leave the ISR) and stay so until the broker restarts."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest
from fakes import Cluster, pr, run, tp
from kazoo.protocol.states import WatchedEvent

from odradek.controller.broker_change import BrokerChangeHandler
from odradek.controller.events import LeaderAndIsrResponseReceived
from odradek.controller.log_dir_event import LogDirEventHandler
from odradek.controller.replica_state_machine import ReplicaState
from odradek.protocol.errors import ErrorCode as E
from odradek.zk.client import ControllerMovedError
from odradek.zk.zk_data import LeaderAndIsr, LogDirEventNotificationSequenceZNode

STORAGE = int(E.kafka_storage_error)


class FakeNotifications:
    """``/log_dir_event_notification`` in memory, with the controller-epoch fence."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.znodes: dict[str, bytes] = {}
        self.watched = 0

    def write(self, broker_id: int) -> None:
        name = f"{LogDirEventNotificationSequenceZNode.PREFIX}{len(self.znodes):010d}"
        self.znodes[name] = LogDirEventNotificationSequenceZNode.encode(broker_id)

    async def get_log_dir_event_notifications(self, watch: Callable[[WatchedEvent], None] | None = None
                                              ) -> list[str]:
        self.watched += watch is not None
        return sorted(self.znodes)

    async def get_broker_ids_from_log_dir_events(self, names: Iterable[str]) -> list[int]:
        return [b for n in names if (b := LogDirEventNotificationSequenceZNode.decode(self.znodes.get(n))) is not None]

    async def delete_log_dir_event_notifications(self, names: Iterable[str], epoch_zk_version: int) -> None:
        self.cluster.zk._fence(epoch_zk_version)
        for n in names:
            self.znodes.pop(n, None)


def harness() -> tuple[Cluster, FakeNotifications, LogDirEventHandler]:
    c = Cluster()
    notifications = FakeNotifications(c)
    broker_change = BrokerChangeHandler(c.ctx, None, c.batch, c.psm, c.rsm, c.deletion, c.reassignment,  # type: ignore[arg-type]
                                        None)  # type: ignore[arg-type]
    handler = LogDirEventHandler(0, c.ctx, notifications, c.rsm, broker_change.on_replicas_become_offline,
                                 lambda _event: None)
    return c, notifications, handler


def test_the_replicas_a_broker_reports_in_a_failed_dir_lose_leadership_and_leave_the_isr() -> None:
    c, notifications, handler = harness()
    run(c.create_topic("t", {0: [0, 1, 2], 1: [0, 2, 1], 2: [1, 2, 0]}))
    c.batch.clear()
    notifications.write(0)
    run(handler.process_notifications())
    # Broker 0 is asked about every replica it hosts; the notification is gone.
    assert {r.partition for r in c.batch.leader_and_isr if r.broker == 0} == {tp("t", 0), tp("t", 1), tp("t", 2)}
    assert notifications.znodes == {} and notifications.watched == 1
    c.batch.clear()
    # t-0 and t-1 were in the failed directory; t-2 (led by 1) is in a healthy one.
    run(handler.process_leader_and_isr_response(LeaderAndIsrResponseReceived(
        0, {("t", 0): STORAGE, ("t", 1): STORAGE, ("t", 2): 0})))
    assert c.ctx.replicas_on_offline_dirs == {0: {tp("t", 0), tp("t", 1)}}
    assert c.ctx.leadership[tp("t", 0)].leader == 1 and c.ctx.leadership[tp("t", 1)].leader == 2
    assert 0 not in c.ctx.leadership[tp("t", 0)].isr and 0 not in c.ctx.leadership[tp("t", 1)].isr
    assert c.ctx.leadership[tp("t", 2)] == c.zk.states[tp("t", 2)] and 0 in c.ctx.leadership[tp("t", 2)].isr
    assert c.rsm.state(pr("t", 0, 0)) is ReplicaState.OFFLINE
    assert c.rsm.state(pr("t", 2, 0)) is ReplicaState.ONLINE
    assert {(s.broker, s.partition) for s in c.batch.stop_replica} == {(0, tp("t", 0)), (0, tp("t", 1))}
    # The same answer again changes nothing; a replica answered NONE is online again.
    c.batch.clear()
    writes = len(c.zk.writes)
    run(handler.process_leader_and_isr_response(LeaderAndIsrResponseReceived(0, {("t", 0): STORAGE})))
    assert len(c.zk.writes) == writes and c.batch.sent == []
    run(handler.process_leader_and_isr_response(LeaderAndIsrResponseReceived(0, {("t", 1): 0})))
    assert c.ctx.replicas_on_offline_dirs == {0: {tp("t", 0)}}


def test_a_refused_request_and_a_dead_broker_change_nothing() -> None:
    c, _, handler = harness()
    run(c.create_topic("t", {0: [0, 1]}))
    run(handler.process_leader_and_isr_response(LeaderAndIsrResponseReceived(
        0, {("t", 0): STORAGE}, top_error=int(E.stale_controller_epoch))))
    c.ctx.remove_live_brokers([1])
    run(handler.process_leader_and_isr_response(LeaderAndIsrResponseReceived(1, {("t", 0): STORAGE})))
    assert c.ctx.replicas_on_offline_dirs == {}
    assert c.ctx.leadership[tp("t", 0)] == LeaderAndIsr(0, 0, (0, 1), c.ctx.epoch, 0)


def test_a_new_controller_drops_old_notifications_and_a_deposed_one_deletes_nothing() -> None:
    c, notifications, handler = harness()
    notifications.write(2)
    run(handler.on_failover())
    assert notifications.znodes == {} and notifications.watched == 1
    notifications.write(1)
    c.zk.move_controller()
    with pytest.raises(ControllerMovedError):
        run(handler.process_notifications())
    assert list(notifications.znodes)
