"""``/metrics`` over HTTP (Prometheus's text format, or OpenMetrics when the scraper asks).

Served on the broker's event loop: an asyncio server, with h11 parsing HTTP/1.1 and
prometheus_client encoding.  Every number is read on the loop, so from a consistent state
with no locks, and the consumer-lag view may ask partition leaders for their end offsets.
A server on its own thread (prometheus_client's ``start_http_server``) would poll twice a
second while idle and start a thread per scrape; this one costs nothing between scrapes, and
reading a request or writing an answer never holds up the loop (it waits for the socket).
"""

from __future__ import annotations

import asyncio
import gzip
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

import h11
from prometheus_client.exposition import choose_encoder

from odradek.broker.metrics.consumer_lag import committed_offsets, end_offsets, lag_rows
from odradek.broker.metrics.kafka_metrics import (
    EventLoopLoad,
    MetricsSource,
    broker_families,
    consumer_lag_families,
)

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from odradek.broker.metadata_cache import MetadataCache
    from odradek.broker.metrics.request_metrics import RequestMetrics
    from odradek.broker.peer_connections import PeerConnections

log = logging.getLogger(__name__)

__all__ = ["MetricsServer"]

SCRAPE_TIMEOUT_S: Final = 10.0
IDLE_TIMEOUT_S: Final = 60.0  # a connection with no request, or a request's head not all come, for this long
PATHS: Final = frozenset({"/metrics", "/"})

Answer = tuple[int, list[tuple[str, str]], bytes]  # status, headers, body


class MetricsServer:
    """One broker's ``/metrics``: :meth:`start` binds it, :meth:`stop` closes it."""

    def __init__(self, broker: MetricsSource, requests: RequestMetrics, metadata_cache: MetadataCache,
                 peers: PeerConnections) -> None:
        self.broker = broker
        self.requests = requests
        self.metadata_cache = metadata_cache
        self.peers = peers  # ListOffsets to partition leaders, for consumer lag
        self.zk_events: Counter[str] = Counter()  # ZooKeeper session states seen (LOST, SUSPENDED, ...)
        self.port: int | None = None
        self._load: EventLoopLoad | None = None
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}  # open ones, their handlers

    def zk_state_changed(self, state: str) -> None:
        """A ZooKeeper session state listener (expiries and disconnections are counted)."""
        self.zk_events[state] += 1

    async def start(self, host: str, port: int) -> int:
        """Serve ``/metrics`` on ``host:port`` (port 0: any free one); returns the port."""
        self._load = EventLoopLoad()  # measured on the loop's thread, which this is
        self._server = await asyncio.start_server(self._connection, host or "0.0.0.0", port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            # Closed, a connection's next read finds the end of the stream and its handler ends;
            # one still reading the metrics is cancelled after a second.
            for writer in self._connections.values():
                writer.close()
            handlers = set(self._connections)
            if handlers:
                _done, reading = await asyncio.wait(handlers, timeout=1)
                for task in reading:
                    task.cancel()
                if reading:
                    await asyncio.wait(reading, timeout=1)
            await server.wait_closed()
        await self.peers.close()

    async def families(self) -> list[Metric]:
        """Every family, read on the loop."""
        assert self._load is not None
        families = list(broker_families(self.broker, self.requests, self._load, self.zk_events))
        offsets = committed_offsets(self.broker.group_coordinator.manager.current_groups())
        ends = await end_offsets({(o.topic, o.partition) for o in offsets}, self.broker.replica_manager,
                                 self.metadata_cache, self.peers)
        families.extend(consumer_lag_families(lag_rows(offsets, ends)))
        return families

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer
        try:
            await _serve(h11.Connection(h11.SERVER), reader, writer, self._answer)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the scraper went away, or sent nothing for a minute
        except asyncio.CancelledError:
            # Only stop() cancels a handler, and this task is asyncio's own for the connection:
            # ended quietly (Python 3.11's streams log a cancelled one as an error).
            pass
        except Exception:
            log.warning("a /metrics connection failed", exc_info=True)
        finally:
            del self._connections[task]
            writer.close()

    async def _answer(self, request: h11.Request) -> Answer:
        if request.method not in (b"GET", b"HEAD"):
            return _plain(405, "only GET and HEAD", ("Allow", "GET, HEAD"))
        if request.target.decode("ascii", "replace").split("?", 1)[0] not in PATHS:
            return _plain(404, "not found: the metrics are at /metrics")
        try:
            families = await asyncio.wait_for(self.families(), SCRAPE_TIMEOUT_S)
        except TimeoutError:
            log.warning("a /metrics scrape took over %.0f s", SCRAPE_TIMEOUT_S)
            return _plain(503, "the metrics took too long to read")
        except Exception:
            log.warning("a /metrics scrape failed", exc_info=True)
            return _plain(500, "the metrics could not be read (the broker's log says why)")
        headers = {name.decode("ascii"): value.decode("latin-1") for name, value in request.headers}  # h11: lower case
        encoder, content_type = choose_encoder(headers.get("accept", ""))
        body = encoder(_Registry(families))
        if "gzip" in headers.get("accept-encoding", ""):
            return 200, [("Content-Type", content_type), ("Content-Encoding", "gzip")], gzip.compress(body, 6)
        return 200, [("Content-Type", content_type)], body


def _plain(status: int, text: str, *headers: tuple[str, str]) -> Answer:
    return status, [("Content-Type", "text/plain; charset=utf-8"), *headers], f"{text}\n".encode()


class _Registry:
    """What prometheus_client's encoders read: families already collected."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


async def _serve(conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 answer: Callable[[h11.Request], Awaitable[Answer]]) -> None:
    """HTTP/1.1 on one connection, request after request while the client keeps it open; a
    request h11 cannot parse gets a 400 and the connection closes."""
    while True:
        try:
            request = await _next_request(conn, reader)
        except h11.RemoteProtocolError as e:
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):  # h11 lets a server answer a bad request
                await _send(conn, writer, *_plain(e.error_status_hint, f"bad request: {e}"), head_only=False)
            return
        if request is None:
            return
        await _send(conn, writer, *await answer(request), head_only=request.method == b"HEAD")
        if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
            return  # the client asked to close (h11 is then MUST_CLOSE), or sent a body, left unread
        conn.start_next_cycle()


async def _next_request(conn: h11.Connection, reader: asyncio.StreamReader) -> h11.Request | None:
    """The next request's head; None when the client closed first.  A body is never read: the
    connection closes after the answer to a request that has one."""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await asyncio.wait_for(reader.read(65536), IDLE_TIMEOUT_S)
            conn.receive_data(data)  # b"" is the end of the stream
        elif isinstance(event, h11.Request):
            conn.next_event()  # its EndOfMessage at once when it has no body: the client is then DONE
            return event
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def _send(conn: h11.Connection, writer: asyncio.StreamWriter, status: int, headers: list[tuple[str, str]],
                body: bytes, *, head_only: bool) -> None:
    headers = [*headers, ("Content-Length", str(len(body)))]
    if conn.their_state is not h11.DONE:
        headers.append(("Connection", "close"))  # the rest of the request stays unread
    out = conn.send(h11.Response(status_code=status, headers=headers))
    if not head_only:
        out += conn.send(h11.Data(data=body))
    out += conn.send(h11.EndOfMessage())
    writer.write(out)
    await writer.drain()
