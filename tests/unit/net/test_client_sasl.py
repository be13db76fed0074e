"""BrokerConnection's TLS and SASL login (SaslHandshake v1 + SaslAuthenticate v2) against a
small stand-in that runs Kafka's server rules for SCRAM (security.scram.ScramServer) and PLAIN,
over TLS with tls.server_context where the test says."""

from __future__ import annotations

import asyncio
import datetime
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2 import SaslAuthenticateRequest, SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1 import SaslHandshakeRequest, SaslHandshakeResponse
from tests.support.tls import TlsMaterial, tls_material

from odradek.net.client import AuthenticationFailed, BrokerConnection
from odradek.protocol import control as c
from odradek.protocol.framing import (
    FrameBuffer,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from odradek.security import tls
from odradek.security.client import ClientSecurity
from odradek.security.scram import ScramAuthenticationError, ScramCredential, ScramServer
from support.waiting import wait_until_async

TIMEOUT_S = 10.0
USERS = {"alice": "alice-secret"}
FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism"


class SaslBroker:
    """Answers SaslHandshake/SaslAuthenticate; ControlledShutdown only after a login."""

    def __init__(self, mechanisms: tuple[str, ...], lifetime_ms: int = 0, ssl_context: ssl.SSLContext | None = None
                 ) -> None:
        self.mechanisms = mechanisms
        self.ssl_context = ssl_context
        self.lifetime_ms = lifetime_ms
        self.logins: list[str] = []
        self.unauthenticated_requests = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        return self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameBuffer()
        mechanism: ScramServer | str | None = None
        authenticated = False
        try:
            while data := await reader.read(65536):
                frames.feed(data)
                while (frame := frames.next_frame()) is not None:
                    header, request = decode_request(frame)
                    cid = header.correlation_id
                    if isinstance(request, SaslHandshakeRequest):
                        ok = request.mechanism in self.mechanisms
                        writer.write(encode_response(SaslHandshakeResponse(
                            error_code=ErrorCode.none if ok else ErrorCode.unsupported_sasl_mechanism,
                            mechanisms=self.mechanisms), cid))
                        if not ok:
                            return
                        mechanism = request.mechanism if request.mechanism == "PLAIN" else ScramServer(
                            request.mechanism, self._lookup(request.mechanism))
                    elif isinstance(request, SaslAuthenticateRequest):
                        token, name = self._evaluate(mechanism, request.auth_bytes)
                        if token is None:
                            writer.write(encode_response(SaslAuthenticateResponse(
                                error_code=ErrorCode.sasl_authentication_failed, auth_bytes=b"",
                                error_message=f"{FAILED} {self._name(mechanism)}"), cid))
                            return
                        done = mechanism == "PLAIN" or (isinstance(mechanism, ScramServer) and mechanism.complete)
                        if done:
                            self.logins.append(name)
                            authenticated = True
                        writer.write(encode_response(SaslAuthenticateResponse(
                            error_code=ErrorCode.none, error_message=None, auth_bytes=token,
                            session_lifetime=datetime.timedelta(milliseconds=self.lifetime_ms if done else 0)),
                            cid))
                    elif isinstance(request, c.ControlledShutdownRequest):
                        if not authenticated:
                            self.unauthenticated_requests += 1
                            return
                        writer.write(encode_response(c.ControlledShutdownResponse(
                            error_code=ErrorCode.none, remaining_partitions=()), cid))
                await writer.drain()
        finally:
            writer.close()

    @staticmethod
    def _name(mechanism: ScramServer | str | None) -> str:
        return mechanism.mechanism if isinstance(mechanism, ScramServer) else str(mechanism)

    @staticmethod
    def _lookup(name: str) -> Callable[[str], ScramCredential | None]:
        credentials = {u: ScramCredential.from_password(name, p) for u, p in USERS.items()}
        return credentials.get

    @staticmethod
    def _evaluate(mechanism: ScramServer | str | None, token: bytes) -> tuple[bytes | None, str]:
        if mechanism == "PLAIN":
            _, user, password = token.decode().split("\0")
            return (b"", user) if USERS.get(user) == password else (None, user)
        assert isinstance(mechanism, ScramServer)
        try:
            return mechanism.evaluate(token), mechanism.username or ""
        except ScramAuthenticationError:
            return None, ""


async def _with(broker: SaslBroker, security: ClientSecurity,
                body: Callable[[BrokerConnection], Awaitable[None]]) -> None:
    port = await broker.start()
    conn = BrokerConnection("127.0.0.1", port, "broker-1", security=security)
    try:
        await conn.connect(timeout_s=TIMEOUT_S)
        await body(conn)
    finally:
        await conn.close()
        await broker.stop()


async def _shutdown(conn: BrokerConnection) -> c.ControlledShutdownResponse:
    return await conn.send(c.ControlledShutdownRequest(broker_id=1, broker_epoch=1), c.ControlledShutdownResponse,
                           timeout_s=TIMEOUT_S)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_login_then_requests(mechanism: str) -> None:
    broker = SaslBroker(("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))

    async def body(conn: BrokerConnection) -> None:
        assert (await _shutdown(conn)).error_code == ErrorCode.none

    asyncio.run(_with(broker, ClientSecurity("SASL_PLAINTEXT", None, mechanism, "alice", "alice-secret"), body))
    assert broker.logins == ["alice"]
    assert broker.unauthenticated_requests == 0


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_wrong_password_raises_the_brokers_message(mechanism: str) -> None:
    broker = SaslBroker(("PLAIN", "SCRAM-SHA-512"))

    async def body(conn: BrokerConnection) -> None:
        raise AssertionError("connected with a wrong password")

    with pytest.raises(AuthenticationFailed, match=f"{FAILED} {mechanism}"):
        asyncio.run(_with(broker, ClientSecurity("SASL_PLAINTEXT", None, mechanism, "alice", "wrong"), body))
    assert broker.logins == []


def test_unsupported_mechanism_names_the_enabled_ones() -> None:
    broker = SaslBroker(("SCRAM-SHA-512",))

    async def body(conn: BrokerConnection) -> None:
        raise AssertionError("connected with a disabled mechanism")

    with pytest.raises(AuthenticationFailed, match=r"'PLAIN' not enabled.*\['SCRAM-SHA-512'\]"):
        asyncio.run(_with(broker, ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "alice", "alice-secret"), body))


async def _shutdown_frame(conn: BrokerConnection) -> c.ControlledShutdownResponse:
    """The same request, encoded here and sent with send_frame."""
    correlation_id = conn.next_correlation_id()
    frame = encode_request(c.ControlledShutdownRequest(broker_id=1, broker_epoch=1), correlation_id, conn.client_id)
    got_id, response = decode_response(await conn.send_frame(frame, correlation_id, TIMEOUT_S),
                                       c.ControlledShutdownResponse)
    assert got_id == correlation_id
    return response


@pytest.mark.parametrize("send", [_shutdown, _shutdown_frame], ids=["payload", "frame"])
def test_reauthenticates_on_the_same_connection_when_the_session_expires(
        send: Callable[[BrokerConnection], Awaitable[c.ControlledShutdownResponse]]) -> None:
    broker = SaslBroker(("SCRAM-SHA-256",), lifetime_ms=200)

    async def body(conn: BrokerConnection) -> None:
        await send(conn)
        assert broker.logins == ["alice"]

        async def relogged() -> bool:  # each request after 85-95% of 200 ms re-authenticates first
            assert (await send(conn)).error_code == ErrorCode.none
            return len(broker.logins) >= 2

        await wait_until_async(relogged, timeout=TIMEOUT_S, message="a second login")
        assert conn.connected

    asyncio.run(_with(broker, ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", "alice", "alice-secret"), body))
    assert broker.logins == ["alice", "alice"]


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return tls_material(tmp_path_factory.mktemp("tls"))


def _tls_broker(material: TlsMaterial, keystore: Path | None = None) -> SaslBroker:
    props = material.broker_ssl_props()
    if keystore is not None:
        props["ssl.keystore.location"] = str(keystore)
    return SaslBroker(("SCRAM-SHA-512",), ssl_context=tls.server_context(props))


def test_sasl_ssl_login(material: TlsMaterial) -> None:
    security = ClientSecurity.from_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="alice" password="alice-secret";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(material.ca_file)})
    broker = _tls_broker(material)

    async def body(conn: BrokerConnection) -> None:
        assert (await _shutdown(conn)).error_code == ErrorCode.none

    asyncio.run(_with(broker, security, body))
    assert broker.logins == ["alice"]


def test_untrusted_broker_certificate_fails_the_connection(material: TlsMaterial) -> None:
    security = ClientSecurity.from_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
        "sasl.password": "alice-secret", "ssl.ca.location": str(material.ca_file)})
    broker = _tls_broker(material, keystore=material.untrusted_keystore)

    async def body(conn: BrokerConnection) -> None:
        raise AssertionError("connected to a broker with an untrusted certificate")

    with pytest.raises(AuthenticationFailed, match=r"SSL handshake .* failed"):
        asyncio.run(_with(broker, security, body))
    assert broker.logins == []
