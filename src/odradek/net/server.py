"""The broker's socket server: the asyncio side of Kafka connections.

Each connection is a :class:`~odradek.net.kafka_channel.KafkaChannel` (the protocol, sans-IO: frames,
the SASL gate, answers in request order) behind a thin :class:`Connection`: an asyncio
``BufferedProtocol`` that lets the event loop read straight into the channel's buffers (through
an :class:`~odradek.net.ssl_transport_layer.SslTransportLayer` on SSL and SASL_SSL listeners),
dispatches the channel's requests, and writes its output: buffers with one ``writev`` per batch,
large file regions with ``sendfile`` on plaintext listeners.

A request handler gets a :class:`Request` and returns the encoded response frame (bytes, or a
list of chunks), ``None`` for "no response" (acks=0 produce), or an awaitable of those.  A
frame that is garbage, truncated or larger than ``socket.request.max.bytes`` closes that
connection only.  A handler that raises closes its connection too: handlers map errors they
expect to Kafka error codes themselves.

A handler that is a coroutine runs to its end even if its connection closes first (its answer
is dropped), as Kafka finishes a request whose client went away: it may hold state across its
awaits (a group's pending offset commit, a transaction's pending state) that only its end puts
right.  Only what a handler handed back to wait on (a delayed operation's answer future) is
cancelled with the connection; :meth:`SocketServer.stop` cancels the handlers still running.

Each listener has a :class:`ListenerSecurity`: on SSL the principal comes from the client
certificate, on SASL_PLAINTEXT and SASL_SSL from the channel's
:class:`~odradek.security.sasl.SaslAuthenticator`.

With a request observer (metrics), an answer counts as written (Kafka's "send complete", the
end of ResponseSendTimeMs) when the transport's buffer is next empty: at once after the write
when the socket took every byte, which is the usual case; otherwise the connection lowers the
transport's write limits to zero for a moment, so its ``resume_writing`` says when the buffer
drained, without polling (see :meth:`Connection._watch_written`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.config import Listener
from odradek.net.kafka_channel import (
    CloseConnection,
    FileChunk,
    KafkaChannel,
    Request,
    RequestObserver,
    Response,
    UnsupportedHandler,
    read_file_region,
)
from odradek.net.ssl_transport_layer import HANDSHAKE_ERRORS, SslTransportLayer
from odradek.protocol.framing import ProtocolError
from odradek.security.acls import KafkaPrincipal
from odradek.security.sasl import SaslAuthenticator, SaslServerConfig

log = logging.getLogger(__name__)

__all__ = ["CloseConnection", "Connection", "FileChunk", "ListenerSecurity", "Request", "Response", "SocketServer"]

_BUFFERS = (bytes, bytearray, memoryview)


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """How one listener's connections are secured (its ``listener.security.protocol.map`` entry)."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None  # SSL, SASL_SSL
    sasl: SaslServerConfig | None = None  # SASL_PLAINTEXT, SASL_SSL
    principal_mapping_rules: str = "DEFAULT"  # ssl.principal.mapping.rules


PLAINTEXT = ListenerSecurity()


# Stop reading from a client while this many bytes of answers wait in the transport (asyncio's
# low-water mark, where reading resumes, is a quarter of it).
WRITE_BUFFER_HIGH = 4 * 1024 * 1024


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


Dispatcher = Callable[[Request], Response | Awaitable[Response]]


