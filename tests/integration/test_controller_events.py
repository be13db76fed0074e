"""A KafkaController on the embedded ZooKeeper losing its session for real: requests queued
for it are answered NOT_CONTROLLER instead of waiting forever (Kafka's
ControllerEventManager.clearAndPut preempting the dropped events), and the controller's event
thread goes on serving requests after it is re-elected."""

from __future__ import annotations

import asyncio

from kazoo.client import KazooClient

from odradek.common import TopicPartition
from odradek.config import KafkaConfig
from odradek.controller.controller import KafkaController
from odradek.controller.events import (
    AlterPartitionReceived,
    ControlledShutdown,
    ControllerRequestEvent,
    ReplicaLeaderElection,
)
from odradek.protocol.errors import ErrorCode
from odradek.zk.client import KafkaZkClient, split_chroot
from support import wait_until_async

SESSION_TIMEOUT_MS = 6000


def broker_config(zk_connect: str) -> KafkaConfig:
    return KafkaConfig.from_props({"broker.id": "1", "zookeeper.connect": zk_connect,
                                   "listeners": "PLAINTEXT://127.0.0.1:0"})


async def expire_session(zk_connect: str, zk: KafkaZkClient) -> None:
    """Expire ``zk``'s session from the server side: a second client joins the session and
    closes it (kazoo's own test harness does the same)."""
    session_id, password = zk._zk.client_id  # type: ignore[union-attr]
    hosts, chroot = split_chroot(zk_connect)

    def join_and_close() -> None:
        other = KazooClient(hosts=hosts + chroot, client_id=(session_id, password), timeout=SESSION_TIMEOUT_MS / 1000)
        other.start(timeout=10)
        other.stop()
        other.close()

    await asyncio.get_running_loop().run_in_executor(None, join_and_close)


def request_events() -> list[ControllerRequestEvent]:
    loop = asyncio.get_running_loop()
    return [
        ControlledShutdown(2, 10, loop.create_future()),
        AlterPartitionReceived(2, 10, {("id", 0): (1, (2,), 0)}, loop.create_future()),
        ReplicaLeaderElection(frozenset({TopicPartition("t", 0)}), reply=loop.create_future()),
    ]


async def answers(events: list[ControllerRequestEvent], timeout: float = 30) -> list[object]:
    return [await asyncio.wait_for(asyncio.shield(e.reply), timeout) for e in events if e.reply is not None]


async def started_zk(zk_connect: str) -> KafkaZkClient:
    zk = KafkaZkClient(zk_connect, SESSION_TIMEOUT_MS)
    await zk.start()
    await zk.create_top_level_paths()
    return zk


def test_requests_queued_when_the_session_expires_are_answered_controller_moved(zk_connect: str) -> None:
    async def scenario() -> list[object]:
        zk = await started_zk(zk_connect)
        registrations = 0

        async def register_broker() -> int:
            nonlocal registrations
            registrations += 1
            return 0

        controller = KafkaController(broker_config(zk_connect), zk, register_broker)
        try:
            # The event thread is not running, so the requests stay queued until the expiry.
            zk.add_state_listener(controller._on_zk_state)
            events = request_events()
            for e in events:
                controller.event_manager.put(e)
            await expire_session(zk_connect, zk)
            return await answers(events)
        finally:
            await controller.shutdown()
            await zk.close()

    # ControlledShutdown's preempt fails with Kafka's ControllerMovedException, which its
    # Errors table answers STALE_CONTROLLER_EPOCH; the other two are NOT_CONTROLLER.
    assert asyncio.run(scenario()) == [(ErrorCode.stale_controller_epoch, []), (ErrorCode.not_controller, {}),
                                       (ErrorCode.not_controller, {})]


def test_after_a_session_expiry_the_controller_is_reelected_and_answers_again(zk_connect: str) -> None:
    async def scenario() -> tuple[int, int, object]:
        zk = await started_zk(zk_connect)

        async def register_broker() -> int:
            return 0

        controller = KafkaController(broker_config(zk_connect), zk, register_broker)
        try:
            controller.startup()
            await wait_until_async(lambda: controller.failover_count >= 1, message="the first election")
            first_epoch = controller.ctx.epoch
            await expire_session(zk_connect, zk)
            await wait_until_async(lambda: controller.failover_count >= 2, timeout=60, message="the re-election")
            shutdown = request_events()[0]
            controller.event_manager.put(shutdown)
            (answer,) = await answers([shutdown])
            return first_epoch, controller.ctx.epoch, answer
        finally:
            await controller.shutdown()
            await zk.close()

    first_epoch, second_epoch, answer = asyncio.run(scenario())
    assert second_epoch > first_epoch
    # Processed by the active controller: broker 2 is not registered.
    assert answer == (ErrorCode.broker_not_available, [])
