"""Kafka's security protocols (``org.apache.kafka.common.security.auth.SecurityProtocol``) and
what each one implies: TLS on the socket, a SASL login, both, or neither.  The one place that
says which protocols use TLS or SASL; listeners, client connections and local clusters ask here."""

from __future__ import annotations

from typing import Final

__all__ = ["SASL_PROTOCOLS", "SECURITY_PROTOCOLS", "SECURITY_PROTOCOL_IDS", "TLS_PROTOCOLS", "SecurityProtocolSettings", "uses_sasl", "uses_tls"]

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Each protocol's id on the wire (UpdateMetadata's endpoints): its place in Kafka's enum.
SECURITY_PROTOCOL_IDS: Final = {name: i for i, name in enumerate(SECURITY_PROTOCOLS)}
TLS_PROTOCOLS: Final = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS: Final = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


def uses_tls(protocol: str) -> bool:
    """Whether connections of ``protocol`` speak TLS."""
    return protocol in TLS_PROTOCOLS


def uses_sasl(protocol: str) -> bool:
    """Whether connections of ``protocol`` log in with SASL before any other request."""
    return protocol in SASL_PROTOCOLS


class SecurityProtocolSettings:
    """Base of settings that name a security protocol (a client's, a local cluster's): what it implies."""

    protocol: str

    @property
    def uses_tls(self) -> bool:
        return uses_tls(self.protocol)

    @property
    def uses_sasl(self) -> bool:
        return uses_sasl(self.protocol)
