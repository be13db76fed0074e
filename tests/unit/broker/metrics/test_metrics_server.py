"""The metrics server's HTTP side on a real socket, over a broker whose state cannot be read (a
small fake): the scrape is answered 500 and the connection stays usable; a request that is not
HTTP gets a 400; stop ends an idle keep-alive connection and one that sent half a head.  The
scrapes of a real broker are in tests/integration/test_metrics.py."""

from __future__ import annotations

import asyncio
import logging

import pytest

from odradek.broker.metrics.metrics_server import MetricsServer
from odradek.broker.metrics.request_metrics import RequestMetrics


class _NoPeers:
    async def close(self) -> None:
        pass


class _Unreadable:
    """A broker whose every part raises when the families are read."""

    def __getattr__(self, name: str) -> object:
        raise RuntimeError(f"no {name} here")


async def _answer(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    return head + await reader.readexactly(length)


async def _exchange(port: int, request: bytes) -> tuple[bytes, asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    return await _answer(reader), reader, writer


def test_a_failed_read_is_a_500_and_garbage_a_400_and_stop_closes_what_is_open(caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        server = MetricsServer(_Unreadable(), RequestMetrics(), None, _NoPeers())  # type: ignore[arg-type]
        port = await server.start("127.0.0.1", 0)
        try:
            answer, reader, writer = await _exchange(port, b"GET /metrics HTTP/1.1\r\nHost: b\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 500 ") and answer.endswith(b"(the broker's log says why)\n")
            writer.write(b"GET /elsewhere HTTP/1.1\r\nHost: b\r\n\r\n")  # the same connection, still open
            assert (await _answer(reader)).startswith(b"HTTP/1.1 404 ")
            bad, bad_reader, _ = await _exchange(port, b"\x00\x01 not a request line\r\n\r\n")
            assert bad.startswith(b"HTTP/1.1 400 ") and b"connection: close" in bad.lower()
            assert await bad_reader.read() == b""  # closed after the 400
            _, half_writer = await asyncio.open_connection("127.0.0.1", port)
            half_writer.write(b"GET /met")
            await half_writer.drain()
            await asyncio.sleep(0)
        finally:
            await asyncio.wait_for(server.stop(), 5)
        assert await asyncio.wait_for(reader.read(), 5) == b""  # the keep-alive connection, closed by stop
        assert not server._connections

    asyncio.run(run())
    # The read's failure is a warning with its cause; nothing at ERROR (a cancelled handler
    # would be one: asyncio's streams log it).
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == ["a /metrics scrape failed"]


def test_stop_cancels_a_scrape_that_is_still_reading_and_logs_no_error(caplog: pytest.LogCaptureFixture) -> None:
    class Stuck(MetricsServer):
        async def families(self) -> list:  # type: ignore[type-arg]
            self.reading.set()
            await asyncio.Event().wait()  # a partition leader that never answers ListOffsets
            return []

    async def run() -> float:
        server = Stuck(_Unreadable(), RequestMetrics(), None, _NoPeers())  # type: ignore[arg-type]
        server.reading = asyncio.Event()
        port = await server.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: b\r\n\r\n")
        await server.reading.wait()
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(server.stop(), 5)
        took = asyncio.get_running_loop().time() - started
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, unanswered
        assert not server._connections
        return took

    assert 0.9 < asyncio.run(run()) < 3  # a second for it to end by itself, then cancelled
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
