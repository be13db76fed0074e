"""SCRAM credentials and the sans-IO server exchange (RFC 5802 / RFC 7677, Kafka's ScramSaslServer)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from odradek.protocol.errors import for_code
from odradek.security.scram import (
    INVALID_CREDENTIALS,
    ScramAuthenticationError,
    ScramClient,
    ScramCredential,
    ScramServer,
    escape_username,
    unescape_username,
)

# RFC 7677 section 3.
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_server() -> ScramServer:
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096, salt=RFC_SALT)
    return ScramServer("SCRAM-SHA-256", {"user": cred}.get, nonce=lambda: RFC_SERVER_NONCE)


def test_rfc7677_vector_server_side() -> None:
    server = _rfc_server()
    assert server.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not server.complete
    assert server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete
    assert server.username == "user"


def test_rfc7677_vector_client_side() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first_message() == RFC_CLIENT_FIRST
    assert client.final_message(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify_server_final(RFC_SERVER_FINAL)
    with pytest.raises(ScramAuthenticationError):
        client.verify_server_final(b"v=" + base64.b64encode(b"\0" * 32))


def _exchange(server: ScramServer, client: ScramClient) -> None:
    client.verify_server_final(
        server.evaluate(client.final_message(server.evaluate(client.first_message())))
    )


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_round_trip(mechanism: str) -> None:
    cred = ScramCredential.from_password(mechanism, "s3cret,=ü", 8192)
    users = {"al,i=ce": cred}
    server = ScramServer(mechanism, users.get)
    client = ScramClient(
        mechanism, "al,i=ce", "s3cret,=ü", authzid="al,i=ce", extensions={"tokenauth": "false"}
    )
    _exchange(server, client)
    assert server.complete
    assert server.username == "al,i=ce"
    assert server.extensions == {"tokenauth": "false"}


def test_unknown_user_fails_at_first_message_like_kafka() -> None:
    server = ScramServer("SCRAM-SHA-256", {}.get)
    with pytest.raises(ScramAuthenticationError, match=f"^{INVALID_CREDENTIALS}$"):
        server.evaluate(ScramClient("SCRAM-SHA-256", "ghost", "pw").first_message())


def test_token_auth_without_delegation_tokens_fails() -> None:
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", {"alice": cred}.get)
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", extensions={"tokenauth": "true"})
    with pytest.raises(ScramAuthenticationError, match=f"^{INVALID_CREDENTIALS}$"):
        server.evaluate(client.first_message())


def test_stored_credential_below_min_iterations_is_refused() -> None:
    weak = ScramCredential(salt=b"s", stored_key=b"k" * 32, server_key=b"k" * 32, iterations=1000)
    server = ScramServer("SCRAM-SHA-256", {"alice": weak}.get)
    with pytest.raises(ScramAuthenticationError, match="less than the minimum 4096"):
        server.evaluate(ScramClient("SCRAM-SHA-256", "alice", "pw").first_message())


def test_sha512_key_lengths() -> None:
    cred = ScramCredential.from_password("SCRAM-SHA-512", "pw")
    assert len(cred.stored_key) == len(cred.server_key) == 64
    assert cred.iterations == 4096


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password(mechanism: str) -> None:
    cred = ScramCredential.from_password(mechanism, "right")
    server = ScramServer(mechanism, {"alice": cred}.get)
    client = ScramClient(mechanism, "alice", "wrong")
    server_first = server.evaluate(client.first_message())
    with pytest.raises(
        ScramAuthenticationError, match=r"^Authentication failed: Invalid user credentials$"
    ) as e:
        server.evaluate(client.final_message(server_first))
    assert isinstance(e.value, for_code(ErrorCode.sasl_authentication_failed))
    assert e.value.code is ErrorCode.sasl_authentication_failed
    assert not server.complete
    with pytest.raises(ScramAuthenticationError):
        server.evaluate(b"anything")


def test_hidden_unknown_user_looks_like_a_known_one_until_the_proof() -> None:
    server = ScramServer("SCRAM-SHA-256", {}.get, hide_unknown_users=True, fake_secret=b"k")
    client = ScramClient("SCRAM-SHA-256", "ghost", "pw")
    server_first = server.evaluate(client.first_message())
    assert b",s=" in server_first and server_first.endswith(b",i=4096")
    with pytest.raises(ScramAuthenticationError, match=f"^{INVALID_CREDENTIALS}$"):
        server.evaluate(client.final_message(server_first))
    # The fake salt is stable for a user, so probing twice does not reveal a missing user.
    again = ScramServer("SCRAM-SHA-256", {}.get, hide_unknown_users=True, fake_secret=b"k")
    salt_of = lambda msg: msg.split(b",")[1]  # noqa: E731
    assert salt_of(
        again.evaluate(ScramClient("SCRAM-SHA-256", "ghost", "x").first_message())
    ) == salt_of(server_first)


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"y,,n=user,r=abc",  # channel binding requested: not supported
        b"p=tls-unique,,n=user,r=abc",
        b"n,,n=user",  # no nonce
        b"n,,r=abc,n=user",
        b"n,,n=us=2Xer,r=abc",  # bad escape
        b"n,,n=user,r=abc,foo=bar",  # unsupported extension
        b"n,a=other,n=user,r=abc",  # authzid differs from user
        b"\xff\xfe",
    ],
)
def test_bad_client_first(message: bytes) -> None:
    server = _rfc_server()
    with pytest.raises(ScramAuthenticationError):
        server.evaluate(message)


@pytest.mark.parametrize(
    "message",
    [
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",  # nonce
        b"c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",  # channel binding
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=!!!",  # proof not base64
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAA",  # short proof
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",  # no proof
    ],
)
def test_bad_client_final(message: bytes) -> None:
    server = _rfc_server()
    server.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(ScramAuthenticationError):
        server.evaluate(message)
    assert not server.complete


@pytest.mark.parametrize("iterations", [0, 4095, 16385])
def test_iterations_out_of_range(iterations: int) -> None:
    with pytest.raises(ValueError, match="Iterations"):
        ScramCredential.from_password("SCRAM-SHA-256", "pw", iterations)


def test_unknown_mechanism() -> None:
    with pytest.raises(ValueError, match="Unsupported SCRAM mechanism"):
        ScramCredential.from_password("SCRAM-SHA-1", "pw")
    with pytest.raises(ValueError):
        ScramServer("PLAIN", {}.get)


def test_credential_string_matches_kafka_format() -> None:
    cred = ScramCredential(
        salt=b"\x01\x02", stored_key=b"\x03", server_key=b"\x04", iterations=4096
    )
    assert cred.to_string() == "salt=AQI=,stored_key=Aw==,server_key=BA==,iterations=4096"
    assert ScramCredential.from_string(cred.to_string()) == cred


@given(
    salt=st.binary(min_size=1, max_size=64),
    stored=st.binary(min_size=1, max_size=64),
    server=st.binary(min_size=1, max_size=64),
    iterations=st.integers(min_value=0, max_value=2**31 - 1),
)
def test_credential_string_round_trip(
    salt: bytes, stored: bytes, server: bytes, iterations: int
) -> None:
    cred = ScramCredential(salt=salt, stored_key=stored, server_key=server, iterations=iterations)
    assert ScramCredential.from_string(cred.to_string()) == cred


@pytest.mark.parametrize(
    "text",
    [
        "",
        "salt=AQI=,stored_key=Aw==,server_key=BA==",
        "salt=AQI=,stored_key=Aw==,server_key=BA==,iterations=x",
        "salt=AQI=,stored_key=Aw==,server_key=BA==,iterations=4096,extra=1",
        "salt=AQI=,salt=AQI=,stored_key=Aw==,server_key=BA==,iterations=4096",
        "salt=!!,stored_key=Aw==,server_key=BA==,iterations=4096",
        "salt,stored_key=Aw==,server_key=BA==,iterations=4096",
    ],
)
def test_bad_credential_string(text: str) -> None:
    with pytest.raises(ValueError, match="Invalid"):
        ScramCredential.from_string(text)


@given(st.text())
def test_username_escaping_round_trip(name: str) -> None:
    escaped = escape_username(name)
    assert "," not in escaped
    assert unescape_username(escaped) == name
