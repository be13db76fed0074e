"""The broker's socket server: Kafka framing over asyncio, many requests in flight per
connection, responses written in request order.

A request handler gets a :class:`Request` and returns the encoded response frame (bytes, or a
list of chunks), ``None`` for "no response" (acks=0 produce), or an awaitable of those.  A
frame that is garbage, truncated or larger than ``socket.request.max.bytes`` closes that
connection only.  A handler that raises closes its connection too: handlers map errors they
expect to Kafka error codes themselves.

Each listener has a :class:`ListenerSecurity`.  On SSL and SASL_SSL listeners the connection
speaks TLS through an ``ssl.SSLObject`` over memory buffers (so a failed handshake is one
line in the log and the connection's end, and file regions are read and encrypted instead of
sent with ``sendfile``); on SSL the principal comes from the client certificate.  On
SASL_PLAINTEXT and SASL_SSL a :class:`~odradek.security.sasl.SaslAuthenticator` gates the
connection: before authentication only ApiVersions, SaslHandshake and SaslAuthenticate (or
bare tokens after SaslHandshake v0) get through, frames are capped at
``sasl.server.max.receive.size``, and a refused client gets its answer and then the close.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
import ssl
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.config import Listener
from odradek.protocol.framing import (
    MalformedRequestError,
    ProtocolError,
    RequestHeaderInfo,
    UnsupportedRequestError,
    decode_request_header,
)
from odradek.security.acls import ANONYMOUS, KafkaPrincipal
from odradek.security.sasl import SaslAuthenticationError, SaslAuthenticator, SaslServerConfig
from odradek.security.tls import peer_principal

log = logging.getLogger(__name__)

__all__ = ["Connection", "FileChunk", "ListenerSecurity", "Request", "Response", "SocketServer"]

_SIZE = struct.Struct(">i")
_API_VERSIONS = 18
_TLS_READ_BYTES = 64 * 1024

# Frames up to this size are parsed out of one reused read buffer; larger ones (produce
# requests, mostly) are read straight into a buffer of their own.
_SCRATCH_BYTES = 64 * 1024

# File regions (fetched record batches) up to this size are read and written with the rest of
# their response in one socket write; larger ones are sent with sendfile.
_INLINE_FILE_BYTES = 64 * 1024

# Stop reading from a connection with this many responses outstanding (Kafka's clients
# pipeline at most max.in.flight.requests.per.connection, 5 by default, so this only bites
# a misbehaving peer).
MAX_IN_FLIGHT_PER_CONNECTION = 100


@dataclass(frozen=True, slots=True)
class FileChunk:
    """A region of a file to send as part of a response (fetch data, sent without decoding)."""

    fd: int
    position: int
    size: int


ResponseChunk = bytes | bytearray | memoryview | FileChunk
Response = bytes | Sequence[ResponseChunk] | None


@dataclass(slots=True)
class Request:
    header: RequestHeaderInfo
    frame: bytes
    body_offset: int
    connection: Connection

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """How one listener's connections are secured (its ``listener.security.protocol.map`` entry)."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None  # SSL, SASL_SSL
    sasl: SaslServerConfig | None = None  # SASL_PLAINTEXT, SASL_SSL
    principal_mapping_rules: str = "DEFAULT"  # ssl.principal.mapping.rules


PLAINTEXT = ListenerSecurity()


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class CloseConnection(Exception):
    """Raised by a handler that cannot answer truthfully: the connection is closed (the
    client reconnects, possibly elsewhere) instead of sending a misleading response."""


Dispatcher = Callable[[Request], Response | Awaitable[Response]]
UnsupportedHandler = Callable[[UnsupportedRequestError], Response]


