"""The client side of security: how odradek's own connections (inter-broker, admin, the
local cluster's probes) authenticate, without I/O.

* :class:`ClientSecurity` is what a connection needs (security protocol, TLS context, SASL
  mechanism and login), built from Kafka client properties as ``--command-config`` files and
  ``KafkaConfig.inter_broker_client_properties()`` spell them.
* :func:`sasl_client` gives the client half of a SASL mechanism: PLAIN (RFC 4616, Kafka's
  ``PlainSaslClient``) or SCRAM-SHA-256/512 (over :class:`odradek.security.scram.ScramClient`).
  ``net/client.py`` carries its tokens in SaslAuthenticate requests.

Java-style client properties in librdkafka's names: security/client_properties.py.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from odradek.security import tls
from odradek.security.jaas import parse_jaas_config
from odradek.security.protocols import (
    SECURITY_PROTOCOLS,
    SecurityProtocolSettings,
    uses_sasl,
    uses_tls,
)
from odradek.security.scram import MECHANISMS as SCRAM_MECHANISMS
from odradek.security.scram import ScramAuthenticationError, ScramClient

__all__ = [
    "ClientSecurity",
    "PlainClient",
    "SaslClient",
    "ScramSaslClient",
    "sasl_client",
]

MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
# The login modules whose JAAS options carry a username and password (Kafka's).
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclass(frozen=True)
class ClientSecurity(SecurityProtocolSettings):
    """How a client connection secures itself; the default is plain TCP."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        """From Kafka client properties: ``security.protocol``, ``sasl.mechanism`` (default
        GSSAPI in Kafka, which odradek lacks, so it must be given), ``sasl.jaas.config``
        (PlainLoginModule/ScramLoginModule ``username``/``password``) or librdkafka's
        ``sasl.username``/``sasl.password``, and ``ssl.*`` as ``tls.client_context`` reads
        them.  Raises ValueError with one line."""
        protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"Invalid value {protocol} for configuration security.protocol: "
                             f"expected one of {', '.join(SECURITY_PROTOCOLS)}")
        context = None
        if uses_tls(protocol):
            context = tls.client_context(props)
        if not uses_sasl(protocol):
            return cls(protocol, context)
        mechanism = props.get("sasl.mechanism", "GSSAPI").strip().upper()
        if mechanism not in MECHANISMS:
            raise ValueError(f"Unsupported value {mechanism} for configuration sasl.mechanism: "
                             f"odradek clients support {', '.join(MECHANISMS)}")
        username, password = _login(props, mechanism)
        return cls(protocol, context, mechanism, username, password)


def _login(props: Mapping[str, str], mechanism: str) -> tuple[str, str]:
    jaas_text = props.get("sasl.jaas.config")
    if jaas_text:
        jaas = parse_jaas_config(jaas_text)  # JaasConfigError is a ValueError
        expected = _LOGIN_MODULES[mechanism]
        if jaas.login_module != expected:
            raise ValueError(f"Invalid sasl.jaas.config: sasl.mechanism {mechanism} needs login module "
                             f"{expected}, got {jaas.login_module}")
        username, password = jaas.options.get("username"), jaas.options.get("password")
    else:
        username, password = props.get("sasl.username"), props.get("sasl.password")
    if not username or password is None:
        raise ValueError(f"sasl.mechanism {mechanism} needs a username and password: set sasl.jaas.config "
                         f"({_LOGIN_MODULES[mechanism]} required username=... password=...;) "
                         "or sasl.username and sasl.password")
    return username, password


# ------------------------------------------------------------------------------ SASL clients


class SaslClient(Protocol):
    """The client half of a SASL mechanism: tokens in, tokens out, no I/O."""

    mechanism: str

    def first_message(self) -> bytes:
        """The client's initial response."""

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The answer to a server token, or None when the exchange is complete (the token
        was the server's last and it checked out).  Raises ValueError on a bad token."""

    @property
    def complete(self) -> bool: ...


class PlainClient:
    """PLAIN (RFC 4616): one message ``authzid NUL authcid NUL passwd``; Kafka sends an
    empty authorization id and the server answers with an empty token."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\0" + username.encode() + b"\0" + password.encode()
        self._complete = False

    def first_message(self) -> bytes:
        return self._message

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self._complete:
            raise ValueError("PLAIN: unexpected server token after completion")
        self._complete = True
        return None

    @property
    def complete(self) -> bool:
        return self._complete


class ScramSaslClient:
    """SCRAM-SHA-256/512 as Kafka's ``ScramSaslClient``: client-first, then the proof for the
    server-first-message, then the server signature is verified."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._scram = ScramClient(mechanism, username, password)
        self._step = 0

    def first_message(self) -> bytes:
        return self._scram.first_message()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self._step >= 2:
            raise ValueError(f"{self.mechanism}: unexpected server token after completion")
        try:
            if self._step == 0:
                answer: bytes | None = self._scram.final_message(challenge)
            else:
                self._scram.verify_server_final(challenge)
                answer = None
        except (ScramAuthenticationError, UnicodeDecodeError) as e:
            raise ValueError(f"{self.mechanism}: {e}") from None
        self._step += 1
        return answer

    @property
    def complete(self) -> bool:
        return self._step == 2


def sasl_client(security: ClientSecurity) -> SaslClient:
    """A fresh client exchange for ``security``'s mechanism and login."""
    if security.sasl_mechanism is None or security.username is None or security.password is None:
        raise ValueError(f"{security.protocol} needs a SASL mechanism, username and password")
    if security.sasl_mechanism == "PLAIN":
        return PlainClient(security.username, security.password)
    return ScramSaslClient(security.sasl_mechanism, security.username, security.password)

