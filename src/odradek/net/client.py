"""A small asyncio Kafka client connection for broker-to-broker traffic.

Used by the controller's channel to each broker and by follower fetchers.  Requests are
pipelined; responses are matched to requests by correlation id (a mismatch closes the
connection, as in aiokafka).

With a :class:`~odradek.security.client.ClientSecurity`, ``connect()`` first does TLS (the
host name checked against the broker's certificate unless the context says not to), then
SASL as Kafka clients do from 1.0 on: SaslHandshake v1 naming the mechanism, then the
mechanism's tokens in SaslAuthenticate v2 requests.  When the broker gives the session a
lifetime (KIP-368, ``connections.max.reauth.ms``), the connection re-authenticates on the
same socket before a request that would go out after 85-95% of it (as Kafka's clients).

Besides kio payloads, a caller with its own codec (the follower's fetcher, see
:mod:`odradek.protocol.replica_fetch`) can send an encoded frame and get the raw response
frame back (``send_frame``), skipping kio's dataclasses on both sides.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import ssl
import struct
from collections import deque
from typing import Any, Final

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2 import SaslAuthenticateRequest, SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1 import SaslHandshakeRequest, SaslHandshakeResponse

from odradek import tasks
from odradek.protocol.framing import decode_response, encode_request
from odradek.security.client import ClientSecurity, sasl_client

log = logging.getLogger(__name__)

__all__ = ["AuthenticationFailed", "BrokerConnection", "ConnectionClosed"]

_SIZE = struct.Struct(">i")
# In the pending queue, in place of a response type: hand back the response frame as it came.
_RAW_FRAME: Final = bytes
_CLOSE_TIMEOUT_S = 2.0
# Over TLS, closing waits for the peer's close_notify after ours, which many servers never send
# (Kafka's clients do not wait for it): our data is flushed by then, so wait only briefly.
_TLS_CLOSE_TIMEOUT_S = 0.5


class ConnectionClosed(ConnectionError):
    """The connection closed (or failed) before a response arrived."""


class AuthenticationFailed(ConnectionClosed):
    """The broker refused the SASL login (or the TLS handshake failed); the message is the
    broker's (Kafka: SaslAuthenticationException / UnsupportedSaslMechanismException)."""


