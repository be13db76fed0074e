"""TLS contexts from Kafka's ``ssl.*`` keys, and the principal of a TLS peer.

Keystores and truststores are PEM (KIP-651: a file with ``ssl.keystore.type=PEM``, or inline
``ssl.keystore.certificate.chain`` / ``ssl.keystore.key`` / ``ssl.truststore.certificates``) or
PKCS12.  Java KeyStores (JKS, Kafka's default type) cannot be read outside the JVM: they are
refused with a message that says how to convert them.

The mutual-TLS principal is the client certificate's subject in RFC 2253 form
(``CN=alice,OU=eng,O=odradek``, as Java's ``X500Principal.getName()``), mapped by
``ssl.principal.mapping.rules`` (KIP-371).
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from odradek.security.acls import ANONYMOUS, KafkaPrincipal

__all__ = ["PrincipalMappingRules", "TlsConfigError", "client_context", "peer_principal", "server_context"]

_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


class TlsConfigError(ValueError):
    """The ``ssl.*`` settings cannot make a TLS context (the message names the key)."""


def _get(props: Mapping[str, str], key: str, default: str | None = None) -> str | None:
    value = props.get(key)
    if value is None or not str(value).strip():
        return default
    return str(value).strip()


def _read(key: str, location: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as e:
        raise TlsConfigError(f"cannot read {key} {location}: {e.strerror}") from None


@contextlib.contextmanager
def _temp_pem(data: bytes) -> Iterator[str]:
    """``ssl`` loads keys only from files: a private temporary file for inline PEM."""
    fd, path = tempfile.mkstemp(prefix="odradek-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        yield path
    finally:
        os.unlink(path)


def _store_type(props: Mapping[str, str], key: str) -> str:
    kind = (_get(props, key, "JKS") or "JKS").upper()
    if kind == "JKS":
        raise TlsConfigError(
            f"{key}=JKS is not supported: Java KeyStores cannot be read outside the JVM; convert the store "
            f"(keytool -importkeystore -deststoretype PKCS12) and set {key}=PKCS12, or use PEM files and {key}=PEM")
    return kind


def _pkcs12(key: str, location: str, password: str | None) -> pkcs12.PKCS12KeyAndCertificates:
    try:
        return pkcs12.load_pkcs12(_read(key, location), password.encode() if password else None)
    except ValueError as e:
        raise TlsConfigError(f"cannot load {key} {location} as PKCS12 (wrong password?): {e}") from None


def _load_keystore(ctx: ssl.SSLContext, props: Mapping[str, str], *, required: bool) -> bool:
    """Load the key and certificate chain named by the ``ssl.keystore.*`` keys; False when
    there is none (and none is required)."""
    location = _get(props, "ssl.keystore.location")
    inline_chain = _get(props, "ssl.keystore.certificate.chain")
    inline_key = _get(props, "ssl.keystore.key")
    # librdkafka's names, which clients (and cluster.json) use.
    cert_location = _get(props, "ssl.certificate.location")
    key_location = _get(props, "ssl.key.location")
    key_password = _get(props, "ssl.key.password")
    if location is None and inline_chain is None and inline_key is None and cert_location is None:
        if required:
            raise TlsConfigError("an SSL listener needs a key and certificate: set ssl.keystore.location "
                                 "(ssl.keystore.type=PEM or PKCS12), or ssl.keystore.certificate.chain and "
                                 "ssl.keystore.key (ssl.keystore.type=PEM)")
        return False
    try:
        if cert_location is not None:
            ctx.load_cert_chain(cert_location, key_location, key_password)
            return True
        kind = _store_type(props, "ssl.keystore.type")
        if inline_chain is not None or inline_key is not None:
            if location is not None:
                raise TlsConfigError("set either ssl.keystore.location or ssl.keystore.certificate.chain/"
                                     "ssl.keystore.key, not both")
            if inline_chain is None or inline_key is None:
                raise TlsConfigError("ssl.keystore.certificate.chain and ssl.keystore.key must be set together")
            if kind != "PEM":
                raise TlsConfigError("ssl.keystore.certificate.chain and ssl.keystore.key need ssl.keystore.type=PEM")
            with _temp_pem((inline_key + "\n" + inline_chain + "\n").encode()) as path:
                ctx.load_cert_chain(path, path, key_password)
            return True
        assert location is not None
        if kind == "PEM":
            _read("ssl.keystore.location", location)  # a clear message for a missing file
            ctx.load_cert_chain(location, location, key_password)
            return True
        bundle = _pkcs12("ssl.keystore.location", location, _get(props, "ssl.keystore.password"))
        if bundle.key is None or bundle.cert is None:
            raise TlsConfigError(f"ssl.keystore.location {location} holds no private key and certificate")
        pem = bundle.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption())
        pem += bundle.cert.certificate.public_bytes(serialization.Encoding.PEM)
        for extra in bundle.additional_certs:
            pem += extra.certificate.public_bytes(serialization.Encoding.PEM)
        with _temp_pem(pem) as path:
            ctx.load_cert_chain(path, path)
        return True
    except ssl.SSLError as e:
        raise TlsConfigError(f"cannot load the keystore (ssl.keystore.*): {e.reason or e}") from None
    except OSError as e:
        raise TlsConfigError(f"cannot load the keystore (ssl.keystore.*): {e.strerror or e}") from None


def _load_truststore(ctx: ssl.SSLContext, props: Mapping[str, str]) -> bool:
    """Load the CA certificates named by ``ssl.truststore.*`` (or librdkafka's ``ssl.ca.location``);
    False when none is configured."""
    location = _get(props, "ssl.truststore.location")
    inline = _get(props, "ssl.truststore.certificates")
    ca_location = _get(props, "ssl.ca.location")
    try:
        if ca_location is not None:
            _read("ssl.ca.location", ca_location)
            ctx.load_verify_locations(cafile=ca_location)
            return True
        if location is None and inline is None:
            return False
        kind = _store_type(props, "ssl.truststore.type")
        if inline is not None:
            if kind != "PEM":
                raise TlsConfigError("ssl.truststore.certificates needs ssl.truststore.type=PEM")
            ctx.load_verify_locations(cadata=inline)
            return True
        assert location is not None
        if kind == "PEM":
            ctx.load_verify_locations(cadata=_read("ssl.truststore.location", location).decode("ascii", "replace"))
            return True
        bundle = _pkcs12("ssl.truststore.location", location, _get(props, "ssl.truststore.password"))
        certs = ([bundle.cert] if bundle.cert is not None else []) + list(bundle.additional_certs)
        if not certs:
            raise TlsConfigError(f"ssl.truststore.location {location} holds no certificates")
        ctx.load_verify_locations(cadata="".join(
            c.certificate.public_bytes(serialization.Encoding.PEM).decode() for c in certs))
        return True
    except ssl.SSLError as e:
        raise TlsConfigError(f"cannot load the truststore (ssl.truststore.*): {e.reason or e}") from None


def _set_protocols(ctx: ssl.SSLContext, props: Mapping[str, str]) -> None:
    names = [p.strip() for p in (_get(props, "ssl.enabled.protocols", "TLSv1.2,TLSv1.3") or "").split(",")
             if p.strip()]
    unknown = [n for n in names if n not in _PROTOCOLS]
    if not names or unknown:
        raise TlsConfigError(f"Invalid value {','.join(names)} for configuration ssl.enabled.protocols: "
                             f"expected some of {', '.join(_PROTOCOLS)}")
    versions = sorted(_PROTOCOLS[n] for n in names)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    ciphers = _get(props, "ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(c.strip() for c in ciphers.split(",") if c.strip()))
        except ssl.SSLError:
            raise TlsConfigError(f"Invalid value {ciphers} for configuration ssl.cipher.suites: no cipher "
                                 "suite of that list is available (OpenSSL names)") from None


def server_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL listener (``KafkaConfig.listener_props``)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(ctx, props)
    _load_keystore(ctx, props, required=True)
    client_auth = (_get(props, "ssl.client.auth", "none") or "none").lower()
    if client_auth not in _CLIENT_AUTH:
        raise TlsConfigError(f"Invalid value {client_auth} for configuration ssl.client.auth: "
                             "expected required, requested or none")
    if client_auth != "none" and not _load_truststore(ctx, props):
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    rules = _get(props, "ssl.principal.mapping.rules", "DEFAULT") or "DEFAULT"
    PrincipalMappingRules.parse(rules)  # bad rules fail at start-up, not at the first client
    return ctx


def client_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS context of a client (Kafka client ``ssl.*`` keys, or librdkafka's ``ssl.ca.location``,
    ``ssl.certificate.location``, ``ssl.key.location``): the server's chain is always verified;
    its host name too unless ``ssl.endpoint.identification.algorithm`` is empty."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols(ctx, props)
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https")
    algorithm = (algorithm or "").strip().lower()
    if algorithm not in ("", "https", "none"):
        raise TlsConfigError(f"Invalid value {algorithm} for configuration ssl.endpoint.identification.algorithm: "
                             "expected https or an empty value")
    ctx.check_hostname = algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    if not _load_truststore(ctx, props):
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    _load_keystore(ctx, props, required=False)
    return ctx


# ------------------------------------------------------------------------------ principals

_RULE = re.compile(r"\s*(?:(?P<default>DEFAULT)|RULE:(?P<pattern>(?:\\.|[^\\/])*)/(?P<replacement>(?:\\.|[^\\/])*)/"
                   r"(?P<case>[LU])?)\s*(?:,|$)")


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str | None = None


class PrincipalMappingRules:
    """``ssl.principal.mapping.rules`` (KIP-371): ``RULE:pattern/replacement/[LU]`` entries and
    ``DEFAULT``, tried in order; the first whose pattern matches the whole DN gives the name."""

    def __init__(self, rules: list[_Rule]) -> None:
        self.rules = rules

    @classmethod
    def parse(cls, text: str) -> PrincipalMappingRules:
        text = text.strip()
        rules: list[_Rule] = []
        pos = 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise TlsConfigError(f"Invalid value {text} for configuration ssl.principal.mapping.rules: "
                                     f"cannot parse the rule at {text[pos:pos + 30]!r}")
            pos = m.end()
            if m["default"]:
                rules.append(_Rule(None))
                continue
            # Java's replacement syntax ($1) and escapes (\/) in Python's terms.
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m["replacement"].replace("\\/", "/"))
            try:
                pattern = re.compile(m["pattern"].replace("\\/", "/"))
            except re.error as e:
                raise TlsConfigError(f"Invalid value {text} for configuration ssl.principal.mapping.rules: "
                                     f"bad pattern {m['pattern']!r}: {e}") from None
            rules.append(_Rule(pattern, replacement, m["case"]))
        return cls(rules or [_Rule(None)])

    def apply(self, dn: str) -> str:
        for rule in self.rules:
            if rule.pattern is None:
                return dn
            if rule.pattern.fullmatch(dn):
                name = rule.pattern.sub(rule.replacement, dn)
                if rule.case == "L":
                    name = name.lower()
                elif rule.case == "U":
                    name = name.upper()
                return name
        raise ValueError(f"No rules apply to {dn}, rules {[r.pattern.pattern if r.pattern else 'DEFAULT' for r in self.rules]}")


def distinguished_name(der: bytes) -> str:
    """The subject of a DER certificate in RFC 2253 form, as Java's X500Principal.getName()."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def peer_principal(ssl_object: ssl.SSLObject | ssl.SSLSocket | None, rules: str | PrincipalMappingRules = "DEFAULT"
                   ) -> KafkaPrincipal:
    """The principal of a TLS peer: ANONYMOUS without a (verified) certificate, else
    ``User:<mapped DN>``.  Raises ValueError when no mapping rule applies."""
    if ssl_object is None:
        return ANONYMOUS
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    mapping = rules if isinstance(rules, PrincipalMappingRules) else PrincipalMappingRules.parse(rules)
    return KafkaPrincipal("User", mapping.apply(distinguished_name(der)))
