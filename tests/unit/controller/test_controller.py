"""KafkaController and its event queue: requests queued when the ZooKeeper session is lost, or
when the controller shuts down, are answered NOT_CONTROLLER (Kafka's ControllerEvent.preempt)."""

from __future__ import annotations

import asyncio

from fakes import run

from odradek.config import KafkaConfig
from odradek.controller.controller import KafkaController
from odradek.controller.events import (
    AlterPartitionReceived,
    ControlledShutdown,
    ControllerRequestEvent,
    Expire,
    PreferredReplicaLeaderElection,
)
from odradek.protocol.errors import ErrorCode


class NoZk:
    """The controller under test never reaches ZooKeeper; it only registers a state listener."""

    def __init__(self) -> None:
        self.listeners: list[object] = []

    def add_state_listener(self, listener: object) -> None:
        self.listeners.append(listener)


def controller() -> KafkaController:
    config = KafkaConfig.from_props({"broker.id": "1", "zookeeper.connect": "unused:2181",
                                     "listeners": "PLAINTEXT://127.0.0.1:0"})

    async def register_broker() -> int:
        raise AssertionError("not expected")

    return KafkaController(config, NoZk(), register_broker)  # type: ignore[arg-type]


def queued_requests(c: KafkaController) -> list[ControllerRequestEvent]:
    loop = asyncio.get_running_loop()
    events: list[ControllerRequestEvent] = [
        ControlledShutdown(2, 10, loop.create_future()),
        AlterPartitionReceived(2, 10, {("id", 0): (1, (2,), 0)}, loop.create_future()),
        PreferredReplicaLeaderElection(frozenset({("t", 0)}), loop.create_future()),
    ]
    for e in events:
        c.event_manager.put(e)
    return events


def replies(events: list[ControllerRequestEvent]) -> list[object]:
    return [e.reply.result() if e.reply is not None and e.reply.done() else "pending" for e in events]


EXPECTED = [(ErrorCode.stale_controller_epoch, []), (ErrorCode.not_controller, {}), (ErrorCode.not_controller, {})]


def test_a_lost_session_answers_the_queued_requests() -> None:
    async def main() -> None:
        c = controller()
        events = queued_requests(c)  # the event thread is not running: they stay queued
        c._on_zk_state("LOST")
        assert replies(events) == EXPECTED
        assert c.event_manager.queue_size == 1
        c.event_manager.put(Expire())  # the queue still works after a clear

    run(main())


def test_shutdown_answers_the_queued_requests() -> None:
    async def main() -> None:
        c = controller()
        events = queued_requests(c)
        await c.shutdown()
        assert replies(events) == EXPECTED
        late = queued_requests(c)
        assert replies(late) == EXPECTED

    run(main())
