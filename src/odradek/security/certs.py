"""A small certificate authority for local clusters and tests: a self-signed CA that issues
server and client certificates (EC P-256, SHA-256), written as PEM files that
``ssl.keystore.type=PEM`` / ``ssl.truststore.type=PEM`` (KIP-651) and librdkafka read.

This is for ``odradek up --security`` and for tests; production clusters bring their own PKI.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "IssuedCertificate"]

_VALIDITY = datetime.timedelta(days=3650)


def _name(cn: str, organization: str | None) -> x509.Name:
    # Most general first, as certificates conventionally are: the RFC 2253 form (Kafka's
    # principal) reads it backwards, CN=<cn>,O=<organization>.
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)] if organization else []
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attributes)


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _write(path: str | Path, data: bytes, private: bool = False) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if private:
        path.chmod(0o600)
    return path


@dataclass(frozen=True)
class IssuedCertificate:
    """A certificate with its private key, and the CA certificate that signed it."""

    cert_pem: bytes
    key: ec.EllipticCurvePrivateKey
    ca_pem: bytes

    def key_pem(self, password: str | None = None) -> bytes:
        """The private key as PKCS#8 PEM, encrypted when ``password`` is given (ssl.key.password)."""
        return _key_pem(self.key, password)

    def write_keystore_pem(self, path: str | Path, password: str | None = None) -> Path:
        """Key and certificate chain in one PEM file: ``ssl.keystore.type=PEM`` with
        ``ssl.keystore.location`` (and ``ssl.key.password`` when ``password`` is given)."""
        return _write(path, self.key_pem(password) + self.cert_pem + self.ca_pem, private=True)

    def write_cert_pem(self, path: str | Path) -> Path:
        return _write(path, self.cert_pem)

    def write_key_pem(self, path: str | Path, password: str | None = None) -> Path:
        return _write(path, self.key_pem(password), private=True)


class CertificateAuthority:
    """A self-signed CA.  ``issue`` signs certificates for brokers (server and client
    authentication: brokers are clients of each other) and for clients."""

    def __init__(self, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
        self.cert = cert
        self.key = key

    @classmethod
    def create(cls, cn: str = "odradek-local-ca", organization: str | None = "odradek") -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        name = _name(cn, organization)
        now = datetime.datetime.now(datetime.UTC)
        cert = (x509.CertificateBuilder()
                .subject_name(name).issuer_name(name)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + _VALIDITY)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False,
                                             encipher_only=False, decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256()))
        return cls(cert, key)

    @property
    def cert_pem(self) -> bytes:
        return _cert_pem(self.cert)

    def write_truststore_pem(self, path: str | Path) -> Path:
        """The CA certificate as a PEM truststore (``ssl.truststore.type=PEM``, librdkafka's
        ``ssl.ca.location``)."""
        return _write(path, self.cert_pem)

    def issue(self, cn: str, hosts: Sequence[str] = ("localhost", "127.0.0.1"), *,
              organization: str | None = "odradek") -> IssuedCertificate:
        """A certificate for ``cn`` with ``hosts`` (DNS names and IP addresses) as subject
        alternative names, good for TLS servers and clients."""
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        now = datetime.datetime.now(datetime.UTC)
        builder = (x509.CertificateBuilder()
                   .subject_name(_name(cn, organization)).issuer_name(self.cert.subject)
                   .public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + _VALIDITY)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                         ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                                  critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return IssuedCertificate(_cert_pem(cert), key, self.cert_pem)
