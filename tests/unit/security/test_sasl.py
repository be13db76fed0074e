"""The SASL authenticator without sockets: PLAIN, SCRAM, raw tokens, refusals, re-authentication."""

from __future__ import annotations

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.security.acls import KafkaPrincipal
from odradek.security.sasl import (
    PlainServer,
    SaslAuthenticationError,
    SaslAuthenticator,
    SaslServerConfig,
    SaslState,
    plain_verifier,
)
from odradek.security.scram import ScramClient, ScramCredential

SCRAM_FAILED = ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
                "SCRAM-SHA-256")
CREDENTIALS = {("SCRAM-SHA-256", "alice"): ScramCredential.from_password("SCRAM-SHA-256", "alice-secret")}


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000

    def __call__(self) -> int:
        return self.ms


def authenticator(clock: Clock | None = None, reauth_ms: int = 0,
                  mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256")) -> SaslAuthenticator:
    config = SaslServerConfig(enabled_mechanisms=mechanisms, plain_users={"bob": "bob-secret"},
                              scram_credentials=lambda m, u: CREDENTIALS.get((m, u)),
                              connections_max_reauth_ms=reauth_ms)
    return SaslAuthenticator(config, now_ms=clock or Clock())


def scram_exchange(auth: SaslAuthenticator, user: str, password: str, version: int = 2) -> ErrorCode:
    client = ScramClient("SCRAM-SHA-256", user, password)
    first = auth.authenticate(client.first_message(), version)
    if first.error != ErrorCode.none:
        return first.error
    final = auth.authenticate(client.final_message(first.auth_bytes), version)
    if final.error == ErrorCode.none:
        client.verify_server_final(final.auth_bytes)
    return final.error


def test_plain_success_sets_principal() -> None:
    auth = authenticator()
    assert auth.allows(18) and auth.allows(17) and not auth.allows(0)
    auth.api_versions()
    assert not auth.allows(18) and auth.allows(17)
    assert auth.handshake("PLAIN", 1).error == ErrorCode.none
    assert auth.allows(36) and not auth.allows(3)
    result = auth.authenticate(b"\0bob\0bob-secret", 2)
    assert result.error == ErrorCode.none
    assert auth.authenticated and auth.principal == KafkaPrincipal("User", "bob")


@pytest.mark.parametrize("token, message", [
    (b"\0bob\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0nobody\0x", "Authentication failed: Invalid username or password"),
    (b"bob", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"\xff\xfe", "Invalid SASL/PLAIN response: not UTF-8"),
    (b"carol\0bob\0bob-secret", "Authentication failed: Client requested an authorization id that is different "
                                "from username"),
])
def test_plain_refusals(token: bytes, message: str) -> None:
    auth = authenticator()
    auth.handshake("PLAIN", 1)
    result = auth.authenticate(token, 2)
    assert (result.error, result.message) == (ErrorCode.sasl_authentication_failed, message)
    assert auth.failed and not auth.authenticated and auth.principal is None


def test_scram_success_and_refusals_carry_kafkas_message() -> None:
    auth = authenticator()
    auth.handshake("SCRAM-SHA-256", 1)
    assert scram_exchange(auth, "alice", "alice-secret") == ErrorCode.none
    assert auth.principal == KafkaPrincipal("User", "alice")
    for user, password in (("alice", "wrong"), ("mallory", "x")):
        auth = authenticator()
        auth.handshake("SCRAM-SHA-256", 1)
        assert scram_exchange(auth, user, password) == ErrorCode.sasl_authentication_failed
        assert auth.failure == SCRAM_FAILED and auth.principal is None


def test_unsupported_mechanism_lists_the_enabled_ones() -> None:
    auth = authenticator(mechanisms=("SCRAM-SHA-256",))
    result = auth.handshake("PLAIN", 1)
    assert result.error == ErrorCode.unsupported_sasl_mechanism
    assert result.mechanisms == ("SCRAM-SHA-256",)
    assert auth.failed
    assert authenticator().handshake("GSSAPI", 1).error == ErrorCode.unsupported_sasl_mechanism


def test_handshake_v0_switches_to_raw_tokens() -> None:
    auth = authenticator()
    auth.handshake("SCRAM-SHA-256", 0)
    assert auth.expects_raw_token and not auth.allows(36)
    client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
    server_first = auth.raw_token(client.first_message())
    client.verify_server_final(auth.raw_token(client.final_message(server_first)))
    assert auth.authenticated and not auth.expects_raw_token


def test_raw_token_failure_raises() -> None:
    auth = authenticator()
    auth.handshake("PLAIN", 0)
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
        auth.raw_token(b"\0bob\0nope")
    assert auth.failed


def test_out_of_order_requests_are_illegal() -> None:
    auth = authenticator()
    assert auth.authenticate(b"x", 1).error == ErrorCode.illegal_sasl_state
    assert auth.failed
    auth = authenticator()
    with pytest.raises(SaslAuthenticationError):
        auth.raw_token(b"x")


def test_session_lifetime_expiry_and_reauthentication_keeps_principal() -> None:
    clock = Clock()
    auth = authenticator(clock, reauth_ms=500)
    auth.handshake("SCRAM-SHA-256", 1)
    client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
    first = auth.authenticate(client.first_message(), 2)
    final = auth.authenticate(client.final_message(first.auth_bytes), 2)
    assert final.session_lifetime_ms == 500
    assert not auth.expired()
    clock.ms += 500
    assert auth.expired()
    assert not auth.begins_reauthentication(3)
    assert auth.begins_reauthentication(17)
    assert not auth.authenticated and auth.allows(17) and not auth.allows(0)
    assert auth.handshake("SCRAM-SHA-256", 1).error == ErrorCode.none
    assert scram_exchange(auth, "alice", "alice-secret") == ErrorCode.none
    assert auth.authenticated and not auth.expired()
    assert auth.session_expiration_ms == clock.ms + 500


def test_reauthentication_refuses_another_principal_or_mechanism() -> None:
    auth = authenticator(reauth_ms=1000)
    auth.handshake("PLAIN", 1)
    auth.authenticate(b"\0bob\0bob-secret", 1)
    assert auth.begins_reauthentication(17)
    assert auth.handshake("SCRAM-SHA-256", 1).error == ErrorCode.illegal_sasl_state
    assert auth.failed

    auth = SaslAuthenticator(SaslServerConfig(("PLAIN",), {"bob": "b", "eve": "e"}, connections_max_reauth_ms=1000),
                             now_ms=Clock())
    auth.handshake("PLAIN", 1)
    auth.authenticate(b"\0bob\0b", 1)
    assert auth.begins_reauthentication(17)
    auth.handshake("PLAIN", 1)
    result = auth.authenticate(b"\0eve\0e", 1)
    assert result.error == ErrorCode.sasl_authentication_failed
    assert result.message == "Cannot change principals during re-authentication from User:bob: User:eve"
    assert auth.state is SaslState.FAILED


def test_no_reauthentication_for_v0_clients_or_when_disabled() -> None:
    auth = authenticator(reauth_ms=1000)
    auth.handshake("PLAIN", 1)
    auth.authenticate(b"\0bob\0bob-secret", 0)
    assert not auth.begins_reauthentication(17)
    auth = authenticator(reauth_ms=0)
    auth.handshake("PLAIN", 1)
    auth.authenticate(b"\0bob\0bob-secret", 2)
    assert not auth.begins_reauthentication(17) and not auth.expired()


def test_plain_server_alone() -> None:
    server = PlainServer(plain_verifier({"bob": "pw"}))
    assert server.evaluate(b"\0bob\0pw") == b"" and server.complete and server.username == "bob"


def test_scram_accepts_librdkafkas_repeated_client_nonce_only() -> None:
    """librdkafka < 2.6.1 sends r=<client nonce><combined nonce> (confluentinc/librdkafka#4895);
    kcat 1.7 does, and Kafka 2.8 let it in.  Any other nonce is refused."""
    import base64
    import hashlib
    import hmac as hmac_

    from odradek.security.scram import salted_password

    def final(auth: SaslAuthenticator, nonce_of: str) -> ErrorCode:
        auth.handshake("SCRAM-SHA-256", 1)
        client_first_bare = "n=alice,r=cnonce"
        server_first = auth.authenticate(f"n,,{client_first_bare}".encode(), 2).auth_bytes.decode()
        fields = dict(part.split("=", 1) for part in server_first.split(","))
        nonce = {"combined": fields["r"], "librdkafka": "cnonce" + fields["r"], "other": "x" + fields["r"]}[nonce_of]
        without_proof = f"c=biws,r={nonce}"
        salted = salted_password("SCRAM-SHA-256", "alice-secret", base64.b64decode(fields["s"]), int(fields["i"]))
        client_key = hmac_.new(salted, b"Client Key", "sha256").digest()
        signature = hmac_.new(hashlib.sha256(client_key).digest(),
                              f"{client_first_bare},{server_first},{without_proof}".encode(), "sha256").digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
        return auth.authenticate(f"{without_proof},p={proof}".encode(), 2).error

    assert final(authenticator(), "combined") == ErrorCode.none
    assert final(authenticator(), "librdkafka") == ErrorCode.none
    assert final(authenticator(), "other") == ErrorCode.sasl_authentication_failed
