"""TLS material for tests: a CA, a broker certificate, a client certificate, and an
untrusted CA with a certificate of its own (for refusals)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from odradek.security.certs import CertificateAuthority

__all__ = ["TlsMaterial", "tls_material"]


@dataclass(frozen=True)
class TlsMaterial:
    ca_file: Path  # PEM truststore: ssl.truststore.location (type PEM), librdkafka's ssl.ca.location
    broker_keystore: Path  # key + chain, CN=localhost, SANs localhost and 127.0.0.1
    client_keystore: Path  # key + chain, CN=client,O=odradek
    client_cert: Path
    client_key: Path
    untrusted_ca_file: Path
    untrusted_keystore: Path  # CN=localhost, signed by the untrusted CA
    untrusted_client_cert: Path
    untrusted_client_key: Path

    def broker_ssl_props(self, client_auth: str = "none") -> dict[str, str]:
        """A broker's ssl.* keys for these files (PEM stores)."""
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.broker_keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file),
            "ssl.client.auth": client_auth,
        }


def tls_material(directory: Path) -> TlsMaterial:
    directory.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority.create("odradek-test-ca")
    broker = ca.issue("localhost")
    client = ca.issue("client")
    other = CertificateAuthority.create("untrusted-ca")
    stranger = other.issue("localhost")
    return TlsMaterial(
        ca_file=ca.write_truststore_pem(directory / "ca.pem"),
        broker_keystore=broker.write_keystore_pem(directory / "broker.pem"),
        client_keystore=client.write_keystore_pem(directory / "client-keystore.pem"),
        client_cert=client.write_cert_pem(directory / "client.crt"),
        client_key=client.write_key_pem(directory / "client.key"),
        untrusted_ca_file=other.write_truststore_pem(directory / "untrusted-ca.pem"),
        untrusted_keystore=stranger.write_keystore_pem(directory / "untrusted.pem"),
        untrusted_client_cert=stranger.write_cert_pem(directory / "untrusted-client.crt"),
        untrusted_client_key=stranger.write_key_pem(directory / "untrusted-client.key"),
    )
