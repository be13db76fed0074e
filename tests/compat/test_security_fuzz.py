"""Malformed SASL exchanges and TLS handshakes against a real broker: random bytes, truncated
exchanges, tokens over ``sasl.server.max.receive.size``, garbage and truncated ClientHellos.
Each bad connection is refused or closed, none of them ever gets a request served, and the
broker keeps serving a good client on every listener."""

from __future__ import annotations

import random
import ssl
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kio.schema.metadata.v9 import request as metadata_req
from kio.schema.sasl_authenticate.v2 import request as auth_req
from kio.schema.sasl_authenticate.v2 import response as auth_resp
from kio.schema.sasl_handshake.v0 import request as handshake0_req
from kio.schema.sasl_handshake.v1 import request as handshake_req
from kio.schema.sasl_handshake.v1 import response as handshake_resp

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper, free_port
from odradek.protocol.errors import ErrorCode
from odradek.protocol.framing import decode_response
from odradek.security.scram import ScramClient
from support import ClusterFactory
from support.tls import TlsMaterial, tls_material
from support.wire import RawConnection

TIMEOUT = 15
MAX_RECEIVE = 1024
PROTOCOLS = {"PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SSL": "SSL", "SASL_SSL": "SASL_SSL"}
METADATA = metadata_req.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                        include_cluster_authorized_operations=False,
                                        include_topic_authorized_operations=False)


@dataclass
class Broker:
    cluster: LocalCluster
    ports: dict[str, int]
    tls: TlsMaterial


