"""Target ``sasl``: a client's SASL exchange (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).

Input: a byte choosing the mechanism the client asks for (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512, or GSSAPI, which is not enabled), a byte choosing how tokens travel (0: bare
tokens after SaslHandshake v0, through the connection's ``KafkaChannel``; 1-3: SaslAuthenticate
v0-v2), then the client's tokens, each a big-endian uint16 length and its bytes.  The
listener knows one user, ``alice``, with password ``alice-secret`` for every mechanism; the
server's SCRAM nonce is fixed (``SERVER_NONCE``) so that a recorded exchange replays.

Entry: ``security.sasl.SaslAuthenticator`` as the SaslHandshake and SaslAuthenticate
handlers drive it (``handshake``, ``authenticate``), and ``net.kafka_channel.KafkaChannel``
for bare tokens, which hands them to ``raw_token`` (PLAIN's parser, SCRAM's client-first and
client-final parsers in ``security.scram``).

Property: nothing raises (a refusal is an error code in the SaslAuthenticate answer, or a
closed channel for bare tokens); an authenticated session is alice's, reached only with her
password; a failed exchange stays failed.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from odradek.net.kafka_channel import KafkaChannel
from odradek.security.sasl import (
    MechanismServer,
    PlainServer,
    SaslAuthenticator,
    SaslServerConfig,
    plain_verifier,
)
from odradek.security.scram import ScramCredential, ScramServer

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI")
USER, PASSWORD = "alice", "alice-secret"
SERVER_NONCE = "fuzz-server-nonce"
SALT = b"fuzz-salt-0123456789abcdef012345"
_LENGTH = struct.Struct(">H")
_FRAME_SIZE = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class _FixedNonceConfig(SaslServerConfig):
    """The listener's SASL settings, with a fixed SCRAM server nonce."""

    def new_mechanism(self, mechanism: str) -> MechanismServer:
        if mechanism == "PLAIN":
            return PlainServer(plain_verifier(self.plain_users))
        return ScramServer(mechanism, lambda user: self.scram_credentials(mechanism, user),
                           nonce=lambda: SERVER_NONCE)


@functools.cache
def _config() -> SaslServerConfig:
    credentials = {m: ScramCredential.from_password(m, PASSWORD, salt=SALT) for m in MECHANISMS[1:3]}
    return _FixedNonceConfig(enabled_mechanisms=MECHANISMS[:3], plain_users={USER: PASSWORD},
                             scram_credentials=lambda m, u: credentials.get(m) if u == USER else None)


def tokens(data: bytes) -> Iterator[bytes]:
    """The length-prefixed tokens of an input (a short tail is one last token)."""
    pos = 0
    while pos < len(data):
        if len(data) - pos < _LENGTH.size:
            yield data[pos:]
            return
        (n,) = _LENGTH.unpack_from(data, pos)
        pos += _LENGTH.size
        yield data[pos:pos + n]
        pos += n


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    mechanism = MECHANISMS[data[0] % len(MECHANISMS)]
    version = data[1] % 4  # 0: SaslHandshake v0 and bare tokens; n: SaslAuthenticate v(n-1)
    auth = SaslAuthenticator(_config(), now_ms=lambda: 0)
    sent: list[bytes] = []
    handshake = auth.handshake(mechanism, 0 if version == 0 else 1)
    if handshake.error != ErrorCode.none:
        assert auth.failed
        return
    if version == 0:
        channel = KafkaChannel(authenticator=auth)
        for token in tokens(data[2:]):
            if channel.closing or auth.authenticated:  # then frames are requests again
                break
            sent.append(token)
            channel.frames.feed(_FRAME_SIZE.pack(len(token)) + token)
            assert channel.next_request() is None  # bare tokens are answered by the channel
        failed = channel.closing
    else:
        failed = False
        for token in tokens(data[2:]):
            sent.append(token)
            result = auth.authenticate(token, version - 1)
            if failed:
                assert result.error != ErrorCode.none, "a failed exchange went on"
            failed = failed or result.error != ErrorCode.none
            if auth.authenticated:
                break
    if auth.authenticated:
        assert not failed
        assert auth.principal is not None and auth.principal.name == USER
        if mechanism == "PLAIN":
            assert PASSWORD.encode() in sent[-1], "PLAIN accepted without the password"
