"""The server side of SASL, without I/O: Kafka's ``SaslServerAuthenticator`` as a state machine.

A connection on a SASL_PLAINTEXT or SASL_SSL listener owns one :class:`SaslAuthenticator`.
Until it is authenticated the connection may only send ApiVersions, SaslHandshake and
SaslAuthenticate (:meth:`SaslAuthenticator.allows`); anything else is Kafka's
IllegalSaslStateException and closes the connection.  The exchange is

* SaslHandshake v1 naming a mechanism, then SaslAuthenticate requests carrying the tokens
  (:meth:`handshake`, :meth:`authenticate`), or
* SaslHandshake v0, then the tokens as bare size-prefixed frames (:attr:`expects_raw_token`,
  :meth:`raw_token`), as clients from before KIP-152 do.

A failure answers with an error (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM,
ILLEGAL_SASL_STATE) and leaves the authenticator :attr:`failed`: the connection sends that
answer and closes.

KIP-368 re-authentication: with ``connections.max.reauth.ms`` set, a successful exchange
starts a session of that length (returned to SaslAuthenticate v1+ clients).  A SaslHandshake
on an authenticated connection whose client spoke SaslAuthenticate v1+ begins a
re-authentication with the same mechanism, which must end with the same principal; any other
request after the session expired closes the connection (:meth:`expired`).

The mechanisms are :class:`PlainServer` (``PLAIN``, users from the JAAS config's
``user_<name>="<password>"`` options) and :class:`~odradek.security.scram.ScramServer`.
"""

from __future__ import annotations

import enum
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import KafkaPrincipal
from odradek.security.scram import MECHANISMS as SCRAM_MECHANISMS
from odradek.security.scram import ScramAuthenticationError, ScramCredential, ScramServer

__all__ = [
    "SERVER_MECHANISMS",
    "AuthResult",
    "HandshakeResult",
    "PlainServer",
    "SaslAuthenticationError",
    "SaslAuthenticator",
    "SaslServerConfig",
    "SaslState",
]

# The mechanisms this broker can serve (Kafka also has GSSAPI and OAUTHBEARER).
SERVER_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)


class SaslAuthenticationError(Exception):
    """A mechanism refused the client (Kafka's SaslAuthenticationException): the message is
    safe to send back."""


class MechanismServer(Protocol):
    """What a mechanism's server does (javax.security.sasl.SaslServer, reduced)."""

    @property
    def complete(self) -> bool: ...

    def evaluate(self, response: bytes) -> bytes: ...


class PlainServer:
    """Kafka's ``PlainSaslServer`` (RFC 4616): one message ``[authzid] NUL authcid NUL passwd``."""

    mechanism = "PLAIN"

    def __init__(self, verify: Callable[[str, str], bool]) -> None:
        self._verify = verify
        self.complete = False
        self.username: str | None = None

    def evaluate(self, response: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: PLAIN exchange is already complete")
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        tokens = text.split("\0")
        if len(tokens) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, username, password = tokens
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        if not self._verify(username, password):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.username = username
        self.complete = True
        return b""


def plain_verifier(users: Mapping[str, str]) -> Callable[[str, str], bool]:
    """Kafka's ``PlainServerCallbackHandler``: the JAAS ``user_<name>`` options."""
    def verify(username: str, password: str) -> bool:
        expected = users.get(username)
        return expected is not None and hmac.compare_digest(expected.encode(), password.encode())
    return verify


CredentialLookup = Callable[[str, str], "ScramCredential | None"]  # (mechanism, user) -> credential


@dataclass(frozen=True, slots=True)
class SaslServerConfig:
    """One listener's SASL settings."""

    enabled_mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    scram_credentials: CredentialLookup = lambda _mechanism, _user: None
    connections_max_reauth_ms: int = 0
    max_receive_size: int = 524288

    def new_mechanism(self, mechanism: str) -> MechanismServer:
        if mechanism == "PLAIN":
            return PlainServer(plain_verifier(self.plain_users))
        return ScramServer(mechanism, lambda user: self.scram_credentials(mechanism, user))


class SaslState(enum.Enum):
    HANDSHAKE_OR_VERSIONS_REQUEST = "handshake_or_versions_request"
    HANDSHAKE_REQUEST = "handshake_request"
    AUTHENTICATE = "authenticate"  # SaslAuthenticate requests (after SaslHandshake v1)
    AUTHENTICATE_RAW = "authenticate_raw"  # bare tokens (after SaslHandshake v0)
    COMPLETE = "complete"
    FAILED = "failed"


# The requests a connection may send in each state before it is authenticated
# (SaslServerAuthenticator); in the other states it may send none.
_ALLOWED_REQUESTS: dict[SaslState, frozenset[int]] = {
    SaslState.HANDSHAKE_OR_VERSIONS_REQUEST: frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE}),
    SaslState.HANDSHAKE_REQUEST: frozenset({ApiKey.SASL_HANDSHAKE}),
    SaslState.AUTHENTICATE: frozenset({ApiKey.SASL_AUTHENTICATE}),
}
# Asked on every request of an authenticated connection: bound once (an enum member's
# lookup costs several times a module global's).
_SASL_HANDSHAKE = ApiKey.SASL_HANDSHAKE


