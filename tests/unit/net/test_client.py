"""The broker-to-broker client connection against a small broker stand-in on 127.0.0.1:
pipelined requests matched by correlation id, and every way a connection can fail."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable

import pytest
from kio.schema.errors import ErrorCode

from odradek.net.client import BrokerConnection, ConnectionClosed
from odradek.protocol import control as c
from odradek.protocol.framing import (
    FrameBuffer,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

_SIZE = struct.Struct(">i")
TIMEOUT_S = 10.0

# (correlation id, request) -> the response frames to send (none: stay silent)
Answer = Callable[[int, c.ControlledShutdownRequest], list[bytes]]


def shutdown_request(broker_id: int) -> c.ControlledShutdownRequest:
    return c.ControlledShutdownRequest(broker_id=broker_id, broker_epoch=5)


def shutdown_response(correlation_id: int, broker_id: int) -> bytes:
    """A response that names the request's broker id, so the test can tell them apart."""
    payload = c.ControlledShutdownResponse(
        error_code=ErrorCode.none,
        remaining_partitions=(c.RemainingPartition(topic_name="t", partition_index=broker_id),))
    return encode_response(payload, correlation_id)


def echo(correlation_id: int, request: c.ControlledShutdownRequest) -> list[bytes]:
    return [shutdown_response(correlation_id, request.broker_id)]


