"""A secure local cluster's settings, checked without brokers: the broker properties are a
valid KafkaConfig whose inter-broker login is the admin's, and the client settings (Java
names and librdkafka names) describe the same login."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.cli.common import read_properties
from odradek.config import KafkaConfig
from odradek.local.cluster import LocalCluster
from odradek.local.security import ADMIN, CLIENT_USER, LocalSecurity, properties_text
from odradek.security.client import ClientSecurity, sasl_client
from odradek.security.client_properties import librdkafka_properties
from odradek.security.scram import ScramCredential, ScramServer
from odradek.security.tls import PrincipalMappingRules


def _config(security: LocalSecurity, broker_id: int = 0) -> KafkaConfig:
    return KafkaConfig.from_props({"zookeeper.connect": "127.0.0.1:1", "broker.id": str(broker_id),
                                   "log.dirs": "/tmp/unused",
                                   **security.broker_properties(broker_id, 9092, 9093)})


@pytest.mark.parametrize("protocol", ["sasl_plaintext", "sasl_ssl"])
def test_sasl_brokers_log_in_as_admin_with_scram(tmp_path: Path, protocol: str) -> None:
    security = LocalSecurity.create(protocol, tmp_path, [0, 1])
    config = _config(security)
    assert config.security_protocol == {"CLIENT": protocol.upper(), "BROKER": protocol.upper()}
    assert config.inter_broker_listener_name == "BROKER"
    inter = ClientSecurity.from_properties(config.inter_broker_client_properties())
    admin = security.users[ADMIN]
    assert (inter.protocol, inter.sasl_mechanism, inter.username, inter.password) == (
        protocol.upper(), "SCRAM-SHA-512", ADMIN, admin.password)
    assert (inter.ssl_context is not None) == (protocol == "sasl_ssl")
    assert config["super.users"] == f"User:{ADMIN}"
    # The credentials written to ZooKeeper accept the passwords the clients are given.
    scram = security.scram_configs()
    assert set(scram) == {ADMIN, CLIENT_USER}
    stored = ScramCredential.from_string(scram[CLIENT_USER]["SCRAM-SHA-512"])
    server = ScramServer("SCRAM-SHA-512", lambda user: stored if user == CLIENT_USER else None)
    client = ClientSecurity.from_properties(security.java_properties(CLIENT_USER))
    mechanism = sasl_client(client)
    final = mechanism.evaluate(server.evaluate(mechanism.first_message()))
    assert final is not None and mechanism.evaluate(server.evaluate(final)) is None


def test_java_and_librdkafka_settings_agree(tmp_path: Path) -> None:
    security = LocalSecurity.create("SASL_SSL", tmp_path, [0])
    for user in (ADMIN, CLIENT_USER):
        assert librdkafka_properties(security.java_properties(user)) == security.librdkafka_properties(user)


def test_ssl_clients_present_certificates_mapped_to_their_cn(tmp_path: Path) -> None:
    security = LocalSecurity.create("ssl", tmp_path, [0, 1])
    config = _config(security, 1)
    props = config.listener_props("CLIENT")
    assert props["ssl.client.auth"] == "required"
    assert props["ssl.keystore.location"] == str(tmp_path / "broker-1.pem")
    assert config["super.users"] == "User:admin;User:broker-0;User:broker-1"
    client = ClientSecurity.from_properties(security.java_properties(ADMIN))
    assert client.protocol == "SSL" and client.ssl_context is not None
    rd = security.librdkafka_properties(ADMIN)
    assert Path(rd["ssl.certificate.location"]).read_bytes().startswith(b"-----BEGIN CERTIFICATE")
    assert "PRIVATE KEY" in Path(rd["ssl.key.location"]).read_text()


def test_unknown_protocol_is_refused() -> None:
    with pytest.raises(ValueError, match="sasl_ssl"):
        LocalCluster("/tmp/unused-odradek", 1, security="kerberos")


def test_properties_file_round_trips(tmp_path: Path) -> None:
    security = LocalSecurity.create("sasl_ssl", tmp_path, [0])
    path = tmp_path / "client.properties"
    path.write_text(properties_text(security.java_properties(ADMIN), "test"))
    assert read_properties(str(path)) == security.java_properties(ADMIN)


def test_certificate_principals_are_their_cn(tmp_path: Path) -> None:
    security = LocalSecurity.create("ssl", tmp_path, [0])
    rules = PrincipalMappingRules.parse(_config(security).listener_props("BROKER")["ssl.principal.mapping.rules"])
    assert rules.apply("CN=broker-0,O=odradek") == "broker-0"
    assert rules.apply("CN=admin,O=odradek") == "admin"