class Connection(asyncio.BufferedProtocol):
    """One client connection: its channel's I/O.  Handlers see it as ``request.connection``
    (listener, peer, principal, authenticator, ``close()``)."""

    def __init__(self, server: SocketServer, listener: str, security: ListenerSecurity = PLAINTEXT) -> None:
        self.server = server
        self.listener = listener
        self.security = security
        authenticator = (SaslAuthenticator(security.sasl, now_ms=_monotonic_ms)
                         if security.sasl is not None else None)
        self.channel = KafkaChannel(connection=self, max_request_bytes=server.max_request_bytes,
                                    authenticator=authenticator, sendfile=security.ssl_context is None,
                                    on_unsupported=server.on_unsupported, observer=server.observer)
        self._tls: SslTransportLayer | None = None  # SSL, SASL_SSL: set when the connection is made
        self._tls_draining = False
        self.transport: asyncio.Transport | None = None
        self.peer: str = "?"
        self._sock_fd = -1  # for sendfile; -1 on TLS
        self._paused_for_writes = False
        self._reading_paused = False
        self._observed = server.observer is not None  # answers' writes are watched (metrics)
        self._watching_written = False  # the write limits are zero until the buffer drains
        self._unmute_timer: asyncio.TimerHandle | None = None
        self.closed = False

    # -- what handlers ask

    @property
    def principal(self) -> KafkaPrincipal:
        return self.channel.principal

    @property
    def client_host(self) -> str:
        return self.channel.client_host

    @property
    def authenticator(self) -> SaslAuthenticator | None:
        return self.channel.authenticator

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio.Transport subclasses
        peer = transport.get_extra_info("peername")
        self.peer = self.channel.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.channel.client_host = peer[0] if peer else ""
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._sock_fd = sock.fileno()
            except OSError:
                pass
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        self.server.connections.add(self)
        if self.security.ssl_context is not None:
            self._tls = SslTransportLayer(self.security.ssl_context)
            self._sock_fd = -1  # never sendfile: the bytes must be encrypted

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        for awaited in self.channel.abandon():
            if isinstance(awaited, asyncio.Task):
                self.server.track_orphan(awaited)
            else:
                awaited.cancel()  # type: ignore[attr-defined]  # the futures _defer queued
        if self._unmute_timer is not None:
            self._unmute_timer.cancel()

    def pause_writing(self) -> None:
        transport = self.transport
        if self._watching_written and transport is not None and transport.get_write_buffer_size() <= WRITE_BUFFER_HIGH:
            return  # the zero limits of _watch_written, not a full buffer
        self._paused_for_writes = True
        self._update_reading()

    def resume_writing(self) -> None:
        transport = self.transport
        if self._watching_written and transport is not None:  # drained: every answer released is written
            self._watching_written = False
            transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
            self.channel.answers_written()
        self._paused_for_writes = False
        self._update_reading()

    # -- reading (asyncio.BufferedProtocol: the event loop reads straight into our buffers)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._tls is not None:
            return self._tls.get_buffer()
        return self.channel.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self._tls is not None:
            self._tls_received(nbytes)
        else:
            self.channel.buffer_updated(nbytes)
            self._process()

    def _process(self) -> None:
        """Dispatch every request the channel has, then write what is ready."""
        channel = self.channel
        dispatch = self.server.dispatch
        while (request := channel.next_request()) is not None:
            try:
                result = dispatch(request)
            except Exception as e:
                channel.unanswered(request)
                self._handler_failed(request, e)
                return
            if result is None or isinstance(result, (bytes, list)):
                channel.respond(request, result)
            else:
                self._defer(request, result)
        self._after_output()

    def _defer(self, request: Request, result: Any) -> None:
        if isinstance(result, asyncio.Future):
            fut = result
        elif inspect.iscoroutine(result):
            fut = self.server.loop.create_task(result)
        elif inspect.isawaitable(result):
            fut = asyncio.ensure_future(result)
        else:  # another kind of Response (a tuple of chunks, a bytearray)
            self.channel.respond(request, result)
            return
        self.channel.defer(request, fut)
        fut.add_done_callback(functools.partial(self._on_done, request))

    def _on_done(self, request: Request, fut: asyncio.Future[Response]) -> None:
        if self.closed:
            return
        if fut.cancelled():
            self.channel.complete(request, None)
        elif (exc := fut.exception()) is not None:
            self._handler_failed(request, exc)
            return
        else:
            self.channel.complete(request, fut.result())
        self._after_output()

    def _after_output(self) -> None:
        self._write_output()
        if self.channel.closing:
            self.close()
        else:
            if self._observed:
                self._watch_written()
            self._update_reading()

    def _watch_written(self) -> None:
        """Tell the channel when the answers it released are written to the socket: now, if
        the transport holds none of their bytes; else once its buffer drains, which the
        transport reports through ``resume_writing`` when its limits are zero.  While they are,
        the transport reports no full buffer either, so that check is made here."""
        transport = self.transport
        if transport is None:
            return
        buffered = transport.get_write_buffer_size()
        if buffered == 0:  # the common case, checked first: every byte is with the kernel
            self.channel.answers_written()
        elif transport.is_closing():
            return
        elif self._watching_written:
            if buffered > WRITE_BUFFER_HIGH and not self._paused_for_writes:
                self._paused_for_writes = True
        elif self.channel.answers_unwritten:
            self._watching_written = True
            transport.set_write_buffer_limits(high=0, low=0)  # calls pause_writing at once

    # -- TLS

    def _tls_received(self, nbytes: int) -> None:
        tls = self._tls
        assert tls is not None
        try:
            handshake_done = tls.buffer_updated(nbytes)
        except HANDSHAKE_ERRORS as e:
            self._tls_flush()  # the alert, so the client learns why
            log.info("Failed authentication with /%s (SSL handshake failed: %s) on listener %s",
                     self.client_host, getattr(e, "reason", None) or e, self.listener)
            self.close()
            return
        if handshake_done:
            self._tls_flush()
            if self.channel.authenticator is None:
                try:
                    self.channel.principal = tls.principal(self.security.principal_mapping_rules)
                except ValueError as e:
                    log.info("Failed authentication with /%s (%s)", self.client_host, e)
                    self.close()
                    return
        if not tls.ready:
            self._tls_flush()
            return
        self._tls_drain()

    def _tls_drain(self) -> None:
        """Decrypt what has arrived into the channel, unless reading is paused."""
        tls = self._tls
        if tls is None or not tls.ready or self._tls_draining:
            return
        self._tls_draining = True
        channel = self.channel
        try:
            while not self.closed and not self._reading_paused:
                try:
                    n = tls.read_into(channel.get_buffer())
                except ssl.SSLError as e:
                    log.info("Closing connection from %s: TLS error: %s", self.peer, getattr(e, "reason", None) or e)
                    self.close()
                    break
                if n < 0:
                    break
                if n == 0:
                    # The peer's close_notify: answer with ours, or a client waits for it
                    # (asyncio: ssl_shutdown_timeout, 30 s).
                    self.close()
                    break
                channel.buffer_updated(n)
                self._process()
        finally:
            self._tls_draining = False
        self._tls_flush()

    def _tls_flush(self) -> None:
        assert self._tls is not None
        out = self._tls.data_to_send()
        transport = self.transport
        if out and transport is not None and not transport.is_closing():
            transport.write(out)

    # -- writing

    def _write_output(self) -> None:
        """Write the channel's output with as few socket writes as possible: on loopback and
        LANs a send costs more than the bytes (the receiver's TCP work runs in it), so
        buffers go out in one ``writelines`` (one ``writev``), file regions by ``sendfile``."""
        channel = self.channel
        output = channel.output
        if not output:
            return
        transport = self.transport
        if transport is None or transport.is_closing():
            channel.clear_output()
            return
        tls = self._tls
        if tls is not None:  # every region was read into the output: encrypt it all at once
            data = output[0] if len(output) == 1 else b"".join(output)
            try:
                if len(data):
                    tls.write(data)
            except ssl.SSLError as e:
                log.info("Closing connection from %s: TLS error: %s", self.peer, e)
                channel.clear_output()
                self.close()
                return
            self._tls_flush()
        elif not channel.output_has_regions:
            if len(output) == 1:
                transport.write(output[0])
            else:
                transport.writelines(output)
        else:
            parts: list[Any] = []
            for chunk in output:
                if isinstance(chunk, _BUFFERS):
                    parts.append(chunk)
                    continue
                if parts:
                    transport.writelines(parts)
                    parts = []
                self._write_file_region(transport, chunk)
            if parts:
                transport.writelines(parts)
        channel.clear_output()

    def _write_file_region(self, transport: asyncio.Transport, chunk: Any) -> None:
        """``sendfile`` straight from the segment file when nothing is queued before it (so
        bytes stay in order); whatever the socket does not take goes through the transport."""
        sent = 0
        if self._sock_fd >= 0 and transport.get_write_buffer_size() == 0:
            try:
                sent = os.sendfile(self._sock_fd, chunk.fd, chunk.position, chunk.size)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                sent = 0  # e.g. the file was deleted meanwhile: fall back to reading it
        if sent < chunk.size:
            transport.write(read_file_region(chunk, sent))

    def _handler_failed(self, request: Request, exc: BaseException) -> None:
        if isinstance(exc, CloseConnection):
            log.info("Closing connection from %s: %s", self.peer, exc)
        elif isinstance(exc, ProtocolError):  # a body the hand-written readers refused
            log.info("Closing connection from %s: malformed request: %s", self.peer, exc)
        else:
            log.error("Error handling api key %d v%d correlation id %d from %s; closing the connection",
                      request.api_key, request.api_version, request.header.correlation_id, self.peer,
                      exc_info=exc)
        self.close()

    # -- flow control

    def _update_reading(self) -> None:
        transport = self.transport
        if transport is None or self.closed:
            return
        should_pause = self._paused_for_writes or self.channel.reading_paused
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()
            self._process()  # frames read before a mute may be whole requests
            self._tls_drain()  # so may records decrypted before the pause

    def mute(self, until_ns: int) -> None:
        """Read no requests until ``time.monotonic_ns()`` reaches ``until_ns`` (KIP-219: a
        throttled channel is muted once its response is sent)."""
        self.channel.mute(until_ns)
        self._update_reading()
        if self._unmute_timer is not None:
            self._unmute_timer.cancel()
        delay_s = max(0, until_ns - time.monotonic_ns()) / 1e9
        self._unmute_timer = self.server.loop.call_later(delay_s, self._unmute)

    def _unmute(self) -> None:
        self._unmute_timer = None
        self.channel.unmute()
        self._update_reading()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.channel.closing = True  # no more requests (a handler may close mid-batch)
        self._write_output()  # answers released before the close still go out
        if self._tls is not None:
            self._tls.close()  # close_notify
            self._tls_flush()
        if self.transport is not None:
            self.transport.close()