class Connection(asyncio.BufferedProtocol):
    """One client connection."""

    def __init__(self, server: SocketServer, listener: str, security: ListenerSecurity = PLAINTEXT) -> None:
        self.server = server
        self.listener = listener
        self.security = security
        # TLS (SSL, SASL_SSL): ciphertext is read into _tls_buf and goes through _tls.
        self._tls: ssl.SSLObject | None = None
        tls = security.ssl_context is not None
        self._tls_in = ssl.MemoryBIO() if tls else None
        self._tls_out = ssl.MemoryBIO() if tls else None
        self._tls_buf = bytearray(_TLS_READ_BYTES) if tls else bytearray()
        self._tls_ready = False
        self._tls_draining = False
        self.authenticator: SaslAuthenticator | None = (
            SaslAuthenticator(security.sasl, now_ms=_monotonic_ms) if security.sasl is not None else None)
        self.transport: asyncio.Transport | None = None
        self.peer: str = "?"
        # Who is on the other end (the request context's principal and client address, which
        # authorization decides on).  ANONYMOUS until TLS or SASL says otherwise.
        self.principal: KafkaPrincipal = ANONYMOUS
        self.client_host: str = ""
        self._scratch = bytearray(_SCRATCH_BYTES)
        self._start = 0  # unread bytes of the scratch buffer are [_start, _end)
        self._end = 0
        self._big: bytearray | None = None  # a frame larger than the scratch buffer, being read
        self._big_filled = 0
        self._sock_fd = -1
        self._pending: deque[asyncio.Future[Response] | Response] = deque()
        self._paused_for_writes = False
        self._paused_for_in_flight = False
        self.closed = False

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio.Transport subclasses
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = peer[0] if peer else ""
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._sock_fd = sock.fileno()
            except OSError:
                pass
        transport.set_write_buffer_limits(high=4 * 1024 * 1024)
        self.server.connections.add(self)
        if self.security.ssl_context is not None:
            self._tls = self.security.ssl_context.wrap_bio(self._tls_in, self._tls_out, server_side=True)
            self._sock_fd = -1  # never sendfile: the bytes must be encrypted

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        for item in self._pending:
            if isinstance(item, asyncio.Future):
                item.cancel()
        self._pending.clear()

    def pause_writing(self) -> None:
        self._paused_for_writes = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._paused_for_writes = False
        self._update_reading()

    # -- reading (asyncio.BufferedProtocol: the event loop reads straight into our buffers)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._tls is not None:
            return memoryview(self._tls_buf)
        return self._plain_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self._tls is not None:
            self._tls_received(nbytes)
        else:
            self._plain_received(nbytes)

    def _plain_buffer(self) -> memoryview:
        big = self._big
        if big is not None:
            return memoryview(big)[self._big_filled:]
        scratch = self._scratch
        if self._start and self._end == len(scratch):
            # Make room: move the unread tail to the front.
            scratch[:self._end - self._start] = scratch[self._start:self._end]
            self._end -= self._start
            self._start = 0
        return memoryview(scratch)[self._end:]

    def _plain_received(self, nbytes: int) -> None:
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == len(self._big):
                frame, self._big = self._big, None
                self._handle_frame(frame)
            return
        self._end += nbytes
        self._parse_scratch()

    def _parse_scratch(self) -> None:
        """Hand on every complete frame in the scratch buffer.  A frame too large for it gets
        a buffer of its own, which the rest of it is read into directly (no copies)."""
        scratch = self._scratch
        while not self.closed and self._end - self._start >= 4:
            start = self._start
            (size,) = _SIZE.unpack_from(scratch, start)
            auth = self.authenticator
            if auth is not None and not auth.authenticated:
                max_size, key = min(auth.max_receive_size, self.server.max_request_bytes), "sasl.server.max.receive.size"
            else:
                max_size, key = self.server.max_request_bytes, "socket.request.max.bytes"
            if size < 0 or size > max_size:
                log.warning("Closing connection from %s: request size %d is outside 0..%d (%s)",
                            self.peer, size, max_size, key)
                self.close()
                return
            have = self._end - start - 4
            if have >= size:
                frame = bytes(scratch[start + 4:start + 4 + size])
                self._start = start + 4 + size
                self._handle_frame(frame)
                continue
            if size + 4 > len(scratch):
                big = bytearray(size)
                big[:have] = scratch[start + 4:self._end]
                self._start = self._end = 0
                self._big, self._big_filled = big, have
            break
        if self._start == self._end:
            self._start = self._end = 0

    # -- requests

    # -- TLS

    def _tls_received(self, nbytes: int) -> None:
        tls = self._tls
        assert tls is not None and self._tls_in is not None
        self._tls_in.write(memoryview(self._tls_buf)[:nbytes])
        if not self._tls_ready:
            try:
                tls.do_handshake()
            except ssl.SSLWantReadError:
                self._tls_flush()
                return
            except (ssl.SSLError, OSError, ValueError) as e:
                self._tls_flush()  # the alert, so the client learns why
                log.info("Failed authentication with /%s (SSL handshake failed: %s) on listener %s",
                         self.client_host, getattr(e, "reason", None) or e, self.listener)
                self.close()
                return
            self._tls_ready = True
            self._tls_flush()
            if self.authenticator is None:
                try:
                    self.principal = peer_principal(tls, self.security.principal_mapping_rules)
                except ValueError as e:
                    log.info("Failed authentication with /%s (%s)", self.client_host, e)
                    self.close()
                    return
        self._tls_drain()

    def _tls_drain(self) -> None:
        """Decrypt what has arrived into the frame buffers, unless reading is paused."""
        tls = self._tls
        if tls is None or not self._tls_ready or self._tls_draining:
            return
        self._tls_draining = True
        try:
            while not self.closed and not self._paused_for_in_flight:
                buf = self._plain_buffer()
                try:
                    n = tls.read(len(buf), buf)
                except ssl.SSLWantReadError:
                    break
                except ssl.SSLZeroReturnError:
                    self.close()
                    break
                except ssl.SSLError as e:
                    log.info("Closing connection from %s: TLS error: %s", self.peer, getattr(e, "reason", None) or e)
                    self.close()
                    break
                if n == 0:
                    # The peer's close_notify (the ssl module reports it as a zero-length read):
                    # answer with ours, or a client waits for it (asyncio: ssl_shutdown_timeout, 30 s).
                    self.close()
                    break
                self._plain_received(n)
        finally:
            self._tls_draining = False
        self._tls_flush()

    def _tls_flush(self) -> None:
        assert self._tls_out is not None
        out = self._tls_out.read()
        transport = self.transport
        if out and transport is not None and not transport.is_closing():
            transport.write(out)

    def _send(self, data: bytes | bytearray | memoryview) -> None:
        transport = self.transport
        assert transport is not None
        tls = self._tls
        if tls is None:
            transport.write(data)
        elif len(data):
            try:
                tls.write(data)
            except ssl.SSLError as e:
                log.info("Closing connection from %s: TLS error: %s", self.peer, e)
                self.close()
                return
            self._tls_flush()

    # -- requests

    def _handle_frame(self, frame: bytes) -> None:
        auth = self.authenticator
        if auth is not None and not auth.authenticated:
            if auth.failed:
                return  # refused: its answer is on the way, then the close
            if auth.expects_raw_token:
                self._raw_sasl_token(auth, frame)
                return
        try:
            header, offset = decode_request_header(frame)
        except UnsupportedRequestError as e:
            response = self.server.on_unsupported(e)
            if response is None:
                log.info("Closing connection from %s: %s", self.peer, e)
                self.close()
            else:
                self._enqueue(response)
            return
        except (MalformedRequestError, ProtocolError) as e:
            log.info("Closing connection from %s: malformed request: %s", self.peer, e)
            self.close()
            return
        if auth is not None and not self._sasl_allows(auth, header):
            return
        request = Request(header, frame, offset, self)
        try:
            result = self.server.dispatch(request)
        except Exception as e:
            self._handler_failed(request, e)
            return
        if result is None or isinstance(result, (bytes, list)):
            self._enqueue(result)
            return
        if isinstance(result, asyncio.Future):
            fut = result
        elif inspect.iscoroutine(result):
            fut = self.server.loop.create_task(result)
        elif inspect.isawaitable(result):
            fut = asyncio.ensure_future(result)
        else:
            self._enqueue(result)
            return
        self._pending.append(fut)
        fut.add_done_callback(self._on_done)
        self._update_reading()

    def _sasl_allows(self, auth: SaslAuthenticator, header: RequestHeaderInfo) -> bool:
        """The SASL gate (Kafka's SaslServerAuthenticator and Processor checks)."""
        if auth.authenticated:
            if auth.begins_reauthentication(header.api_key):
                return True
            if auth.expired():
                log.info("Closing connection from %s: SASL session of %s expired (connections.max.reauth.ms)",
                         self.peer, self.principal)
                self.close()
                return False
            self.principal = auth.principal  # type: ignore[assignment]  # authenticated: set
            return True
        if not auth.allows(header.api_key):
            log.info("Closing connection from %s: unexpected request (api key %d) during SASL authentication "
                     "in state %s (IllegalSaslState)", self.peer, header.api_key, auth.state.value)
            self.close()
            return False
        if header.api_key == _API_VERSIONS:
            auth.api_versions()
        return True

    def _raw_sasl_token(self, auth: SaslAuthenticator, frame: bytes) -> None:
        """A bare token after SaslHandshake v0: the reply goes back bare (size-prefixed)."""
        try:
            reply = auth.raw_token(frame)
        except SaslAuthenticationError as e:
            log.info("Failed authentication with /%s (%s)", self.client_host, e)
            self.close()
            return
        if auth.authenticated:
            self.principal = auth.principal  # type: ignore[assignment]  # authenticated: set
        self._enqueue(_SIZE.pack(len(reply)) + reply)

    def _enqueue(self, response: Response) -> None:
        if not self._pending:
            self._write(response)
        else:
            self._pending.append(response)

    def _on_done(self, fut: asyncio.Future[Response]) -> None:
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            self._handler_failed(None, exc)
            return
        self._flush()

    def _flush(self) -> None:
        pending = self._pending
        while pending:
            head = pending[0]
            if isinstance(head, asyncio.Future):
                if not head.done():
                    break
                if head.cancelled() or head.exception() is not None:
                    pending.popleft()
                    continue
                pending.popleft()
                self._write(head.result())
            else:
                pending.popleft()
                self._write(head)
        self._update_reading()

    def _write(self, response: Response) -> None:
        """Write one response with as few socket writes as possible: on loopback and LANs a
        send costs more than the bytes (the receiver's TCP work runs in it), so the chunks of
        a response go out in one ``writelines`` (one ``writev``), file regions up to
        ``_INLINE_FILE_BYTES`` read into it; larger regions go by ``sendfile``."""
        transport = self.transport
        if response is None or transport is None or self.closed:
            return
        if isinstance(response, (bytes, bytearray, memoryview)):
            self._send(response)
        else:
            self._write_chunks(transport, response)
        auth = self.authenticator
        if auth is not None and auth.failed:
            # The refusal has been written: now close (the transport flushes it first).
            log.info("Failed authentication with /%s (%s)", self.client_host, auth.failure)
            self.close()

    def _write_chunks(self, transport: asyncio.Transport, response: Sequence[ResponseChunk]) -> None:
        tls = self._tls is not None
        parts: list[Any] = []
        for chunk in response:
            if isinstance(chunk, (bytes, bytearray, memoryview)):
                parts.append(chunk)
            elif tls or chunk.size <= _INLINE_FILE_BYTES:
                parts.append(_read_file_chunk(chunk))
            else:  # a large file region (FileChunk, or the log's FileRegion): fd, position, size
                if parts:
                    transport.writelines(parts)
                    parts = []
                self._write_file_region(chunk)
        if tls:
            self._send(b"".join(parts))
        elif len(parts) == 1:
            transport.write(parts[0])
        elif parts:
            transport.writelines(parts)

    def _write_file_region(self, chunk: Any) -> None:
        """``sendfile`` straight from the segment file when nothing is queued before it (so
        bytes stay in order); whatever the socket does not take goes through the transport."""
        transport = self.transport
        assert transport is not None
        sent = 0
        if self._sock_fd >= 0 and transport.get_write_buffer_size() == 0:
            try:
                sent = os.sendfile(self._sock_fd, chunk.fd, chunk.position, chunk.size)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                sent = 0  # e.g. the file was deleted meanwhile: fall back to reading it
        if sent < chunk.size:
            transport.write(_read_file_chunk(chunk, sent))

    def _handler_failed(self, request: Request | None, exc: BaseException) -> None:
        if isinstance(exc, CloseConnection):
            log.info("Closing connection from %s: %s", self.peer, exc)
            self.close()
            return
        if isinstance(exc, ProtocolError):  # a body the hand-written readers refused
            log.info("Closing connection from %s: malformed request: %s", self.peer, exc)
            self.close()
            return
        what = (f"api key {request.api_key} v{request.api_version} correlation id {request.header.correlation_id}"
                if request is not None else "a request")
        log.error("Error handling %s from %s; closing the connection", what, self.peer, exc_info=exc)
        self.close()

    def _update_reading(self) -> None:
        transport = self.transport
        if transport is None or self.closed:
            return
        should_pause = self._paused_for_writes or len(self._pending) >= MAX_IN_FLIGHT_PER_CONNECTION
        if should_pause and not self._paused_for_in_flight:
            self._paused_for_in_flight = True
            transport.pause_reading()
        elif not should_pause and self._paused_for_in_flight:
            self._paused_for_in_flight = False
            transport.resume_reading()
            self._tls_drain()  # records decrypted before the pause may hold whole requests

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self._tls is not None and self._tls_ready:
                try:
                    self._tls.unwrap()  # close_notify
                except (ssl.SSLError, OSError, ValueError):
                    pass
                self._tls_flush()
            if self.transport is not None:
                self.transport.close()


def _read_file_chunk(chunk: Any, skip: int = 0) -> bytes:
    want = chunk.size - skip
    data = os.pread(chunk.fd, want, chunk.position + skip)
    if len(data) < want:
        # The file shrank under us (a truncation): the frame's size is already promised, so
        # pad; a client rejects the damaged batch by its CRC and fetches again.
        data += bytes(want - len(data))
    return data


class SocketServer:
    def __init__(self, listeners: Sequence[Listener], dispatch: Dispatcher, *,
                 on_unsupported: UnsupportedHandler | None = None, max_request_bytes: int = 104857600,
                 security: Mapping[str, ListenerSecurity] | None = None) -> None:
        self.listeners = list(listeners)
        self.security = dict(security or {})
        self.dispatch = dispatch
        self.on_unsupported = on_unsupported or (lambda _e: None)
        self.max_request_bytes = max_request_bytes
        self.connections: set[Connection] = set()
        self._servers: list[asyncio.base_events.Server] = []
        self.bound_ports: dict[str, int] = {}
        self.loop: asyncio.AbstractEventLoop | None = None  # set by start()

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

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            conn.close()
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 5)
            except (TimeoutError, Exception):
                pass
        self._servers.clear()

