"""KafkaConfig.inter_broker_client_properties: the client properties a broker's own
connections to the inter-broker listener use, and that they make a working ClientSecurity."""

from __future__ import annotations

from odradek.config import KafkaConfig
from odradek.security.client import ClientSecurity

ZK = {"zookeeper.connect": "localhost:2181", "broker.id": "0", "log.dirs": "/tmp/odradek-unused"}
ADMIN_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="pw";'


def test_plaintext_by_default() -> None:
    config = KafkaConfig.from_props(ZK)
    assert config.inter_broker_client_properties() == {"security.protocol": "PLAINTEXT"}
    assert ClientSecurity.from_properties(config.inter_broker_client_properties()) == ClientSecurity()


def test_sasl_ssl_listener_mechanism_jaas_and_ssl_keys() -> None:
    config = KafkaConfig.from_props({
        **ZK,
        "listeners": "CLIENT://127.0.0.1:9092,BROKER://127.0.0.1:9093",
        "listener.security.protocol.map": "CLIENT:SASL_SSL,BROKER:SASL_SSL",
        "inter.broker.listener.name": "BROKER",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem",
        "listener.name.broker.scram-sha-512.sasl.jaas.config": ADMIN_JAAS,
        "listener.name.client.scram-sha-512.sasl.jaas.config": ADMIN_JAAS.replace("admin", "other"),
    })
    props = config.inter_broker_client_properties()
    assert props == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.jaas.config": ADMIN_JAAS, "ssl.truststore.type": "PEM",
                     "ssl.truststore.location": "/ca.pem"}


def test_plain_falls_back_to_the_listeners_sasl_jaas_config() -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret";')
    config = KafkaConfig.from_props({
        **ZK, "listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.sasl.jaas.config": jaas})
    security = ClientSecurity.from_properties(config.inter_broker_client_properties())
    assert security == ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "admin", "admin-secret")