@pytest.fixture(scope="module")
def broker(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("security-fuzz")
    tls = tls_material(base / "tls")
    ports = {name: free_port() for name in PROTOCOLS}
    listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
    factory = ClusterFactory(zookeeper, base)
    try:
        cluster = factory(1, ports=[ports["PLAINTEXT"]], overrides={
            "listeners": listeners, "advertised.listeners": listeners,
            "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in PROTOCOLS.items()),
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="b";',
            "sasl.server.max.receive.size": str(MAX_RECEIVE),
            **tls.broker_ssl_props(),
        })
        yield Broker(cluster, ports, tls)
    finally:
        factory.stop_all()


def never_served(raw: RawConnection) -> bool:
    """A Metadata request now is not answered: the connection is (or gets) closed, or
    answers only with a SASL error frame that is not a Metadata response."""
    try:
        raw.send(METADATA)
    except (OSError, ssl.SSLError):
        return True
    while (frame := raw.frame()) is not None:
        if struct.unpack_from(">i", frame)[0] == raw.correlation:
            return False
    return True


def healthy(b: Broker) -> bool:
    """Every listener still serves a good client."""
    def ok(config: dict[str, str]) -> bool:
        try:
            AdminClient(config).list_topics(timeout=10)
        except KafkaException:
            return False
        return True

    sasl = {"sasl.mechanism": "PLAIN", "sasl.username": "bob", "sasl.password": "b"}
    ca = {"ssl.ca.location": str(b.tls.ca_file)}
    return all(ok({"bootstrap.servers": f"127.0.0.1:{b.ports[name]}", "security.protocol": proto, **extra})
               for name, proto, extra in (("PLAINTEXT", "PLAINTEXT", {}), ("SASL_PLAINTEXT", "SASL_PLAINTEXT", sasl),
                                          ("SSL", "SSL", ca), ("SASL_SSL", "SASL_SSL", {**sasl, **ca})))


def test_random_frames_before_authentication(broker: Broker) -> None:
    rng = random.Random(1368)
    for _ in range(40):
        raw = RawConnection(broker.ports["SASL_PLAINTEXT"], timeout_s=TIMEOUT)
        try:
            body = rng.randbytes(rng.randrange(0, MAX_RECEIVE))
            raw.sock.sendall(struct.pack(">i", len(body)) + body)
            assert never_served(raw)
        finally:
            raw.close()
    assert healthy(broker)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_random_tokens_are_refused(broker: Broker, mechanism: str) -> None:
    rng = random.Random(mechanism)
    for _ in range(25):
        raw = RawConnection(broker.ports["SASL_PLAINTEXT"], timeout_s=TIMEOUT)
        try:
            raw.send(handshake_req.SaslHandshakeRequest(mechanism=mechanism))
            assert decode_response(raw.frame(), handshake_resp.SaslHandshakeResponse)[1].error_code == ErrorCode.none
            raw.send(auth_req.SaslAuthenticateRequest(auth_bytes=rng.randbytes(rng.randrange(0, 600))))
            frame = raw.frame()
            assert frame is not None
            response = decode_response(frame, auth_resp.SaslAuthenticateResponse)[1]
            assert response.error_code == ErrorCode.sasl_authentication_failed
            assert never_served(raw)
        finally:
            raw.close()


def test_random_raw_tokens_after_handshake_v0(broker: Broker) -> None:
    rng = random.Random(0)
    for _ in range(25):
        raw = RawConnection(broker.ports["SASL_PLAINTEXT"], timeout_s=TIMEOUT)
        try:
            raw.send(handshake0_req.SaslHandshakeRequest(mechanism=rng.choice(["PLAIN", "SCRAM-SHA-256"])))
            assert raw.frame() is not None
            token = rng.randbytes(rng.randrange(0, 600))
            raw.sock.sendall(struct.pack(">i", len(token)) + token)
            assert never_served(raw)
        finally:
            raw.close()


def test_truncated_exchanges_and_oversized_tokens(broker: Broker) -> None:
    # A SCRAM exchange abandoned after the first message (an unknown user: refused there).
    raw = RawConnection(broker.ports["SASL_PLAINTEXT"], timeout_s=TIMEOUT)
    try:
        raw.send(handshake_req.SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
        raw.frame()
        raw.send(auth_req.SaslAuthenticateRequest(auth_bytes=ScramClient("SCRAM-SHA-256", "bob", "b").first_message()))
        assert never_served(raw)
    finally:
        raw.close()
    # PLAIN tokens cut short.
    for token in (b"", b"\0", b"\0bob", b"\0bob\0"):
        raw = RawConnection(broker.ports["SASL_PLAINTEXT"], timeout_s=TIMEOUT)
        try:
            raw.send(handshake_req.SaslHandshakeRequest(mechanism="PLAIN"))
            raw.frame()
            raw.send(auth_req.SaslAuthenticateRequest(auth_bytes=token))
            response = decode_response(raw.frame(), auth_resp.SaslAuthenticateResponse)[1]
            assert response.error_code == ErrorCode.sasl_authentication_failed
            assert never_served(raw)
        finally:
            raw.close()
    # A frame announced (and sent) larger than sasl.server.max.receive.size closes the connection.
    raw = RawConnection(broker.ports["SASL_PLAINTEXT"], timeout_s=TIMEOUT)
    try:
        raw.send(handshake_req.SaslHandshakeRequest(mechanism="PLAIN"))
        raw.frame()
        raw.send(auth_req.SaslAuthenticateRequest(auth_bytes=b"\0bob\0b" + b"x" * (MAX_RECEIVE + 1)))
        assert raw.frame() is None
    finally:
        raw.close()
    # Half a frame, then the end of the connection.
    raw = RawConnection(broker.ports["SASL_PLAINTEXT"], timeout_s=TIMEOUT)
    raw.sock.sendall(struct.pack(">i", 100) + b"\0" * 10)
    raw.close()
    assert healthy(broker)


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL"])
def test_garbage_and_truncated_tls_handshakes(broker: Broker, listener: str) -> None:
    port = broker.ports[listener]
    rng = random.Random(listener)
    for _ in range(20):
        raw = RawConnection(port, timeout_s=TIMEOUT)
        try:
            raw.sock.sendall(rng.randbytes(rng.randrange(1, 2000)))
            assert never_served(raw)
        finally:
            raw.close()
    # A real ClientHello cut short, then nothing more.
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = ssl.create_default_context(cafile=str(broker.tls.ca_file)).wrap_bio(incoming, outgoing,
                                                                                 server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    hello = outgoing.read()
    for cut in (5, len(hello) // 2, len(hello) - 1):
        raw = RawConnection(port, timeout_s=TIMEOUT)
        try:
            raw.sock.sendall(hello[:cut])
        finally:
            raw.close()
    # Plaintext Kafka on the TLS port, and a TLS client that does not trust the broker.
    raw = RawConnection(port, timeout_s=TIMEOUT)
    try:
        assert never_served(raw)
    finally:
        raw.close()
    with pytest.raises(ssl.SSLError):
        RawConnection(port, ssl.create_default_context(cafile=str(broker.tls.untrusted_ca_file)), timeout_s=TIMEOUT)
    assert healthy(broker)
    log = broker.cluster.brokers[0].log_path.read_text()
    assert "SSL handshake failed" in log and "Traceback" not in log