class SocketServer:
    def __init__(self, listeners: Sequence[Listener], dispatch: Dispatcher, *,
                 on_unsupported: UnsupportedHandler | None = None, max_request_bytes: int = 104857600,
                 security: Mapping[str, ListenerSecurity] | None = None,
                 observer: RequestObserver | None = None) -> None:
        self.listeners = list(listeners)
        self.observer = observer  # request metrics (timestamps are taken only with one)
        self.security = dict(security or {})
        self.dispatch = dispatch
        self.on_unsupported = on_unsupported or (lambda _e: None)
        self.max_request_bytes = max_request_bytes
        self.connections: set[Connection] = set()
        self._servers: list[asyncio.base_events.Server] = []
        self.bound_ports: dict[str, int] = {}
        self.loop: asyncio.AbstractEventLoop | None = None  # set by start()
        # Handlers still running for connections that closed (cancelled by stop()).
        self.orphans: set[asyncio.Task[Any]] = set()
        self._stopping = False

    async def start(self) -> dict[str, int]:
        """Bind every listener; returns listener name -> bound port (port 0 picks one)."""
        loop = self.loop = asyncio.get_running_loop()
        for listener in self.listeners:
            server = await loop.create_server(
                lambda name=listener.name: Connection(self, name, self.security.get(name, PLAINTEXT)),
                host=listener.host or None, port=listener.port, reuse_address=True, backlog=1024)
            self._servers.append(server)
            self.bound_ports[listener.name] = server.sockets[0].getsockname()[1]
        return dict(self.bound_ports)

    def track_orphan(self, task: asyncio.Task[Any]) -> None:
        """A handler whose connection closed: it runs on, its answer dropped (unless the
        server is stopping)."""
        if self._stopping:
            task.cancel()
            return
        self.orphans.add(task)
        task.add_done_callback(self._orphan_done)

    def _orphan_done(self, task: asyncio.Task[Any]) -> None:
        self.orphans.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.warning("A request handler failed after its connection closed", exc_info=error)

    async def stop(self) -> None:
        self._stopping = True
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            conn.close()
        for task in list(self.orphans):
            task.cancel()
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 5)
            except (TimeoutError, Exception):
                pass
        self._servers.clear()