class BrokerConnection:
    def __init__(self, host: str, port: int, client_id: str, *, security: ClientSecurity | None = None,
                 max_frame_bytes: int = 200 * 1024 * 1024) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security = security or ClientSecurity()
        self._reauth_at: float | None = None  # loop time to re-authenticate at (KIP-368)
        self._reauth_lock = asyncio.Lock()
        self.max_frame_bytes = max_frame_bytes
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task[None] | None = None
        # (correlation id, response type or _RAW_FRAME, future), in request order
        self._pending: deque[tuple[int, type[Any], asyncio.Future[Any]]] = deque()
        self._correlation = itertools.count(1)
        self._closed_error: BaseException | None = None

    @property
    def connected(self) -> bool:
        return self._writer is not None and self._closed_error is None

    async def connect(self, timeout_s: float = 10.0) -> None:
        """Open the connection and, as its security says, do TLS and the SASL login;
        AuthenticationFailed when the broker refuses (the connection is then closed)."""
        tls = self.security.ssl_context if self.security.uses_tls else None
        if self.security.uses_tls and tls is None:
            raise ValueError(f"security protocol {self.security.protocol} needs an SSL context")
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, limit=2**20, ssl=tls,
                                        server_hostname=self.host if tls is not None else None), timeout_s)
        except ssl.SSLError as e:
            raise AuthenticationFailed(f"SSL handshake with {self.host}:{self.port} failed: "
                                       f"{e.reason or e}") from None
        self._closed_error = None
        self._reauth_at = None
        self._read_task = asyncio.get_running_loop().create_task(
            self._read_loop(), name=f"conn-{self.host}:{self.port}")
        if self.security.uses_sasl:
            try:
                await self._authenticate(timeout_s)
            except BaseException as e:
                await self.close(e if isinstance(e, ConnectionClosed) else None)
                raise

    async def _authenticate(self, timeout_s: float) -> None:
        """SaslHandshake v1 then SaslAuthenticate v2 until the mechanism is done."""
        mechanism = sasl_client(self.security)
        handshake = await self._send(SaslHandshakeRequest(mechanism=mechanism.mechanism),
                                     SaslHandshakeResponse, timeout_s)
        if handshake.error_code == ErrorCode.unsupported_sasl_mechanism:
            raise AuthenticationFailed(
                f"Client SASL mechanism '{mechanism.mechanism}' not enabled in the server "
                f"{self.host}:{self.port}, enabled mechanisms are {list(handshake.mechanisms)}")
        if handshake.error_code != ErrorCode.none:
            raise AuthenticationFailed(f"SaslHandshake to {self.host}:{self.port} failed: "
                                       f"{handshake.error_code.name.upper()}")
        token: bytes | None = mechanism.first_message()
        lifetime_ms = 0
        while token is not None:
            response = await self._send(SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse,
                                        timeout_s)
            if response.error_code != ErrorCode.none:
                raise AuthenticationFailed(
                    response.error_message or f"SASL authentication with {self.host}:{self.port} failed: "
                                              f"{response.error_code.name.upper()}")
            lifetime_ms = int(response.session_lifetime.total_seconds() * 1000)
            try:
                token = mechanism.evaluate(response.auth_bytes)
            except ValueError as e:
                raise AuthenticationFailed(f"SASL authentication with {self.host}:{self.port} failed: {e}") from None
        self._reauth_at = None if lifetime_ms <= 0 else \
            asyncio.get_running_loop().time() + lifetime_ms / 1000 * random.uniform(0.85, 0.95)

    async def _maybe_reauthenticate(self, timeout_s: float) -> None:
        async with self._reauth_lock:
            if self._reauth_at is None or asyncio.get_running_loop().time() < self._reauth_at:
                return
            log.debug("re-authenticating to %s:%s", self.host, self.port)
            await self._authenticate(timeout_s)

    async def send(self, payload: Any, response_type: type[Any] | None, timeout_s: float = 30.0) -> Any:
        """Send one request and await its response (None when ``response_type`` is None,
        i.e. the request expects no response)."""
        if self._reauth_at is not None and asyncio.get_running_loop().time() >= self._reauth_at:
            await self._reauthenticate_before_request(timeout_s)
        return await self._send(payload, response_type, timeout_s)

    def next_correlation_id(self) -> int:
        """A correlation id for a frame to pass to :meth:`send_frame`."""
        return next(self._correlation) & 0x7FFFFFFF

    async def send_frame(self, frame: bytes, correlation_id: int, timeout_s: float) -> bytes:
        """Send a complete request frame (size prefix included) whose header carries
        ``correlation_id`` (from :meth:`next_correlation_id`) and await the response frame:
        without its size prefix, with its response header, undecoded.  Fails as
        :meth:`send` does (TimeoutError closes the connection)."""
        if self._reauth_at is not None and asyncio.get_running_loop().time() >= self._reauth_at:
            await self._reauthenticate_before_request(timeout_s)
        if not self.connected:
            raise ConnectionClosed(f"not connected to {self.host}:{self.port}")
        return await self._request(frame, correlation_id, _RAW_FRAME, timeout_s)

    async def _reauthenticate_before_request(self, timeout_s: float) -> None:
        try:
            await self._maybe_reauthenticate(timeout_s)
        except AuthenticationFailed as e:
            await self.close(e)
            raise

    async def _send(self, payload: Any, response_type: type[Any] | None, timeout_s: float) -> Any:
        if not self.connected:
            raise ConnectionClosed(f"not connected to {self.host}:{self.port}")
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        frame = encode_request(payload, correlation_id, self.client_id)
        assert self._writer is not None
        if response_type is None:
            self._writer.write(frame)
            await self._writer.drain()
            return None
        return await self._request(frame, correlation_id, response_type, timeout_s)

    async def _request(self, frame: bytes, correlation_id: int, response_type: type[Any],
                       timeout_s: float) -> Any:
        writer = self._writer
        assert writer is not None
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._pending.append((correlation_id, response_type, fut))
        writer.write(frame)
        await writer.drain()
        # A timer on the future rather than asyncio.wait_for, which costs a task-like
        # wrapper per request; follower fetches are sent back to back.
        timer = loop.call_later(timeout_s, _expire, fut)
        try:
            return await fut
        except TimeoutError:
            # A late response would misalign the pipeline: start over on a fresh connection.
            await self.close(ConnectionClosed(f"request to {self.host}:{self.port} timed out"))
            raise
        finally:
            timer.cancel()

    async def _read_loop(self) -> None:
        reader = self._reader
        assert reader is not None
        error: BaseException
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                if size < 4 or size > self.max_frame_bytes:
                    raise ConnectionClosed(f"bad response size {size} from {self.host}:{self.port}")
                frame = await reader.readexactly(size)
                if not self._pending:
                    raise ConnectionClosed("response without a request")
                # Left queued until the response is known good, so that a response that
                # fails below fails its request too (with the others), not only the rest.
                correlation_id, response_type, fut = self._pending[0]
                if response_type is _RAW_FRAME:
                    got_id, response = _SIZE.unpack_from(frame)[0], frame
                else:
                    got_id, response = decode_response(frame, response_type)
                if got_id != correlation_id:
                    raise ConnectionClosed(
                        f"correlation id mismatch from {self.host}:{self.port}: expected {correlation_id}, got {got_id}")
                self._pending.popleft()
                if not fut.done():
                    fut.set_result(response)
        except asyncio.CancelledError:
            self._fail_pending(ConnectionClosed("connection closed"))
            raise
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            error = ConnectionClosed(f"connection to {self.host}:{self.port} lost: {e!r}")
        except Exception as e:  # a response we could not decode
            log.warning("closing connection to %s:%s: %r", self.host, self.port, e)
            error = ConnectionClosed(f"bad response from {self.host}:{self.port}: {e!r}")
        self._fail_pending(error)
        self._closed_error = error
        if self._writer is not None:
            self._writer.close()

    def _fail_pending(self, error: BaseException) -> None:
        while self._pending:
            _, _, fut = self._pending.popleft()
            if not fut.done():
                fut.set_exception(error)

    async def close(self, error: BaseException | None = None) -> None:
        error = error or ConnectionClosed("connection closed")
        self._closed_error = error
        self._fail_pending(error)
        task, self._read_task = self._read_task, None
        writer, self._writer = self._writer, None
        try:
            await tasks.cancel_and_wait(task)
        finally:  # (also when the caller is cancelled meanwhile: the socket is not leaked)
            if writer is not None:
                writer.close()
        if writer is not None:
            timeout = _TLS_CLOSE_TIMEOUT_S if self.security.uses_tls else _CLOSE_TIMEOUT_S
            try:
                # Closing flushes what is buffered; a peer that stopped reading must not hold us.
                await asyncio.wait_for(writer.wait_closed(), timeout)
            except TimeoutError:
                log.log(logging.DEBUG if self.security.uses_tls else logging.WARNING,
                        "connection to %s:%s did not close in %.1fs; aborting it", self.host, self.port, timeout)
                writer.transport.abort()
            except (ConnectionError, OSError):
                pass


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())
