"""The broker's socket server over real sockets on 127.0.0.1: request order, large frames,
file regions, and peers that break the protocol (each closes its own connection only).

Every test runs on both event loops the broker may use: asyncio's and uvloop's (whose
transports feed ``asyncio.BufferedProtocol`` differently).
"""

from __future__ import annotations

import asyncio
import datetime
import ssl
import struct
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import pytest
import uvloop
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from odradek.config import Listener
from odradek.net.server import (
    CloseConnection,
    FileChunk,
    ListenerSecurity,
    Request,
    Response,
    SocketServer,
)
from odradek.protocol.framing import UnsupportedRequestError, encode_request
from odradek.security.certs import CertificateAuthority
from support.waiting import wait_until_async

_SIZE = struct.Struct(">i")
_ANSWER = struct.Struct(">iii")  # size, correlation id, a value the test chooses
IO_TIMEOUT_S = 10.0

Runner = Callable[[Coroutine[Any, Any, None]], None]


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Runner:
    return asyncio.run if request.param == "asyncio" else uvloop.run


def metadata_request(correlation_id: int) -> bytes:
    payload = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    return encode_request(payload, correlation_id, "test-client")


def produce_request(correlation_id: int, records: bytes) -> bytes:
    payload = ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
        topic_data=(TopicProduceData(name="t", partition_data=(
            PartitionProduceData(index=0, records=records),)),))
    return encode_request(payload, correlation_id, "test-client")


def answer(request: Request, value: int) -> bytes:
    """A response frame: the request's correlation id and ``value``."""
    return _ANSWER.pack(_ANSWER.size - 4, request.header.correlation_id, value)