class FakeBroker:
    """Reads request frames and answers each as ``answer`` says; records what it got."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.received: list[tuple[int, int, str | None]] = []  # correlation id, broker id, client id
        self.got_request = asyncio.Event()
        self.disconnected = asyncio.Event()  # the client closed its end
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        frames = FrameBuffer()
        try:
            while data := await reader.read(65536):
                frames.feed(data)
                while (frame := frames.next_frame()) is not None:
                    header, request = decode_request(frame)
                    assert isinstance(request, c.ControlledShutdownRequest)
                    self.received.append((header.correlation_id, request.broker_id, header.client_id))
                    self.got_request.set()
                    for response in self.answer(header.correlation_id, request):
                        writer.write(response)
                    await writer.drain()
        except ConnectionError:
            pass
        finally:
            self.disconnected.set()
            writer.close()

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()


async def with_broker(answer: Answer, body: Callable[[BrokerConnection, FakeBroker], Awaitable[None]]
                      ) -> None:
    broker = FakeBroker(answer)
    port = await broker.start()
    conn = BrokerConnection("127.0.0.1", port, "broker-1")
    try:
        await conn.connect(timeout_s=TIMEOUT_S)
        await body(conn, broker)
    finally:
        await conn.close()
        await broker.stop()


def test_pipelined_requests_get_their_own_responses() -> None:
    async def body(conn: BrokerConnection, broker: FakeBroker) -> None:
        responses = await asyncio.gather(*(conn.send(shutdown_request(i), c.ControlledShutdownResponse)
                                           for i in (11, 12, 13)))
        assert [r.remaining_partitions[0].partition_index for r in responses] == [11, 12, 13]
        ids = [correlation_id for correlation_id, _, _ in broker.received]
        assert len(set(ids)) == 3 and all(0 < i <= 2**31 - 1 for i in ids)
        assert {client_id for _, _, client_id in broker.received} == {"broker-1"}

    asyncio.run(with_broker(echo, body))


def test_responses_split_across_reads_and_batched_in_one_are_matched() -> None:
    """The stand-in holds the first two responses and sends all three at once, the last one
    in two writes."""
    held: list[bytes] = []

    def answer(correlation_id: int, request: c.ControlledShutdownRequest) -> list[bytes]:
        held.append(shutdown_response(correlation_id, request.broker_id))
        if len(held) < 3:
            return []
        last = held[2]
        return [held[0] + held[1] + last[:7], last[7:]]

    async def body(conn: BrokerConnection, broker: FakeBroker) -> None:
        responses = await asyncio.gather(*(conn.send(shutdown_request(i), c.ControlledShutdownResponse)
                                           for i in (1, 2, 3)))
        assert [r.remaining_partitions[0].partition_index for r in responses] == [1, 2, 3]

    asyncio.run(with_broker(answer, body))


def test_a_wrong_correlation_id_closes_the_connection() -> None:
    def answer(correlation_id: int, request: c.ControlledShutdownRequest) -> list[bytes]:
        return [shutdown_response(correlation_id + 1, request.broker_id)]

    async def body(conn: BrokerConnection, broker: FakeBroker) -> None:
        with pytest.raises(ConnectionClosed, match="correlation id mismatch"):
            await conn.send(shutdown_request(1), c.ControlledShutdownResponse, timeout_s=TIMEOUT_S)
        assert not conn.connected
        with pytest.raises(ConnectionClosed, match="not connected"):
            await conn.send(shutdown_request(2), c.ControlledShutdownResponse)
        assert len(broker.received) == 1  # the second request never left

    asyncio.run(with_broker(answer, body))


@pytest.mark.parametrize("frame", [
    _SIZE.pack(2) + b"\x00\x00",  # shorter than a correlation id
    _SIZE.pack(300 * 1024 * 1024),  # above max_frame_bytes
    _SIZE.pack(6) + b"\x00\x00\x00\x01\xff\xff",  # does not parse as the response
], ids=["too-short", "too-large", "garbage"])
def test_a_bad_response_fails_the_request_and_closes(frame: bytes) -> None:
    async def body(conn: BrokerConnection, broker: FakeBroker) -> None:
        with pytest.raises(ConnectionClosed):
            await conn.send(shutdown_request(1), c.ControlledShutdownResponse, timeout_s=TIMEOUT_S)
        assert not conn.connected

    asyncio.run(with_broker(lambda _cid, _request: [frame], body))


def test_a_response_nobody_asked_for_closes_the_connection() -> None:
    async def body(conn: BrokerConnection, broker: FakeBroker) -> None:
        # A request that expects no response, answered anyway.
        assert await conn.send(shutdown_request(1), None) is None
        await asyncio.wait_for(broker.disconnected.wait(), TIMEOUT_S)
        assert not conn.connected
        with pytest.raises(ConnectionClosed, match="not connected"):
            await conn.send(shutdown_request(2), c.ControlledShutdownResponse)

    asyncio.run(with_broker(echo, body))


def test_a_request_without_response_returns_at_once() -> None:
    async def body(conn: BrokerConnection, broker: FakeBroker) -> None:
        assert await conn.send(shutdown_request(7), None) is None
        await asyncio.wait_for(broker.got_request.wait(), TIMEOUT_S)
        assert [broker_id for _, broker_id, _ in broker.received] == [7]
        assert conn.connected

    asyncio.run(with_broker(lambda _cid, _request: [], body))


async def send_frame(conn: BrokerConnection, request: c.ControlledShutdownRequest, timeout_s: float = TIMEOUT_S
                     ) -> c.ControlledShutdownResponse:
    """``request`` through send_frame, encoded and decoded here."""
    correlation_id = conn.next_correlation_id()
    frame = await conn.send_frame(encode_request(request, correlation_id, conn.client_id), correlation_id, timeout_s)
    got_id, response = decode_response(frame, c.ControlledShutdownResponse)
    assert got_id == correlation_id
    return response


def test_encoded_frames_pipeline_with_payloads() -> None:
    async def body(conn: BrokerConnection, broker: FakeBroker) -> None:
        responses = await asyncio.gather(
            send_frame(conn, shutdown_request(21)),
            conn.send(shutdown_request(22), c.ControlledShutdownResponse),
            send_frame(conn, shutdown_request(23)))
        assert [r.remaining_partitions[0].partition_index for r in responses] == [21, 22, 23]
        assert len({correlation_id for correlation_id, _, _ in broker.received}) == 3

    asyncio.run(with_broker(echo, body))


def test_a_wrong_correlation_id_for_an_encoded_frame_closes_the_connection() -> None:
    def answer(correlation_id: int, request: c.ControlledShutdownRequest) -> list[bytes]:
        return [shutdown_response(correlation_id + 1, request.broker_id)]

    async def body(conn: BrokerConnection, broker: FakeBroker) -> None:
        with pytest.raises(ConnectionClosed, match="correlation id mismatch"):
            await send_frame(conn, shutdown_request(1))
        assert not conn.connected
        with pytest.raises(ConnectionClosed, match="not connected"):
            await send_frame(conn, shutdown_request(2))

    asyncio.run(with_broker(answer, body))


@pytest.mark.parametrize("raw", [False, True], ids=["payload", "frame"])
def test_a_request_that_times_out_closes_the_connection(raw: bool) -> None:
    """A late response would be matched to the wrong request: start over instead."""

    async def body(conn: BrokerConnection, broker: FakeBroker) -> None:
        with pytest.raises(TimeoutError):
            if raw:
                await send_frame(conn, shutdown_request(1), timeout_s=0.05)
            else:
                await conn.send(shutdown_request(1), c.ControlledShutdownResponse, timeout_s=0.05)
        assert not conn.connected
        with pytest.raises(ConnectionClosed, match="not connected"):
            await conn.send(shutdown_request(2), c.ControlledShutdownResponse)
        assert len(broker.received) == 1

    asyncio.run(with_broker(lambda _cid, _request: [], body))


def test_a_response_within_the_timeout_cancels_the_timer() -> None:
    """The timer set for a request that was answered fires into nothing: the connection
    stays usable long after."""

    async def body(conn: BrokerConnection, broker: FakeBroker) -> None:
        await send_frame(conn, shutdown_request(1), timeout_s=0.05)
        await conn.send(shutdown_request(2), c.ControlledShutdownResponse, timeout_s=0.05)
        await asyncio.sleep(0.1)
        assert conn.connected
        assert (await send_frame(conn, shutdown_request(3))).remaining_partitions[0].partition_index == 3

    asyncio.run(with_broker(echo, body))


def test_a_cancelled_request_leaves_the_pipeline_aligned() -> None:
    """The caller gives up (cancelled, not timed out): its response, when it comes, is
    dropped and the next request gets its own."""
    held: list[bytes] = []

    def answer(correlation_id: int, request: c.ControlledShutdownRequest) -> list[bytes]:
        held.append(shutdown_response(correlation_id, request.broker_id))
        return [] if len(held) < 2 else held

    async def body(conn: BrokerConnection, broker: FakeBroker) -> None:
        first = asyncio.ensure_future(send_frame(conn, shutdown_request(1)))
        await asyncio.wait_for(broker.got_request.wait(), TIMEOUT_S)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert (await send_frame(conn, shutdown_request(2))).remaining_partitions[0].partition_index == 2
        assert conn.connected

    asyncio.run(with_broker(answer, body))


def test_the_peer_closing_fails_every_pending_request() -> None:
    async def body(conn: BrokerConnection, broker: FakeBroker) -> None:
        pending = [asyncio.ensure_future(conn.send(shutdown_request(i), c.ControlledShutdownResponse))
                   for i in (1, 2)]
        await asyncio.wait_for(broker.got_request.wait(), TIMEOUT_S)
        await broker.stop()
        for request in pending:
            with pytest.raises(ConnectionClosed, match="lost"):
                await asyncio.wait_for(request, TIMEOUT_S)
        assert not conn.connected

    asyncio.run(with_broker(lambda _cid, _request: [], body))


def test_close_fails_pending_requests_and_can_reconnect() -> None:
    async def body(conn: BrokerConnection, broker: FakeBroker) -> None:
        pending = asyncio.ensure_future(conn.send(shutdown_request(1), c.ControlledShutdownResponse))
        await asyncio.wait_for(broker.got_request.wait(), TIMEOUT_S)
        await conn.close()
        with pytest.raises(ConnectionClosed, match="connection closed"):
            await pending
        with pytest.raises(ConnectionClosed, match="not connected"):
            await conn.send(shutdown_request(2), c.ControlledShutdownResponse)
        broker.answer = echo
        await conn.connect(timeout_s=TIMEOUT_S)
        response = await conn.send(shutdown_request(3), c.ControlledShutdownResponse,
                                   timeout_s=TIMEOUT_S)
        assert response.remaining_partitions[0].partition_index == 3

    asyncio.run(with_broker(lambda _cid, _request: [], body))


def test_connect_to_a_closed_port_fails() -> None:
    async def scenario() -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # bound, never listening: the connection is refused
            conn = BrokerConnection("127.0.0.1", port, "broker-1")
            try:
                with pytest.raises(ConnectionRefusedError):
                    await conn.connect(timeout_s=TIMEOUT_S)
                assert not conn.connected
            finally:
                await conn.close()

    asyncio.run(scenario())


def test_connect_times_out_when_the_peer_does_not_accept() -> None:
    """A listener with a full accept queue drops new SYNs: the connect would hang."""

    async def scenario() -> None:
        with socket.socket() as listener, socket.socket() as filler:
            listener.bind(("127.0.0.1", 0))
            listener.listen(0)  # Linux queues one connection; it is never accepted
            filler.connect(listener.getsockname())
            conn = BrokerConnection("127.0.0.1", listener.getsockname()[1], "broker-1")
            try:
                with pytest.raises(TimeoutError):
                    await conn.connect(timeout_s=0.2)
                assert not conn.connected
            finally:
                await conn.close()

    asyncio.run(scenario())
