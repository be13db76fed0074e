"""What each of Kafka's security protocols implies, asked through the functions and the
settings base class alike."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from odradek.security.protocols import (
    SECURITY_PROTOCOL_IDS,
    SECURITY_PROTOCOLS,
    SecurityProtocolSettings,
    uses_sasl,
    uses_tls,
)


@dataclass(frozen=True)
class Settings(SecurityProtocolSettings):
    protocol: str


@pytest.mark.parametrize(("protocol", "tls", "sasl"), [
    ("PLAINTEXT", False, False), ("SSL", True, False), ("SASL_PLAINTEXT", False, True), ("SASL_SSL", True, True)])
def test_each_protocol_says_whether_it_uses_tls_and_sasl(protocol: str, tls: bool, sasl: bool) -> None:
    assert protocol in SECURITY_PROTOCOLS
    assert (uses_tls(protocol), uses_sasl(protocol)) == (tls, sasl)
    assert (Settings(protocol).uses_tls, Settings(protocol).uses_sasl) == (tls, sasl)


def test_wire_ids_are_kafkas() -> None:
    # org.apache.kafka.common.security.auth.SecurityProtocol's ids, as UpdateMetadata carries them.
    assert SECURITY_PROTOCOL_IDS == {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
