"""Each listener's security from the broker config, and Kafka's start-up refusals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from odradek.broker.listener_security import ListenerSecurityError, listener_security
from odradek.config import KafkaConfig
from support.tls import tls_material

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="b" user_eve="e";'


def config(props: dict[str, str]) -> KafkaConfig:
    base = {"broker.id": "0", "zookeeper.connect": "unused:2181",
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL",
            "inter.broker.listener.name": "PLAINTEXT"}
    return KafkaConfig.from_props({**base, **props})


def build(cfg: KafkaConfig) -> dict:
    return listener_security(cfg, lambda _m, _u: None)


def test_sasl_listener_settings_with_listener_overrides() -> None:
    result = build(KafkaConfig.from_props({
        "broker.id": "0", "zookeeper.connect": "unused:2181",
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.connections.max.reauth.ms": "60000",
        "sasl.server.max.receive.size": "4096"}))
    assert result["PLAINTEXT"].sasl is None and result["PLAINTEXT"].ssl_context is None
    sasl = result["SASL_PLAINTEXT"].sasl
    assert sasl.enabled_mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert dict(sasl.plain_users) == {"bob": "b", "eve": "e"}
    assert (sasl.connections_max_reauth_ms, sasl.max_receive_size) == (60000, 4096)


@pytest.mark.parametrize("props, message", [
    ({}, "GSSAPI of listener SASL_PLAINTEXT (sasl.enabled.mechanisms) is not supported"),
    ({"sasl.enabled.mechanisms": "PLAIN"}, "no JAAS config gives its users"),
    ({"sasl.enabled.mechanisms": "PLAIN",
      "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";'},
     "SASL mechanism PLAIN needs org.apache.kafka.common.security.plain.PlainLoginModule"),
    ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": "not jaas"}, "Invalid sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-256", "inter.broker.listener.name": "SASL_PLAINTEXT",
      "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512", "advertised.listeners": "PLAINTEXT://h:1,SASL_PLAINTEXT://h:2"},
     "sasl.mechanism.inter.broker.protocol (SCRAM-SHA-512) must be included in sasl.enabled.mechanisms"),
])
def test_start_up_refusals(props: dict[str, str], message: str) -> None:
    with pytest.raises(ListenerSecurityError, match=re.escape(message)):
        build(config(props))


def test_ssl_listener_gets_a_server_context_or_a_clear_error(tmp_path: Path) -> None:
    tls = tls_material(tmp_path)
    base = {"broker.id": "0", "zookeeper.connect": "unused:2181", "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "inter.broker.listener.name": "PLAINTEXT", "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/,DEFAULT"}
    result = build(KafkaConfig.from_props({**base, **tls.broker_ssl_props("required")}))
    assert result["SSL"].ssl_context is not None and result["SSL"].sasl is None
    assert result["SSL"].principal_mapping_rules == "RULE:^CN=(.*?),.*$/$1/,DEFAULT"
    with pytest.raises(ListenerSecurityError, match=r"listener SSL: .*ssl\.keystore"):
        build(KafkaConfig.from_props(base))
