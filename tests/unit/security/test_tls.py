"""security/tls.py and security/certs.py: contexts from Kafka's ssl.* keys, handshakes over
memory BIOs, the mutual-TLS principal and ssl.principal.mapping.rules."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12
from tests.support.tls import TlsMaterial, tls_material

from odradek.security.acls import ANONYMOUS, KafkaPrincipal
from odradek.security.certs import CertificateAuthority
from odradek.security.tls import (
    PrincipalMappingRules,
    TlsConfigError,
    client_context,
    peer_principal,
    server_context,
)


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return tls_material(tmp_path_factory.mktemp("tls"))


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str = "localhost"
              ) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """Run a TLS handshake between two contexts over memory BIOs; raises what either side raises."""
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    s = server.wrap_bio(s_in, s_out, server_side=True)
    c = client.wrap_bio(c_in, c_out, server_side=False, server_hostname=host)
    done = {"s": False, "c": False}
    for _ in range(20):
        for name, obj in (("c", c), ("s", s)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            # TLS 1.3: the server learns of a refused client certificate only from the client's next record.
            c.write(b"x")
            s_in.write(c_out.read())
            s.read(1)
            return s, c
    raise AssertionError("handshake did not finish")


def test_pem_keystore_and_truststore_handshake(material: TlsMaterial) -> None:
    server = server_context(material.broker_ssl_props())
    client = client_context({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(material.ca_file)})
    s, _c = handshake(server, client)
    assert s.version() in ("TLSv1.2", "TLSv1.3")
    assert peer_principal(s) == ANONYMOUS  # no client certificate asked for


def test_inline_pem_keystore(material: TlsMaterial) -> None:
    text = material.broker_keystore.read_text()
    key = text[:text.index("-----END PRIVATE KEY-----") + len("-----END PRIVATE KEY-----")]
    chain = text[len(key):].strip()
    server = server_context({"ssl.keystore.type": "PEM", "ssl.keystore.key": key,
                             "ssl.keystore.certificate.chain": chain})
    client = client_context({"ssl.truststore.type": "PEM",
                             "ssl.truststore.certificates": material.ca_file.read_text()})
    handshake(server, client)


def test_encrypted_pem_key_needs_ssl_key_password(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    path = ca.issue("localhost").write_keystore_pem(tmp_path / "k.pem", password="pw")
    props = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(path)}
    with pytest.raises(TlsConfigError, match="keystore"):
        server_context({**props, "ssl.key.password": "wrong"})
    server_context({**props, "ssl.key.password": "pw"})


def test_pkcs12_stores(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    issued = ca.issue("localhost")
    store = tmp_path / "broker.p12"
    store.write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", issued.key, x509.load_pem_x509_certificate(issued.cert_pem),
        None, BestAvailableEncryption(b"storepw")))
    server = server_context({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(store),
                             "ssl.keystore.password": "storepw"})
    client = client_context({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.write_truststore_pem(tmp_path / "ca.pem"))})
    handshake(server, client)
    with pytest.raises(TlsConfigError, match="PKCS12"):
        server_context({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(store),
                        "ssl.keystore.password": "nope"})


def test_jks_and_missing_keystore_are_refused_clearly(material: TlsMaterial) -> None:
    with pytest.raises(TlsConfigError, match="JKS is not supported"):
        server_context({"ssl.keystore.location": str(material.broker_keystore)})  # type defaults to JKS
    with pytest.raises(TlsConfigError, match="needs a key and certificate"):
        server_context({})
    with pytest.raises(TlsConfigError, match=r"cannot read ssl\.keystore\.location"):
        server_context({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent/k.pem"})


def test_untrusted_server_is_refused(material: TlsMaterial) -> None:
    server = server_context({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(material.untrusted_keystore)})
    client = client_context({"ssl.ca.location": str(material.ca_file)})
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server, client)


def test_endpoint_identification(material: TlsMaterial) -> None:
    server = server_context(material.broker_ssl_props())
    checked = client_context({"ssl.ca.location": str(material.ca_file)})
    with pytest.raises(ssl.SSLCertVerificationError, match=r"match"):
        handshake(server, checked, host="broker.example.com")
    unchecked = client_context({"ssl.ca.location": str(material.ca_file), "ssl.endpoint.identification.algorithm": ""})
    handshake(server, unchecked, host="broker.example.com")


def test_client_auth_required_gives_the_dn_principal(material: TlsMaterial) -> None:
    server = server_context(material.broker_ssl_props("required"))
    client = client_context({"ssl.ca.location": str(material.ca_file),
                             "ssl.certificate.location": str(material.client_cert),
                             "ssl.key.location": str(material.client_key)})
    s, _ = handshake(server, client)
    assert peer_principal(s) == KafkaPrincipal("User", "CN=client,O=odradek")
    rules = "RULE:^CN=(.*?),O=(.*)$/$1@$2/U,DEFAULT"
    assert peer_principal(s, rules) == KafkaPrincipal("User", "CLIENT@ODRADEK")


def test_client_auth_required_refuses_a_client_without_a_certificate(material: TlsMaterial) -> None:
    server = server_context(material.broker_ssl_props("required"))
    client = client_context({"ssl.ca.location": str(material.ca_file)})
    with pytest.raises(ssl.SSLError):
        handshake(server, client)


def test_client_auth_requested_allows_anonymous(material: TlsMaterial) -> None:
    server = server_context(material.broker_ssl_props("requested"))
    s, _ = handshake(server, client_context({"ssl.ca.location": str(material.ca_file)}))
    assert peer_principal(s) == ANONYMOUS


def test_enabled_protocols(material: TlsMaterial) -> None:
    server = server_context({**material.broker_ssl_props(), "ssl.enabled.protocols": "TLSv1.3"})
    client = client_context({"ssl.ca.location": str(material.ca_file), "ssl.enabled.protocols": "TLSv1.2"})
    with pytest.raises(ssl.SSLError):
        handshake(server, client)
    assert server_context(material.broker_ssl_props()).minimum_version == ssl.TLSVersion.TLSv1_2
    with pytest.raises(TlsConfigError, match=r"ssl\.enabled\.protocols"):
        server_context({**material.broker_ssl_props(), "ssl.enabled.protocols": "SSLv3"})


@pytest.mark.parametrize(("rules", "dn", "expected"), [
    ("DEFAULT", "CN=alice,OU=eng,O=odradek", "CN=alice,OU=eng,O=odradek"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1/,DEFAULT", "CN=alice,OU=eng,O=odradek", "alice"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1/L,DEFAULT", "CN=Alice,OU=eng,O=odradek", "alice"),
    ("RULE:^CN=([a-z]+)$/$1 via rule/,DEFAULT", "CN=Bob,O=x", "CN=Bob,O=x"),  # no match: falls to DEFAULT
    ("RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, RULE:^CN=(.*)$/$1/", "OU=x,CN=host.example", "HOST.EXAMPLE"),
])
def test_principal_mapping_rules(rules: str, dn: str, expected: str) -> None:
    assert PrincipalMappingRules.parse(rules).apply(dn) == expected


def test_principal_mapping_rules_errors() -> None:
    with pytest.raises(TlsConfigError, match=r"ssl\.principal\.mapping\.rules"):
        PrincipalMappingRules.parse("RULE:broken")
    with pytest.raises(ValueError, match="No rules apply"):
        PrincipalMappingRules.parse("RULE:^CN=x$/y/").apply("CN=z")
