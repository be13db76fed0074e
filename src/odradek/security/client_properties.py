"""Kafka (Java) client property names in librdkafka's spelling.

Kept apart from security/client.py (which builds TLS contexts) so that the Spark data source,
which only hands properties to confluent-kafka, imports nothing but the JAAS parser: Spark's
workers need no more packages than they did.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.security.jaas import parse_jaas_config

__all__ = ["librdkafka_properties"]


def librdkafka_properties(props: Mapping[str, str]) -> dict[str, str]:
    """Java-style Kafka client security properties in librdkafka's spelling (confluent-kafka,
    kcat); properties librdkafka spells the same way pass through.

    ``ssl.truststore.location`` (PEM) becomes ``ssl.ca.location``; a PEM keystore (key and
    chain in one file) becomes ``ssl.certificate.location`` + ``ssl.key.location`` (OpenSSL
    skips the blocks it does not want), ``ssl.key.password`` ``ssl.key.password``;
    ``sasl.jaas.config`` becomes ``sasl.username``/``sasl.password``; an empty
    ``ssl.endpoint.identification.algorithm`` becomes ``none``.  Keys librdkafka does not
    know (``ssl.truststore.type``, ``ssl.keystore.type``, ``ssl.enabled.protocols``) are dropped."""
    out: dict[str, str] = {}
    pem_keystore = props.get("ssl.keystore.type", "").upper() == "PEM"
    for key, value in props.items():
        if key == "ssl.truststore.location":
            if props.get("ssl.truststore.type", "PEM").upper() != "PEM":
                raise ValueError("librdkafka needs a PEM truststore (ssl.truststore.type=PEM) for "
                                 "ssl.truststore.location")
            out.setdefault("ssl.ca.location", value)
        elif key == "ssl.keystore.location" and pem_keystore:
            out.setdefault("ssl.certificate.location", value)
            out.setdefault("ssl.key.location", value)
        elif key == "sasl.jaas.config":
            options = parse_jaas_config(value).options
            for name in ("username", "password"):
                if name in options:
                    out.setdefault(f"sasl.{name}", options[name])
        elif key == "ssl.endpoint.identification.algorithm":
            out[key] = value or "none"
        elif key in ("ssl.truststore.type", "ssl.keystore.type", "ssl.enabled.protocols",
                     "ssl.truststore.password", "ssl.protocol"):
            continue
        else:
            out[key] = value
    return out
