"""One broker with PLAINTEXT (inter-broker), SSL, SSL with required client certificates,
SASL_PLAINTEXT, SASL_SSL and a SASL_PLAINTEXT listener with a short re-authentication
interval: round trips with confluent-kafka, kafka-python, aiokafka and kcat on each, and the
refusals Kafka makes (wrong password, unknown user, unsupported mechanism, untrusted or
missing certificates, plaintext on a TLS port, requests before authentication)."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v3 import request as api_versions_req
from kio.schema.api_versions.v3 import response as api_versions_resp
from kio.schema.metadata.v9 import request as metadata_req
from kio.schema.sasl_authenticate.v2 import request as auth_req
from kio.schema.sasl_authenticate.v2 import response as auth_resp
from kio.schema.sasl_handshake.v0 import request as handshake0_req
from kio.schema.sasl_handshake.v0 import response as handshake0_resp
from kio.schema.sasl_handshake.v1 import request as handshake_req
from kio.schema.sasl_handshake.v1 import response as handshake_resp

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper, free_port
from odradek.protocol.errors import ErrorCode
from odradek.security.scram import ScramClient, ScramCredential
from odradek.zk.client import KafkaZkClient
from support import ClusterFactory, wait_until
from support.tls import TlsMaterial, tls_material
from support.wire import RawConnection

TIMEOUT = 30
METADATA_ALL = metadata_req.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                            include_cluster_authorized_operations=False,
                                            include_topic_authorized_operations=False)
PROTOCOLS = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
             "SASL_SSL": "SASL_SSL", "REAUTH": "SASL_PLAINTEXT"}
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_bob="bob-secret" user_admin="admin-secret";')
SCRAM_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


@dataclass
class Secure:
    cluster: LocalCluster
    ports: dict[str, int]
    tls: TlsMaterial

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def confluent(self, listener: str, mechanism: str | None = None, user: str | None = None,
                  password: str | None = None, **extra: str) -> dict[str, str]:
        protocol = PROTOCOLS[listener]
        config = {"bootstrap.servers": self.bootstrap(listener), "security.protocol": protocol}
        if "SSL" in protocol:
            config["ssl.ca.location"] = str(self.tls.ca_file)
        if protocol.startswith("SASL"):
            config.update({"sasl.mechanism": mechanism or "PLAIN", "sasl.username": user or "bob",
                           "sasl.password": password or "bob-secret"})
        return {**config, **extra}


def set_scram_user(cluster: LocalCluster, user: str, password: str,
                   mechanisms: tuple[str, ...] = ("SCRAM-SHA-256", "SCRAM-SHA-512")) -> None:
    """As kafka-configs.sh --zookeeper --alter --add-config 'SCRAM-SHA-256=[password=...]'."""
    async def write() -> None:
        zk = KafkaZkClient(cluster.zookeeper_connect)
        await zk.start()
        try:
            await zk.set_entity_config("users", user, {
                m: ScramCredential.from_password(m, password, iterations=4096).to_string() for m in mechanisms})
        finally:
            await zk.close()
    asyncio.run(write())


@pytest.fixture(scope="module")
def secure(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    base = tmp_path_factory.mktemp("security-listeners")
    tls = tls_material(base / "tls")
    ports = {name: free_port() for name in PROTOCOLS}
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    overrides = {
        "listeners": listeners, "advertised.listeners": listeners,
        "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in PROTOCOLS.items()),
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": PLAIN_JAAS,
        **tls.broker_ssl_props(),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.reauth.connections.max.reauth.ms": "2000",
        "group.initial.rebalance.delay.ms": "0",
    }
    factory = ClusterFactory(zookeeper, base)
    try:
        cluster = factory(1, ports=[ports["PLAINTEXT"]], overrides=overrides)
        set_scram_user(cluster, "alice", "alice-secret")
        secure = Secure(cluster, ports, tls)
        wait_until(lambda: can_connect(secure.confluent("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "alice-secret")),
                   TIMEOUT, message="alice's SCRAM credentials reach the broker")
        yield secure
    finally:
        factory.stop_all()


REFUSAL_S = 2.0  # how long a refused client is given to (not) get metadata


def can_connect(config: dict[str, str], timeout: float = 5) -> bool:
    """Whether a client with ``config`` gets metadata within ``timeout`` (a refused client
    keeps retrying until then: refusals are checked with a shorter one)."""
    try:
        AdminClient(config).list_topics(timeout=timeout)
    except KafkaException:
        return False
    return True


def new_topic(config: dict[str, str], prefix: str) -> str:
    """A fresh topic, created over the listener under test."""
    topic = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
    return topic


def round_trip_confluent(config: dict[str, str], values: list[bytes] | None = None, **producer: Any) -> None:
    """Produce ``values`` (five small ones by default) with acks=all and read them back."""
    topic = new_topic(config, "sec")
    values = values or [f"v{i}".encode() for i in range(5)]
    errors: list[Any] = []
    with Producer({**config, "acks": "all", **producer}) as producer_:
        for value in values:
            producer_.produce(topic, value, on_delivery=lambda err, _msg: err and errors.append(err))
        assert producer_.flush(TIMEOUT) == 0
    assert not errors
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        wait_until(lambda: got.extend(m.value() for m in consumer.consume(20, 1) if not m.error())
                   or len(got) >= len(values), TIMEOUT, message=f"records of {topic}")
    finally:
        consumer.close()
    assert got == values


# ------------------------------------------------------------------ round trips


# Every listener type and mechanism a round trip goes through, with each client.
LOGINS = {
    "SSL": ("SSL", None, None, None),
    "SASL_PLAINTEXT-PLAIN": ("SASL_PLAINTEXT", "PLAIN", "bob", "bob-secret"),
    "SASL_PLAINTEXT-SCRAM-SHA-256": ("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "alice-secret"),
    "SASL_PLAINTEXT-SCRAM-SHA-512": ("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", "alice-secret"),
    "SASL_SSL-SCRAM-SHA-512": ("SASL_SSL", "SCRAM-SHA-512", "alice", "alice-secret"),
    "SASL_SSL-PLAIN": ("SASL_SSL", "PLAIN", "bob", "bob-secret"),
}
VALUES = [b"r0", b"r1", b"r2"]


def round_trip_kafka_python(secure: Secure, listener: str, mechanism: str | None, user: str | None,
                            password: str | None) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    common: dict[str, Any] = {"bootstrap_servers": secure.bootstrap(listener), "security_protocol": listener}
    if "SSL" in listener:
        common["ssl_cafile"] = str(secure.tls.ca_file)
    if mechanism:
        common.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
    topic = new_topic(secure.confluent(listener), "kp")
    producer = KafkaProducer(acks="all", **common)
    try:
        for value in VALUES:
            producer.send(topic, value).get(timeout=TIMEOUT)
    finally:
        producer.close()
    # Until the three are read or a minute passes with none (15 s was once too short on a loaded machine).
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=2 * TIMEOUT * 1000, **common)
    try:
        return [m.value for _, m in zip(range(len(VALUES)), consumer, strict=False)]
    finally:
        consumer.close()


def round_trip_aiokafka(secure: Secure, listener: str, mechanism: str | None, user: str | None,
                        password: str | None) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    common: dict[str, Any] = {"bootstrap_servers": secure.bootstrap(listener), "security_protocol": listener}
    if "SSL" in listener:
        common["ssl_context"] = create_ssl_context(cafile=str(secure.tls.ca_file))
    if mechanism:
        common.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
    topic = new_topic(secure.confluent(listener), "aio")

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(acks="all", **common)
        await producer.start()
        try:
            for value in VALUES:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **common)
        await consumer.start()
        try:
            got: list[bytes] = []
            while len(got) < len(VALUES):
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), TIMEOUT)
                got.extend(m.value for msgs in batch.values() for m in msgs)
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())


def round_trip_kcat(secure: Secure, listener: str, mechanism: str | None, user: str | None,
                    password: str | None) -> list[bytes]:
    topic = new_topic(secure.confluent(listener), "kcat")
    args = ["kcat", "-b", secure.bootstrap(listener), "-X", f"security.protocol={listener}"]
    if "SSL" in listener:
        args += ["-X", f"ssl.ca.location={secure.tls.ca_file}"]
    if mechanism:
        args += ["-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
    produced = subprocess.run([*args, "-P", "-t", topic], input=b"\n".join(VALUES) + b"\n", timeout=60,
                              capture_output=True)
    assert produced.returncode == 0, produced.stderr.decode()[-2000:]
    consumed = subprocess.run([*args, "-C", "-t", topic, "-o", "beginning", "-c", str(len(VALUES)), "-e"],
                              timeout=60, capture_output=True)
    assert consumed.returncode == 0, consumed.stderr.decode()[-2000:]
    return consumed.stdout.split()


@pytest.mark.parametrize("login", list(LOGINS))
def test_confluent_round_trip(secure: Secure, login: str) -> None:
    round_trip_confluent(secure.confluent(*LOGINS[login]))


@pytest.mark.parametrize("login", list(LOGINS))
@pytest.mark.parametrize("client", ["kafka-python", "aiokafka", "kcat"])
def test_round_trip(secure: Secure, client: str, login: str) -> None:
    run = {"kafka-python": round_trip_kafka_python, "aiokafka": round_trip_aiokafka, "kcat": round_trip_kcat}[client]
    assert run(secure, *LOGINS[login]) == VALUES


def test_confluent_with_client_certificate_on_required_listener(secure: Secure) -> None:
    round_trip_confluent(secure.confluent("MTLS", **{"ssl.certificate.location": str(secure.tls.client_cert),
                                                     "ssl.key.location": str(secure.tls.client_key)}))


# ------------------------------------------------------------------ refusals over the wire


def handshake(wire: RawConnection, mechanism: str) -> Any:
    return wire.request(handshake_req.SaslHandshakeRequest(mechanism=mechanism), handshake_resp.SaslHandshakeResponse)


def authenticate(wire: RawConnection, token: bytes) -> Any:
    return wire.request(auth_req.SaslAuthenticateRequest(auth_bytes=token), auth_resp.SaslAuthenticateResponse)


@pytest.mark.parametrize("mechanism, user, password", [
    ("SCRAM-SHA-256", "alice", "wrong"), ("SCRAM-SHA-512", "nobody", "x"), ("SCRAM-SHA-256", "nobody", "x")])
def test_scram_refusal_carries_kafkas_message_then_closes(secure: Secure, mechanism: str, user: str,
                                                          password: str) -> None:
    wire = RawConnection(secure.ports["SASL_PLAINTEXT"])
    try:
        assert handshake(wire, mechanism).error_code == ErrorCode.none
        client = ScramClient(mechanism, user, password)
        first = authenticate(wire, client.first_message())
        if first.error_code == ErrorCode.none:
            first = authenticate(wire, client.final_message(first.auth_bytes))
        assert first.error_code == ErrorCode.sasl_authentication_failed
        assert first.error_message == SCRAM_FAILED.format(mechanism)
        assert wire.closed_by_broker()
    finally:
        wire.close()


def test_plain_wrong_password_refused(secure: Secure) -> None:
    wire = RawConnection(secure.ports["SASL_PLAINTEXT"])
    try:
        handshake(wire, "PLAIN")
        response = authenticate(wire, b"\0bob\0nope")
        assert response.error_code == ErrorCode.sasl_authentication_failed
        assert response.error_message == "Authentication failed: Invalid username or password"
        assert wire.closed_by_broker()
    finally:
        wire.close()
    assert not can_connect(secure.confluent("SASL_PLAINTEXT", "PLAIN", "bob", "nope"), REFUSAL_S)


def test_unsupported_mechanism_lists_enabled_ones(secure: Secure) -> None:
    wire = RawConnection(secure.ports["SASL_PLAINTEXT"])
    try:
        response = handshake(wire, "GSSAPI")
        assert response.error_code == ErrorCode.unsupported_sasl_mechanism
        assert list(response.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert wire.closed_by_broker()
    finally:
        wire.close()


def test_no_data_before_authentication(secure: Secure) -> None:
    wire = RawConnection(secure.ports["SASL_PLAINTEXT"])
    try:
        versions = wire.request(api_versions_req.ApiVersionsRequest(client_software_name="t",
                                                                    client_software_version="1"),
                                api_versions_resp.ApiVersionsResponse)
        assert {k.api_key for k in versions.api_keys} >= {17, 36}
        wire.send(METADATA_ALL)
        assert wire.closed_by_broker()
    finally:
        wire.close()


def test_handshake_v0_then_raw_tokens(secure: Secure) -> None:
    wire = RawConnection(secure.ports["SASL_PLAINTEXT"])
    try:
        response = wire.request(handshake0_req.SaslHandshakeRequest(mechanism="SCRAM-SHA-256"),
                                handshake0_resp.SaslHandshakeResponse)
        assert response.error_code == ErrorCode.none
        client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
        client.verify_server_final(wire.raw(client.final_message(wire.raw(client.first_message()))))
        versions = wire.request(api_versions_req.ApiVersionsRequest(client_software_name="t",
                                                                    client_software_version="1"),
                                api_versions_resp.ApiVersionsResponse)
        assert versions.error_code == ErrorCode.none
    finally:
        wire.close()


def test_untrusted_or_missing_certificates_refused(secure: Secure) -> None:
    untrusted = secure.confluent("SSL", **{"ssl.ca.location": str(secure.tls.untrusted_ca_file)})
    assert not can_connect(untrusted, REFUSAL_S)
    # ssl.client.auth=required: no certificate, or one from another CA, is refused.
    assert not can_connect(secure.confluent("MTLS"), REFUSAL_S)
    assert not can_connect(secure.confluent("MTLS", **{
        "ssl.certificate.location": str(secure.tls.untrusted_client_cert),
        "ssl.key.location": str(secure.tls.untrusted_client_key)}), REFUSAL_S)
    assert can_connect(secure.confluent("SSL"))


def test_plaintext_client_on_tls_port_while_another_keeps_working(secure: Secure) -> None:
    ctx = ssl.create_default_context(cafile=str(secure.tls.ca_file))
    good = RawConnection(secure.ports["SSL"], ctx)
    bad = RawConnection(secure.ports["SSL"])
    try:
        bad.send(api_versions_req.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert bad.closed_by_broker()
        response = good.request(api_versions_req.ApiVersionsRequest(client_software_name="t",
                                                                    client_software_version="1"),
                                api_versions_resp.ApiVersionsResponse)
        assert response.error_code == ErrorCode.none
    finally:
        bad.close()
        good.close()
    assert "SSL handshake failed" in secure.cluster.brokers[0].log_path.read_text()


def test_broker_answers_close_notify(secure: Secure) -> None:
    """A TLS client that closes sends close_notify and waits for the broker's (asyncio, hence
    aiokafka, waits up to 30 s): the broker answers at once."""
    ctx = ssl.create_default_context(cafile=str(secure.tls.ca_file))

    async def open_and_close() -> None:
        _reader, writer = await asyncio.open_connection("127.0.0.1", secure.ports["SSL"], ssl=ctx,
                                                        server_hostname="localhost")
        writer.close()
        await asyncio.wait_for(writer.wait_closed(), 5)

    asyncio.run(open_and_close())


def test_scram_credential_change_picked_up_without_restart(secure: Secure) -> None:
    user = f"u{uuid.uuid4().hex[:8]}"
    assert not can_connect(secure.confluent("SASL_PLAINTEXT", "SCRAM-SHA-256", user, "first"), REFUSAL_S)
    set_scram_user(secure.cluster, user, "first")
    wait_until(lambda: can_connect(secure.confluent("SASL_PLAINTEXT", "SCRAM-SHA-256", user, "first")), TIMEOUT,
               message="the new user can log in")
    set_scram_user(secure.cluster, user, "second")
    wait_until(lambda: not can_connect(secure.confluent("SASL_PLAINTEXT", "SCRAM-SHA-256", user, "first"),
                                       REFUSAL_S), TIMEOUT,
               message="the old password stops working")
    assert can_connect(secure.confluent("SASL_PLAINTEXT", "SCRAM-SHA-256", user, "second"))


def test_confluent_reauthenticates_and_keeps_working(secure: Secure) -> None:
    """connections.max.reauth.ms=2000 on REAUTH: librdkafka re-authenticates on the same
    connection (KIP-368) and keeps producing across several sessions; without re-authentication
    the broker would close the connection at the first request after each expiry."""
    config = secure.confluent("REAUTH", "SCRAM-SHA-256", "alice", "alice-secret")
    topic = new_topic(config, "reauth")
    errors: list[Any] = []
    samples: list[list[tuple[str, int, int]]] = []

    def on_stats(text: str) -> None:
        brokers = json.loads(text)["brokers"].values()
        # The brokers the metadata named (nodeid >= 0): librdkafka may list its bootstrap
        # connection beside them, which it drops once it knows the cluster.
        samples.append([(b["name"], b["connects"], b["disconnects"]) for b in brokers if b["nodeid"] >= 0])

    with Producer({**config, "acks": "all", "statistics.interval.ms": 500, "stats_cb": on_stats}) as producer:
        deadline = time.monotonic() + 7
        sent = 0
        while time.monotonic() < deadline:
            producer.produce(topic, f"r{sent}".encode(), on_delivery=lambda err, _m: err and errors.append(err))
            sent += 1
            producer.flush(TIMEOUT)
            producer.poll(0.2)
    assert not errors
    # One connection to the one broker all along: never a second connect, never a disconnect.
    assert samples and samples[-1], samples
    assert all(connects <= 1 and not disconnects for sample in samples for _, connects, disconnects in sample)
    assert len({name for sample in samples for name, _, _ in sample}) == 1, samples


def test_expired_session_without_reauthentication_is_closed(secure: Secure) -> None:
    wire = RawConnection(secure.ports["REAUTH"])
    try:
        handshake(wire, "PLAIN")
        response = authenticate(wire, b"\0bob\0bob-secret")
        assert response.error_code == ErrorCode.none
        assert response.session_lifetime.total_seconds() * 1000 == 2000
        time.sleep(2.1)  # the session's length is the point of the test: nothing to await
        wire.send(METADATA_ALL)
        assert wire.closed_by_broker()
    finally:
        wire.close()


def test_large_records_over_tls(secure: Secure) -> None:
    """Frames far larger than one TLS record or the read buffer, both ways (fetch data is read
    and encrypted, never sendfile'd)."""
    round_trip_confluent(secure.confluent("SASL_SSL", "SCRAM-SHA-256", "alice", "alice-secret"),
                         [bytes([i]) * 300_000 for i in range(12)], **{"linger.ms": 50, "message.max.bytes": 4_000_000})
