"""Each listener's security, from the broker config (Kafka's ChannelBuilders for the server side).

SSL and SASL_SSL listeners get an ``ssl.SSLContext`` from their ``ssl.*`` keys
(:func:`odradek.security.tls.server_context`); SASL_PLAINTEXT and SASL_SSL listeners get their
SASL settings: ``sasl.enabled.mechanisms``, PLAIN users from ``plain.sasl.jaas.config`` (or
``sasl.jaas.config``), ``connections.max.reauth.ms`` and ``sasl.server.max.receive.size``,
each as the listener sees it (``listener.name.<listener>.`` overrides).  What Kafka refuses
at start-up is refused here with one line.
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.config import KafkaConfig
from odradek.net.server import ListenerSecurity
from odradek.security.jaas import PLAIN_LOGIN_MODULE, JaasConfigError, parse_jaas_config
from odradek.security.protocols import uses_sasl, uses_tls
from odradek.security.sasl import SERVER_MECHANISMS, SaslServerConfig
from odradek.security.scram import ScramCredential
from odradek.security.tls import TlsConfigError, server_context

__all__ = ["ListenerSecurityError", "listener_security"]


class ListenerSecurityError(ValueError):
    """A listener's security settings Kafka would not start with (one line)."""


def _int(props: dict[str, str], key: str, default: int, listener: str) -> int:
    raw = props.get(key)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ListenerSecurityError(f"Invalid value {raw} for configuration {key} of listener {listener}: "
                                    "not a number") from None
    if value < 0:
        raise ListenerSecurityError(f"Invalid value {raw} for configuration {key} of listener {listener}")
    return value


def _plain_users(props: dict[str, str], listener: str) -> dict[str, str]:
    key = "plain.sasl.jaas.config" if "plain.sasl.jaas.config" in props else "sasl.jaas.config"
    text = props.get(key)
    if text is None:
        raise ListenerSecurityError(
            f"SASL mechanism PLAIN is enabled on listener {listener} but no JAAS config gives its users: set "
            f"listener.name.{listener.lower()}.plain.sasl.jaas.config (PlainLoginModule with user_<name> options)")
    try:
        jaas = parse_jaas_config(text)
    except JaasConfigError as e:
        raise ListenerSecurityError(f"Invalid {key} for listener {listener}: {e}") from None
    if jaas.login_module != PLAIN_LOGIN_MODULE:
        raise ListenerSecurityError(f"Invalid {key} for listener {listener}: SASL mechanism PLAIN needs "
                                    f"{PLAIN_LOGIN_MODULE}, not {jaas.login_module}")
    return jaas.plain_users()


def _sasl(config: KafkaConfig, props: dict[str, str], listener: str,
          credentials: Callable[[str, str], ScramCredential | None]) -> SaslServerConfig:
    raw = props.get("sasl.enabled.mechanisms")
    enabled = tuple(m.strip().upper() for m in raw.split(",") if m.strip()) if raw is not None \
        else tuple(config["sasl.enabled.mechanisms"])
    if not enabled:
        raise ListenerSecurityError(f"sasl.enabled.mechanisms must not be empty for SASL listener {listener}")
    unsupported = [m for m in enabled if m not in SERVER_MECHANISMS]
    if unsupported:
        raise ListenerSecurityError(
            f"SASL mechanism {', '.join(unsupported)} of listener {listener} (sasl.enabled.mechanisms) is not "
            f"supported; odradek supports {', '.join(SERVER_MECHANISMS)}")
    if listener == config.inter_broker_listener_name:
        inter = config["sasl.mechanism.inter.broker.protocol"]
        if inter not in enabled:
            raise ListenerSecurityError(
                f"sasl.mechanism.inter.broker.protocol ({inter}) must be included in sasl.enabled.mechanisms "
                f"({','.join(enabled)}) when SASL is used for inter-broker communication (listener {listener})")
    return SaslServerConfig(
        enabled_mechanisms=enabled,
        plain_users=_plain_users(props, listener) if "PLAIN" in enabled else {},
        scram_credentials=credentials,
        connections_max_reauth_ms=_int(props, "connections.max.reauth.ms", config["connections.max.reauth.ms"],
                                       listener),
        max_receive_size=_int(props, "sasl.server.max.receive.size", config["sasl.server.max.receive.size"],
                              listener) or 1,
    )


def listener_security(config: KafkaConfig, credentials: Callable[[str, str], ScramCredential | None]
                      ) -> dict[str, ListenerSecurity]:
    """Listener name -> its security; raises :class:`ListenerSecurityError`."""
    result = {}
    for lst in config.listeners:
        protocol = config.security_protocol_map[lst.name]
        props = config.listener_props(lst.name)
        ssl_context = None
        sasl = None
        if uses_tls(protocol):
            try:
                ssl_context = server_context(props)
            except TlsConfigError as e:
                raise ListenerSecurityError(f"listener {lst.name}: {e}") from None
        if uses_sasl(protocol):
            sasl = _sasl(config, props, lst.name, credentials)
        result[lst.name] = ListenerSecurity(protocol, ssl_context, sasl,
                                            props.get("ssl.principal.mapping.rules",
                                                      config["ssl.principal.mapping.rules"]))
    return result