class Peer:
    """A client socket that writes raw frames and reads the server's answers."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, port: int, tls: ssl.SSLContext | None = None) -> Peer:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls,
                                                       server_hostname="localhost" if tls else None)
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_frame(self) -> bytes:
        size = _SIZE.unpack(await self._read(4))[0]
        return await self._read(size)

    async def read_answer(self) -> tuple[int, int]:
        correlation_id, value = struct.unpack(">ii", await self.read_frame())
        return correlation_id, value

    async def closed_by_server(self) -> bool:
        """True once the server has closed the connection (EOF before any byte)."""
        return await asyncio.wait_for(self.reader.read(1), IO_TIMEOUT_S) == b""

    async def _read(self, n: int) -> bytes:
        return await asyncio.wait_for(self.reader.readexactly(n), IO_TIMEOUT_S)

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass


async def start(dispatch: Callable[[Request], Response | Awaitable[Response]],
                **options: Any) -> tuple[SocketServer, int]:
    server = SocketServer([Listener("PLAINTEXT", "127.0.0.1", 0)], dispatch, **options)
    ports = await server.start()
    return server, ports["PLAINTEXT"]


async def answering_one_peer() -> tuple[SocketServer, int, Peer]:
    """A server that answers every request with no error, its port, and a peer it answered once."""
    server, port = await start(lambda request: answer(request, 0))
    peer = await Peer.connect(port)
    await peer.send(metadata_request(1))
    assert await peer.read_answer() == (1, 0)
    return server, port, peer


async def still_serves(port: int) -> None:
    """A fresh connection to the server is answered (the server survived)."""
    peer = await Peer.connect(port)
    try:
        await peer.send(metadata_request(77))
        assert await peer.read_answer() == (77, 0)
    finally:
        await peer.close()


def test_pipelined_requests_are_answered_in_request_order(run: Runner) -> None:
    """The first response is slow; the later ones, ready at once, wait for it."""

    async def scenario() -> None:
        release = asyncio.Event()
        all_seen = asyncio.Event()
        seen: list[int] = []

        async def slow(request: Request) -> Response:
            await release.wait()
            return answer(request, 1)

        async def quick(request: Request) -> Response:
            return answer(request, 3)

        def dispatch(request: Request) -> Response | Awaitable[Response]:
            seen.append(request.header.correlation_id)
            if len(seen) == 4:
                all_seen.set()
            if request.header.correlation_id == 1:
                return slow(request)
            if request.header.correlation_id == 2:
                return answer(request, 2)  # answered synchronously
            if request.header.correlation_id == 3:
                return quick(request)
            if request.header.correlation_id in (4, 5):
                return None  # no response (as for an acks=0 produce)
            return answer(request, request.header.correlation_id)

        server, port = await start(dispatch)
        peer = await Peer.connect(port)
        try:
            await peer.send(b"".join(metadata_request(i) for i in (1, 2, 3, 4, 5)))
            await asyncio.wait_for(all_seen.wait(), IO_TIMEOUT_S)
            release.set()
            answers = [await peer.read_answer() for _ in range(3)]
            assert answers == [(1, 1), (2, 2), (3, 3)]
            # Requests 4 and 5 have no response: the next answer is the next request's.
            await peer.send(metadata_request(6))
            assert await peer.read_answer() == (6, 6)
        finally:
            await peer.close()
            await server.stop()
        assert seen == [1, 2, 3, 4, 5, 6]

    run(scenario())


def test_a_frame_larger_than_the_scratch_buffer_arrives_whole(run: Runner) -> None:
    """A produce request of 300 KB (the scratch buffer holds 64 KiB), sent in pieces, and
    followed on the same connection by small requests."""

    async def scenario() -> None:
        frames: list[bytes] = []

        def dispatch(request: Request) -> Response:
            frames.append(bytes(request.frame))
            return answer(request, len(request.frame))

        server, port = await start(dispatch)
        peer = await Peer.connect(port)
        records = bytes(range(256)) * 1200
        big = produce_request(1, records)
        small = metadata_request(2)
        try:
            for i in range(0, len(big), 7000):  # pieces that straddle the buffer's boundaries
                await peer.send(big[i:i + 7000])
            await peer.send(small + metadata_request(3))
            answers = [await peer.read_answer() for _ in range(3)]
        finally:
            await peer.close()
            await server.stop()
        assert answers == [(1, len(big) - 4), (2, len(small) - 4), (3, len(small) - 4)]
        assert frames[0] == big[4:]
        assert records in frames[0]
        assert frames[1] == small[4:]

    run(scenario())


def test_a_big_frame_and_small_ones_in_one_write(run: Runner) -> None:
    async def scenario() -> None:
        server, port = await start(lambda request: answer(request, len(request.frame)))
        peer = await Peer.connect(port)
        big = produce_request(2, b"\x01" * 100_000)
        try:
            await peer.send(metadata_request(1) + big + metadata_request(3))
            answers = [await peer.read_answer() for _ in range(3)]
        finally:
            await peer.close()
            await server.stop()
        assert [a[0] for a in answers] == [1, 2, 3]
        assert answers[1][1] == len(big) - 4

    run(scenario())


@pytest.mark.parametrize("size", [1025, 2**31 - 1, -1])
def test_a_size_outside_max_request_bytes_closes_the_connection(run: Runner, size: int) -> None:
    async def scenario() -> None:
        dispatched: list[Request] = []

        def dispatch(request: Request) -> Response:
            dispatched.append(request)
            return answer(request, 0)

        server, port = await start(dispatch, max_request_bytes=1024)
        peer = await Peer.connect(port)
        try:
            await peer.send(_SIZE.pack(size) + bytes(64))
            assert await peer.closed_by_server()
            await still_serves(port)
        finally:
            await peer.close()
            await server.stop()
        assert [r.header.correlation_id for r in dispatched] == [77]

    run(scenario())


def test_a_frame_of_exactly_max_request_bytes_is_accepted(run: Runner) -> None:
    async def scenario() -> None:
        frame = produce_request(5, b"\x00" * 900)
        server, port = await start(lambda request: answer(request, 0),
                                   max_request_bytes=len(frame) - 4)
        peer = await Peer.connect(port)
        try:
            await peer.send(frame)
            assert await peer.read_answer() == (5, 0)
        finally:
            await peer.close()
            await server.stop()

    run(scenario())


MALFORMED = {
    "truncated-header": _SIZE.pack(3) + b"\x00\x03\x00",
    "client-id-length": _SIZE.pack(10) + struct.pack(">hhih", 3, 1, 9, -2),
    "client-id-past-end": _SIZE.pack(10) + struct.pack(">hhih", 3, 1, 9, 50),
    "flexible-header-no-tags": _SIZE.pack(10) + struct.pack(">hhih", 3, 12, 9, -1),
}


@pytest.mark.parametrize("data", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_frame_closes_its_connection_not_the_server(run: Runner, data: bytes) -> None:
    async def scenario() -> None:
        server, port = await start(lambda request: answer(request, 0))
        bystander = await Peer.connect(port)
        peer = await Peer.connect(port)
        try:
            await peer.send(metadata_request(1))
            assert await peer.read_answer() == (1, 0)
            await peer.send(data + metadata_request(2))
            assert await peer.closed_by_server()  # and request 2 went unanswered
            await bystander.send(metadata_request(3))
            assert await bystander.read_answer() == (3, 0)
        finally:
            await peer.close()
            await bystander.close()
            await server.stop()

    run(scenario())


def test_an_unsupported_request_is_answered_by_on_unsupported_or_closes(run: Runner) -> None:
    async def scenario() -> None:
        errors: list[UnsupportedRequestError] = []

        def on_unsupported(error: UnsupportedRequestError) -> Response:
            errors.append(error)
            assert error.correlation_id is not None
            # Answer api key 18 (ApiVersions) as Kafka does; anything else closes.
            return _ANSWER.pack(8, error.correlation_id, -35) if error.api_key == 18 else None

        server, port = await start(lambda request: answer(request, 0), on_unsupported=on_unsupported)
        peer = await Peer.connect(port)
        other = await Peer.connect(port)
        try:
            await peer.send(_SIZE.pack(10) + struct.pack(">hhih", 18, 999, 41, -1))
            assert await peer.read_answer() == (41, -35)
            await peer.send(metadata_request(42))
            assert await peer.read_answer() == (42, 0)
            await other.send(_SIZE.pack(10) + struct.pack(">hhih", 999, 0, 43, -1))
            assert await other.closed_by_server()
        finally:
            await peer.close()
            await other.close()
            await server.stop()
        assert [(e.api_key, e.api_version, e.correlation_id) for e in errors] == [
            (18, 999, 41), (999, 0, 43)]

    run(scenario())


@pytest.mark.parametrize("error", [RuntimeError("handler bug"), CloseConnection("not the leader")])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_handler_that_raises_closes_its_connection(run: Runner, error: Exception,
                                                     asynchronous: bool) -> None:
    async def scenario() -> None:
        async def fail() -> Response:
            raise error

        def dispatch(request: Request) -> Response | Awaitable[Response]:
            if request.header.correlation_id != 1:
                return answer(request, 0)
            if asynchronous:
                return fail()
            raise error

        server, port = await start(dispatch)
        peer = await Peer.connect(port)
        try:
            await peer.send(metadata_request(1))
            assert await peer.closed_by_server()
            await still_serves(port)
        finally:
            await peer.close()
            await server.stop()

    run(scenario())


def test_file_regions_are_sent_in_place_in_the_response(run: Runner) -> None:
    """A response mixing bytes and file regions (fetch data) arrives in order, and a region
    of a file that shrank meanwhile is padded to the size the frame promised."""

    async def scenario() -> None:
        with tempfile.TemporaryFile() as f:
            content = bytes(range(256)) * 400
            f.write(content)
            f.flush()
            fd = f.fileno()

            def dispatch(request: Request) -> Response:
                head = struct.pack(">ii", 4 + 3000 + 2 + 100, request.header.correlation_id)
                return [head, FileChunk(fd, 1000, 3000), b"--",
                        FileChunk(fd, len(content) - 50, 100)]  # 50 bytes past the end

            server, port = await start(dispatch)
            peer = await Peer.connect(port)
            try:
                await peer.send(metadata_request(9))
                body = await peer.read_frame()
            finally:
                await peer.close()
                await server.stop()
        assert body == (struct.pack(">i", 9) + content[1000:4000] + b"--"
                        + content[-50:] + bytes(50))

    run(scenario())


def test_stop_closes_open_connections(run: Runner) -> None:
    async def scenario() -> None:
        server, port, peer = await answering_one_peer()
        try:
            await server.stop()
            assert await peer.closed_by_server()
            assert not server.connections
            with pytest.raises(OSError):
                await asyncio.open_connection("127.0.0.1", port)
        finally:
            await peer.close()

    run(scenario())


def test_a_handler_runs_to_its_end_though_its_connection_closed_and_stop_cancels_the_rest(run: Runner) -> None:
    """As Kafka finishes a request whose client left: a handler holding state across an await
    (a group's pending offset commit) must reach the code that puts it right; its answer is
    dropped.  Only stopping the server cancels handlers still running."""

    async def scenario() -> None:
        release = asyncio.Event()
        ended: list[int] = []

        async def handler(request: Request) -> Response:
            if request.header.correlation_id == 2:
                await asyncio.Event().wait()  # never released: left for stop()
            await release.wait()
            ended.append(request.header.correlation_id)
            return answer(request, 0)

        server, port = await start(handler)
        first, second = await Peer.connect(port), await Peer.connect(port)
        try:
            await first.send(metadata_request(1))
            await second.send(metadata_request(2))
            await wait_until_async(lambda: len(server.connections) == 2, timeout=IO_TIMEOUT_S,
                                   message="both connections open")
            await first.close()
            await wait_until_async(lambda: len(server.orphans) == 1, timeout=IO_TIMEOUT_S,
                                   message="the first handler running on without its connection")
            release.set()
            await wait_until_async(lambda: ended == [1] and not server.orphans, timeout=IO_TIMEOUT_S,
                                   message="the first handler ran to its end")
            await second.close()
            await wait_until_async(lambda: len(server.orphans) == 1, timeout=IO_TIMEOUT_S,
                                   message="the second handler running on without its connection")
            (orphan,) = server.orphans
            await server.stop()
            await wait_until_async(orphan.done, timeout=IO_TIMEOUT_S, message="stop() cancels it")
            assert orphan.cancelled() and ended == [1]
        finally:
            await server.stop()

    run(scenario())


def test_a_muted_connection_reads_no_request_until_the_mute_ends(run: Runner) -> None:
    """The throttling seam (KIP-219): a handler mutes its connection for 0.3 s; the request
    pipelined behind it waits that long, then is answered."""

    async def scenario() -> None:
        muted_at: list[float] = []

        def dispatch(request: Request) -> Response:
            if request.header.correlation_id == 1:
                muted_at.append(time.monotonic())
                request.connection.mute(time.monotonic_ns() + 300_000_000)
            return answer(request, 0)

        server, port = await start(dispatch)
        peer = await Peer.connect(port)
        try:
            await peer.send(metadata_request(1) + metadata_request(2))
            assert await peer.read_answer() == (1, 0)
            assert await peer.read_answer() == (2, 0)
            assert time.monotonic() - muted_at[0] >= 0.29  # (libuv timers have millisecond resolution)
        finally:
            await peer.close()
            await server.stop()

    run(scenario())


def test_over_tls_answers_keep_their_order_and_a_mute_holds_the_next_request(run: Runner) -> None:
    """The TLS layer in between: a late answer, one at once that mutes the connection for
    0.3 s (the next request, already decrypted, waits for the mute to end), and the next."""
    ca = CertificateAuthority.create()
    with tempfile.TemporaryDirectory() as directory:
        keystore = ca.issue("localhost").write_keystore_pem(f"{directory}/server.pem")
        server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_tls.load_cert_chain(keystore)
        client_tls = ssl.create_default_context(cadata=ca.cert_pem.decode())

        async def scenario() -> None:
            loop = asyncio.get_running_loop()
            muted_at: list[float] = []

            def dispatch(request: Request) -> Response | Awaitable[Response]:
                correlation_id = request.header.correlation_id
                if correlation_id == 1:
                    late: asyncio.Future[Response] = loop.create_future()
                    loop.call_later(0.05, late.set_result, answer(request, 1))
                    return late
                if correlation_id == 2:
                    muted_at.append(time.monotonic())
                    request.connection.mute(time.monotonic_ns() + 300_000_000)
                return answer(request, correlation_id)

            server = SocketServer([Listener("SSL", "127.0.0.1", 0)], dispatch,
                                  security={"SSL": ListenerSecurity("SSL", server_tls)})
            port = (await server.start())["SSL"]
            peer = await Peer.connect(port, client_tls)
            try:
                await peer.send(b"".join(metadata_request(i) for i in (1, 2, 3)))
                assert [await peer.read_answer() for _ in range(3)] == [(1, 1), (2, 2), (3, 3)]
                assert time.monotonic() - muted_at[0] >= 0.29  # (libuv timers have millisecond resolution)
            finally:
                await peer.close()
                await server.stop()

        run(scenario())


class WriteRecorder:
    """A request observer: which answers were reported written, with their release and write times."""

    def __init__(self) -> None:
        self.tags: dict[int, tuple[object, dict[int, int]]] = {}  # none: every request is timed
        self.sample_every = 1
        self.written: dict[int, tuple[int, int]] = {}  # correlation id -> (sent_ns, written_ns)

    def request_received(self, request: Request) -> None:
        request.observer_tag = request.header.correlation_id  # what its answer is reported under

    def requests_written(self, channel: object, requests: list[Request], counted: list[object],
                         written_ns: int) -> None:
        assert counted == []
        for request in requests:
            self.written[request.header.correlation_id] = (request.sent_ns, written_ns)


def test_an_answer_counts_as_written_once_the_socket_took_its_last_byte(run: Runner) -> None:
    """ResponseSendTimeMs' end: a 32 MB answer to a client that does not read waits in the
    transport's buffer and is not reported until the client has read it (0.3 s later); the
    small answer pipelined behind it is reported with it."""
    big = 32 * 1024 * 1024

    async def scenario() -> None:
        recorder = WriteRecorder()

        def dispatch(request: Request) -> Response:
            if request.header.correlation_id == 1:
                return [struct.pack(">ii", 4 + big, 1), bytes(big)]
            return answer(request, 0)

        server, port = await start(dispatch, observer=recorder)
        peer = await Peer.connect(port)
        try:
            await peer.send(metadata_request(1) + metadata_request(2))
            (connection,) = server.connections
            await wait_until_async(lambda: connection.transport.get_write_buffer_size() > 0, timeout=IO_TIMEOUT_S,
                                   message="the big answer waiting in the transport")
            assert recorder.written == {}
            await asyncio.sleep(0.3)  # the client holds off: the measured send time
            assert recorder.written == {}
            assert len(await peer.read_frame()) == 4 + big
            assert await peer.read_answer() == (2, 0)
            await wait_until_async(lambda: set(recorder.written) == {1, 2}, timeout=IO_TIMEOUT_S,
                                   message="both answers reported written")
        finally:
            await peer.close()
            await server.stop()
        sent, written = recorder.written[1]
        assert written - sent >= 300_000_000
        assert recorder.written[2][1] == written  # written with the answer before it

    run(scenario())


def test_without_an_observer_nothing_watches_the_writes(run: Runner) -> None:
    """The transport keeps its write limits (reading pauses above 4 MB buffered, resumes below 1 MB)."""

    async def scenario() -> None:
        server, _, peer = await answering_one_peer()
        try:
            (connection,) = server.connections
            assert connection.transport.get_write_buffer_limits() == (1024 * 1024, 4 * 1024 * 1024)
        finally:
            await peer.close()
            await server.stop()

    run(scenario())

