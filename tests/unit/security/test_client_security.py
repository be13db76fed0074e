"""The client side of security without I/O: ClientSecurity from Kafka client properties, the
PLAIN and SCRAM client mechanisms against Kafka's server rules (scram.ScramServer), and the
Java -> librdkafka property names."""

from __future__ import annotations

import ssl

import pytest

from odradek.security.client import (
    ClientSecurity,
    PlainClient,
    ScramSaslClient,
    sasl_client,
)
from odradek.security.client_properties import librdkafka_properties
from odradek.security.scram import ScramAuthenticationError, ScramCredential, ScramServer


def test_default_is_plaintext() -> None:
    security = ClientSecurity.from_properties({})
    assert security == ClientSecurity()
    assert not security.uses_tls and not security.uses_sasl


def test_sasl_plaintext_with_librdkafka_login() -> None:
    security = ClientSecurity.from_properties({
        "security.protocol": "sasl_plaintext", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": "pw"})
    assert security == ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", "alice", "pw")
    assert security.uses_sasl and not security.uses_tls


@pytest.mark.parametrize(("props", "message"), [
    ({"security.protocol": "TLS"}, "security.protocol"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.username": "a", "sasl.password": "b"}, "GSSAPI"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}, "OAUTHBEARER"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "a"}, "password"),
])
def test_bad_properties_fail_with_one_line(props: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        ClientSecurity.from_properties(props)
    assert "\n" not in str(info.value)


def test_plain_client_sends_one_message() -> None:
    client = PlainClient("alice", "s3cret")
    assert client.first_message() == b"\0alice\0s3cret"
    assert not client.complete
    assert client.evaluate(b"") is None
    assert client.complete
    with pytest.raises(ValueError):
        client.evaluate(b"")


def _server(mechanism: str, password: str) -> ScramServer:
    credential = ScramCredential.from_password(mechanism, password, iterations=4096)
    return ScramServer(mechanism, lambda user: credential if user == "alice" else None)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_completes_against_kafkas_server_rules(mechanism: str) -> None:
    server = _server(mechanism, "pw")
    client = sasl_client(ClientSecurity("SASL_SSL", None, mechanism, "alice", "pw"))
    assert isinstance(client, ScramSaslClient)
    final = client.evaluate(server.evaluate(client.first_message()))
    assert final is not None
    assert client.evaluate(server.evaluate(final)) is None
    assert client.complete and server.complete


def test_scram_client_wrong_password_is_refused_by_the_server() -> None:
    server = _server("SCRAM-SHA-256", "pw")
    client = ScramSaslClient("SCRAM-SHA-256", "alice", "nope")
    final = client.evaluate(server.evaluate(client.first_message()))
    assert final is not None
    with pytest.raises(ScramAuthenticationError):
        server.evaluate(final)


def test_scram_client_rejects_a_forged_server_signature() -> None:
    server = _server("SCRAM-SHA-256", "pw")
    client = ScramSaslClient("SCRAM-SHA-256", "alice", "pw")
    final = client.evaluate(server.evaluate(client.first_message()))
    assert final is not None
    server.evaluate(final)
    with pytest.raises(ValueError, match="server signature"):
        client.evaluate(b"v=AAAA")
    assert not client.complete


def test_librdkafka_names() -> None:
    props = librdkafka_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u",
        "sasl.password": "p", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": "/ks.pem",
        "ssl.endpoint.identification.algorithm": ""})
    assert props == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u",
                     "sasl.password": "p", "ssl.ca.location": "/ca.pem", "ssl.certificate.location": "/ks.pem",
                     "ssl.key.location": "/ks.pem", "ssl.endpoint.identification.algorithm": "none"}


def test_librdkafka_needs_a_pem_truststore() -> None:
    with pytest.raises(ValueError, match="PEM"):
        librdkafka_properties({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": "/ts.p12"})


SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="a;b";'


def test_login_from_sasl_jaas_config() -> None:
    security = ClientSecurity.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": SCRAM_JAAS})
    assert (security.username, security.password) == ("admin", "a;b")


def test_jaas_login_module_must_match_the_mechanism() -> None:
    with pytest.raises(ValueError, match="PlainLoginModule"):
        ClientSecurity.from_properties({
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": SCRAM_JAAS})


def test_ssl_protocols_get_a_verifying_context() -> None:
    security = ClientSecurity.from_properties({"security.protocol": "SSL"})
    assert security.uses_tls and security.ssl_context is not None
    assert security.ssl_context.check_hostname
    assert security.ssl_context.verify_mode == ssl.CERT_REQUIRED


def test_missing_truststore_is_one_line() -> None:
    with pytest.raises(ValueError, match=r"ssl\.truststore\.location") as info:
        ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                        "ssl.truststore.location": "/nonexistent.pem"})
    assert "\n" not in str(info.value)


def test_librdkafka_login_from_jaas() -> None:
    assert librdkafka_properties({"sasl.jaas.config": SCRAM_JAAS}) == {"sasl.username": "admin", "sasl.password": "a;b"}
