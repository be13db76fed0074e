"""controller/channel.py: the request batch (one request per broker and kind, Kafka's order,
deletion markers) over a recording channel, and ControllerChannelManager (a queue and a
sender per broker, retried sends) against a real local asyncio server speaking the protocol."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fakes import CONTROLLER_EPOCH, broker_info, run, tp

from odradek.controller.channel import (
    EPOCH_DURING_DELETE,
    ControllerBrokerRequestBatch,
    ControllerChannelManager,
)
from odradek.controller.context import ControllerContext, ReplicaAssignment
from odradek.controller.events import (
    ControllerEvent,
    LeaderAndIsrResponseReceived,
    TopicDeletionStopReplicaResponseReceived,
)
from odradek.protocol import control
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.framing import decode_request_header, encode_response
from odradek.zk.zk_data import BrokerInfo, EndPoint, LeaderAndIsr

LISTENER = "PLAINTEXT"


# ----------------------------------------------------------------------------- batch


@dataclass
class Sent:
    broker: int
    payload: Any
    callback: Callable[[Any], None] | None


@dataclass
class RecordingChannel:
    """What ControllerBrokerRequestBatch hands the channel, in order."""

    listener: str = LISTENER
    sent: list[Sent] = field(default_factory=list)

    def send_request(self, broker_id: int, payload: Any, response_type: type[Any] | None,
                     callback: Callable[[Any], None] | None = None) -> bool:
        self.sent.append(Sent(broker_id, payload, callback))
        return True

    def kinds(self) -> list[tuple[str, int]]:
        return [(type(s.payload).__name__, s.broker) for s in self.sent]


def state(leader: int, isr: tuple[int, ...], epoch: int = 3) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, isr, CONTROLLER_EPOCH, 1)


def make_batch(brokers: tuple[int, ...] = (0, 1, 2), deleting: set[str] | None = None
               ) -> tuple[ControllerBrokerRequestBatch, RecordingChannel, list[ControllerEvent]]:
    ctx = ControllerContext(epoch=CONTROLLER_EPOCH, epoch_zk_version=1)
    ctx.add_live_brokers({b: (broker_info(b), 100 + b) for b in brokers})
    for topic in ("a", "b"):
        ctx.all_topics.add(topic)
        ctx.topic_ids[topic] = "AAAAAAAAAAAAAAAAAAAAAA" if topic == "a" else "AAAAAAAAAAAAAAAAAAAAAQ"
        ctx.update_partition_full_replica_assignment(tp(topic, 0), ReplicaAssignment((0, 1, 2)))
        ctx.leadership[tp(topic, 0)] = state(0, (0, 1, 2))
    channel = RecordingChannel()
    events: list[ControllerEvent] = []
    batch = ControllerBrokerRequestBatch(0, ctx, channel, events.append,  # type: ignore[arg-type]
                                         lambda: deleting or set())
    return batch, channel, events


def test_one_request_per_broker_and_kind_in_kafkas_order() -> None:
    batch, channel, _ = make_batch()
    a, b = tp("a", 0), tp("b", 0)
    batch.new_batch()
    batch.add_stop_replica_request_for_brokers([2], a, delete_partition=False)
    batch.add_leader_and_isr_request_for_brokers([0, 1], a, state(0, (0, 1)), ReplicaAssignment((0, 1, 2)), False)
    batch.add_leader_and_isr_request_for_brokers([0], b, state(0, (0, 1)), ReplicaAssignment((0, 1, 2)), False)
    run(batch.send_requests_to_brokers(CONTROLLER_EPOCH))

    # LeaderAndIsr first, then UpdateMetadata (to every live broker), then StopReplica.
    assert channel.kinds() == [("LeaderAndIsrRequest", 0), ("LeaderAndIsrRequest", 1),
                               ("UpdateMetadataRequest", 0), ("UpdateMetadataRequest", 1),
                               ("UpdateMetadataRequest", 2), ("StopReplicaRequest", 2)]
    to_0 = channel.sent[0].payload
    assert sorted(t.topic_name for t in to_0.topic_states) == ["a", "b"]
    assert to_0.controller_epoch == CONTROLLER_EPOCH and to_0.broker_epoch == 100
    assert [t.topic_name for t in channel.sent[1].payload.topic_states] == ["a"]
    assert [s.payload.broker_epoch for s in channel.sent[2:5]] == [100, 101, 102]
    # The batch is empty afterwards: sending again sends nothing.
    run(batch.send_requests_to_brokers(CONTROLLER_EPOCH))
    assert len(channel.sent) == 6


def test_negative_and_dead_brokers_are_skipped() -> None:
    batch, channel, _ = make_batch(brokers=(0, 1))
    batch.add_leader_and_isr_request_for_brokers([-1, 1, 7], tp("a", 0), state(1, (1,)),
                                                 ReplicaAssignment((0, 1, 2)), False)
    batch.add_stop_replica_request_for_brokers([-1, 7], tp("a", 0), delete_partition=True)
    run(batch.send_requests_to_brokers(CONTROLLER_EPOCH))
    assert channel.kinds() == [("LeaderAndIsrRequest", 1), ("UpdateMetadataRequest", 0),
                               ("UpdateMetadataRequest", 1)]


def test_is_new_and_delete_stick_when_a_partition_is_added_twice() -> None:
    batch, channel, _ = make_batch()
    a = tp("a", 0)
    batch.add_leader_and_isr_request_for_brokers([1], a, state(0, (0, 1)), ReplicaAssignment((0, 1, 2)), True)
    batch.add_leader_and_isr_request_for_brokers([1], a, state(0, (0, 1), epoch=4), ReplicaAssignment((0, 1, 2)),
                                                 False)
    batch.add_stop_replica_request_for_brokers([2], a, delete_partition=True)
    batch.add_stop_replica_request_for_brokers([2], a, delete_partition=False)
    run(batch.send_requests_to_brokers(CONTROLLER_EPOCH))
    (partition,) = channel.sent[0].payload.topic_states[0].partition_states
    assert (partition.leader_epoch, partition.is_new) == (4, True)  # the latest state, still new
    (stop,) = channel.sent[-1].payload.topic_states[0].partition_states
    assert stop.delete_partition is True


def test_topics_being_deleted_are_marked_in_update_metadata_and_stop_replica() -> None:
    batch, channel, _ = make_batch(deleting={"a"})
    batch.add_update_metadata_request_for_brokers([1], [tp("a", 0), tp("b", 0)])
    batch.add_stop_replica_request_for_brokers([1], tp("a", 0), delete_partition=True)
    batch.add_stop_replica_request_for_brokers([1], tp("b", 0), delete_partition=False)
    run(batch.send_requests_to_brokers(CONTROLLER_EPOCH))
    um, stop = channel.sent[0].payload, channel.sent[1].payload
    leaders = {t.topic_name: t.partition_states[0].leader for t in um.topic_states}
    assert leaders == {"a": LeaderAndIsr.LEADER_DURING_DELETE, "b": 0}
    epochs = {t.topic_name: t.partition_states[0].leader_epoch for t in stop.topic_states}
    assert epochs == {"a": EPOCH_DURING_DELETE, "b": 3}


def test_responses_come_back_as_controller_events() -> None:
    batch, channel, events = make_batch()
    batch.add_leader_and_isr_request_for_brokers([1], tp("a", 0), state(0, (0, 1)), ReplicaAssignment((0, 1)), False)
    batch.add_stop_replica_request_for_brokers([1], tp("a", 0), delete_partition=True)
    batch.add_stop_replica_request_for_brokers([2], tp("b", 0), delete_partition=False)
    run(batch.send_requests_to_brokers(CONTROLLER_EPOCH))
    by_kind = {type(s.payload).__name__ + str(s.broker): s for s in channel.sent}
    assert by_kind["StopReplicaRequest2"].callback is None  # no delete: nobody waits for the answer
    by_kind["StopReplicaRequest1"].callback(control.StopReplicaResponse(  # type: ignore[misc]
        error_code=ErrorCode.none, partition_errors=(control.StopReplicaPartitionError(
            topic_name="a", partition_index=0, error_code=ErrorCode.kafka_storage_error),)))
    lair_response = control.LeaderAndIsrResponse(error_code=ErrorCode.stale_controller_epoch, topics=())
    by_kind["LeaderAndIsrRequest1"].callback(lair_response)  # type: ignore[misc]
    assert events == [
        TopicDeletionStopReplicaResponseReceived(1, {("a", 0): ErrorCode.kafka_storage_error}, 0),
        LeaderAndIsrResponseReceived(1, {}, ErrorCode.stale_controller_epoch),
    ]
    assert events[0].partition_errors == {("a", 0): ErrorCode.kafka_storage_error}  # type: ignore[attr-defined]


def test_new_batch_discards_unsent_work_and_update_metadata_request_sends_alone() -> None:
    batch, channel, _ = make_batch()
    batch.add_stop_replica_request_for_brokers([1], tp("a", 0), delete_partition=False)
    run(batch.send_update_metadata_request([2], [tp("b", 0)]))
    assert channel.kinds() == [("UpdateMetadataRequest", 2)]
    (topic,) = channel.sent[0].payload.topic_states
    assert topic.topic_name == "b" and channel.sent[0].payload.controller_epoch == CONTROLLER_EPOCH


# ----------------------------------------------------------------------------- channel manager


_SIZE = struct.Struct(">i")


class FakeBroker:
    """A local server that answers UpdateMetadata in order, recording each request's
    correlation id; ``drop_first`` connections are closed on their first request unanswered."""

    def __init__(self, drop_first: int = 0) -> None:
        self.drop_first = drop_first
        self.connections = 0
        self.requests: list[tuple[int, int]] = []  # (api key, correlation id)
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        drop = self.connections <= self.drop_first
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                header, _ = decode_request_header(frame)
                if drop:
                    return
                self.requests.append((header.api_key, header.correlation_id))
                writer.write(encode_response(control.UpdateMetadataResponse(error_code=ErrorCode.none),
                                             header.correlation_id))
                await writer.drain()
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()


def local_broker(broker_id: int, port: int) -> BrokerInfo:
    return BrokerInfo(broker_id, (EndPoint(LISTENER, "127.0.0.1", port),), None)


def update_metadata(epoch: int) -> control.UpdateMetadataRequest:
    return control.UpdateMetadataRequest(controller_id=0, controller_epoch=epoch, broker_epoch=-1,
                                         topic_states=(), live_brokers=())


def run_with_broker(scenario: Callable[[ControllerChannelManager, FakeBroker, int], Any], drop_first: int = 0) -> None:
    async def main() -> None:
        broker = FakeBroker(drop_first)
        port = await broker.start()
        channel = ControllerChannelManager(0, LISTENER, request_timeout_ms=5000)
        try:
            await scenario(channel, broker, port)
        finally:
            await channel.shutdown()
            await broker.stop()

    run(main())


def test_requests_to_a_broker_are_sent_in_order_and_answered() -> None:
    async def scenario(channel: ControllerChannelManager, broker: FakeBroker, port: int) -> None:
        channel.startup([local_broker(1, port)])
        answered: list[int] = []
        done = asyncio.Event()

        def on_response(epoch: int) -> Callable[[Any], None]:
            def callback(response: Any) -> None:
                assert response.error_code == ErrorCode.none
                answered.append(epoch)
                if len(answered) == 5:
                    done.set()
            return callback

        for epoch in range(5):
            assert channel.send_request(1, update_metadata(epoch), control.UpdateMetadataResponse,
                                        on_response(epoch))
        await asyncio.wait_for(done.wait(), 10)
        assert answered == [0, 1, 2, 3, 4]
        assert [key for key, _ in broker.requests] == [ApiKey.UPDATE_METADATA] * 5
        assert broker.connections == 1
        assert channel.pending() == 0

    run_with_broker(scenario)


def test_a_failed_send_is_retried_on_a_new_connection() -> None:
    async def scenario(channel: ControllerChannelManager, broker: FakeBroker, port: int) -> None:
        channel.add_broker(local_broker(1, port))
        done = asyncio.Event()
        assert channel.send_request(1, update_metadata(7), control.UpdateMetadataResponse, lambda _: done.set())
        await asyncio.wait_for(done.wait(), 10)
        assert broker.connections == 2  # the first one closed without an answer
        assert len(broker.requests) == 1

    run_with_broker(scenario, drop_first=1)


def test_requests_to_unknown_or_removed_brokers_are_not_sent() -> None:
    async def scenario(channel: ControllerChannelManager, broker: FakeBroker, port: int) -> None:
        assert not channel.send_request(3, update_metadata(1), control.UpdateMetadataResponse)
        channel.add_broker(local_broker(1, port))
        await channel.remove_broker(1)
        assert not channel.send_request(1, update_metadata(1), control.UpdateMetadataResponse)
        assert broker.requests == []

    run_with_broker(scenario)