@dataclass(frozen=True, slots=True)
class HandshakeResult:
    error: ErrorCode
    mechanisms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AuthResult:
    error: ErrorCode
    message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int = 0


class SaslAuthenticator:
    """One connection's authentication state (see the module docstring)."""

    def __init__(self, config: SaslServerConfig, *, now_ms: Callable[[], int]) -> None:
        self.config = config
        self._now_ms = now_ms
        self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self._server: MechanismServer | None = None
        self._reauthenticating = False
        self._client_supports_reauth = False
        self.session_expiration_ms: int | None = None
        self.failure: str | None = None  # why the authenticator failed, for the broker's log

    # -- what the connection asks

    @property
    def authenticated(self) -> bool:
        """Requests other than the SASL ones may be served."""
        return self.principal is not None and not self._reauthenticating and self.state is SaslState.COMPLETE

    @property
    def failed(self) -> bool:
        return self.state is SaslState.FAILED

    @property
    def expects_raw_token(self) -> bool:
        """The next frame is a bare SASL token, not a request (after SaslHandshake v0)."""
        return self.state is SaslState.AUTHENTICATE_RAW

    @property
    def max_receive_size(self) -> int:
        """Largest frame accepted before authentication (``sasl.server.max.receive.size``)."""
        return self.config.max_receive_size

    def allows(self, api_key: int) -> bool:
        """Whether an unauthenticated (or re-authenticating) connection may send ``api_key``."""
        return api_key in _ALLOWED_REQUESTS.get(self.state, ())

    def expired(self) -> bool:
        """The session ended (KIP-368): only a re-authentication may follow."""
        expiry = self.session_expiration_ms
        return expiry is not None and self._now_ms() >= expiry

    def begins_reauthentication(self, api_key: int) -> bool:
        """A SaslHandshake on an authenticated connection starts a re-authentication when the
        client told us it can (it used SaslAuthenticate v1+) and re-authentication is on."""
        if api_key != _SASL_HANDSHAKE or not self.authenticated or not self._client_supports_reauth:
            return False
        if self.config.connections_max_reauth_ms <= 0:
            return False
        self._reauthenticating = True
        self.state = SaslState.HANDSHAKE_REQUEST
        return True

    # -- the exchange

    def api_versions(self) -> None:
        """ApiVersions before the handshake: a SaslHandshake must follow."""
        if self.state is SaslState.HANDSHAKE_OR_VERSIONS_REQUEST:
            self.state = SaslState.HANDSHAKE_REQUEST

    def handshake(self, mechanism: str, version: int) -> HandshakeResult:
        """SaslHandshake: choose the mechanism; v0 switches to bare tokens."""
        enabled = self.config.enabled_mechanisms
        if self.state not in (SaslState.HANDSHAKE_OR_VERSIONS_REQUEST, SaslState.HANDSHAKE_REQUEST):
            self._set_failed(f"Unexpected SaslHandshake in state {self.state.value}")
            return HandshakeResult(ErrorCode.illegal_sasl_state, enabled)
        if mechanism not in enabled or mechanism not in SERVER_MECHANISMS:
            self._set_failed(f"Unsupported SASL mechanism {mechanism}")
            return HandshakeResult(ErrorCode.unsupported_sasl_mechanism, enabled)
        if self._reauthenticating and mechanism != self.mechanism:
            # Kafka's REAUTH_BAD_MECHANISM.
            self._set_failed(f"SASL mechanism {mechanism} requested during re-authentication differs from "
                             f"the original mechanism {self.mechanism}")
            return HandshakeResult(ErrorCode.illegal_sasl_state, enabled)
        self.mechanism = mechanism
        self._server = self.config.new_mechanism(mechanism)
        self.state = SaslState.AUTHENTICATE if version >= 1 else SaslState.AUTHENTICATE_RAW
        return HandshakeResult(ErrorCode.none, enabled)

    def authenticate(self, auth_bytes: bytes, version: int) -> AuthResult:
        """SaslAuthenticate: one token of the exchange."""
        if self.state is not SaslState.AUTHENTICATE:
            self._set_failed("Unexpected SaslAuthenticate request")
            return AuthResult(ErrorCode.illegal_sasl_state, self.failure, b"")
        if version >= 1:
            self._client_supports_reauth = True
        try:
            reply = self._evaluate(auth_bytes)
        except SaslAuthenticationError as e:
            return AuthResult(ErrorCode.sasl_authentication_failed, str(e), b"")
        lifetime = 0
        if self.state is SaslState.COMPLETE:
            lifetime = self._start_session()
            if self.state is SaslState.FAILED:  # a re-authentication changed the principal
                return AuthResult(ErrorCode.sasl_authentication_failed, self.failure, b"")
        return AuthResult(ErrorCode.none, None, reply, lifetime)

    def raw_token(self, token: bytes) -> bytes:
        """A bare token (after SaslHandshake v0): the bare reply.  Raises
        :class:`SaslAuthenticationError` on failure (the connection just closes: the raw
        exchange has no way to carry an error)."""
        if self.state is not SaslState.AUTHENTICATE_RAW:
            self._set_failed("Unexpected SASL token")
            raise SaslAuthenticationError(self.failure)
        reply = self._evaluate(token)
        if self.state is SaslState.COMPLETE:
            self._start_session()
        return reply

    def _evaluate(self, token: bytes) -> bytes:
        server = self._server
        assert server is not None
        try:
            reply = server.evaluate(token)
        except ScramAuthenticationError:
            # Kafka does not echo a SaslException's text: it could tell which users exist.
            self._set_failed(f"Authentication failed during {self._doing} due to invalid credentials with "
                             f"SASL mechanism {self.mechanism}")
            raise SaslAuthenticationError(self.failure) from None
        except SaslAuthenticationError as e:
            self._set_failed(str(e))
            raise
        if server.complete:
            self.state = SaslState.COMPLETE
        return reply

    def _set_failed(self, message: str) -> None:
        self.state = SaslState.FAILED
        self.failure = message

    @property
    def _doing(self) -> str:
        return "re-authentication" if self._reauthenticating else "authentication"

    def _start_session(self) -> int:
        server = self._server
        username = getattr(server, "username", None)
        assert username is not None
        principal = KafkaPrincipal("User", username)
        if self._reauthenticating and principal != self.principal:
            self._set_failed(f"Cannot change principals during re-authentication from {self.principal}: "
                             f"{principal}")
            return 0
        self.principal = principal
        self._reauthenticating = False
        self._server = None
        lifetime = self.config.connections_max_reauth_ms
        self.session_expiration_ms = self._now_ms() + lifetime if lifetime > 0 else None
        return max(lifetime, 0)
