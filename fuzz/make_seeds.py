"""Write the seed inputs that come from the project's own encoders into ``fuzz/corpus/``.

    .venv/bin/python -m fuzz.make_seeds

Deterministic: the same files each run (fixed nonces, salts and timestamps).  The corpus's
names say where an input came from: ``seed-own-*`` from here, ``seed-client-*`` from real
clients (``fuzz/capture_seeds.py``), ``seed-found-*`` inputs fuzzing found that showed a
harness checking too much, ``regression-*`` inputs that crashed odradek before a fix.  Only
``seed-own-*`` files are rewritten here.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Iterator

from fuzz.runner import CORPUS


def write(target: str, name: str, data: bytes) -> None:
    directory = CORPUS / target
    directory.mkdir(parents=True, exist_ok=True)
    assert len(data) < 4096, f"seed {target}/{name} is {len(data)} bytes"
    (directory / f"seed-{name}").write_bytes(data)


def request_frames() -> Iterator[tuple[str, bytes]]:
    from odradek.protocol import control
    from odradek.protocol.framing import encode_request

    topic_id = uuid.UUID(int=1)
    yield "leader-and-isr-v5", encode_request(control.LeaderAndIsrRequest(
        controller_id=0, controller_epoch=3, broker_epoch=25, topic_states=(control.LeaderAndIsrTopicState(
            topic_name="orders", topic_id=topic_id, partition_states=(control.LeaderAndIsrPartitionState(
                partition_index=0, controller_epoch=3, leader=1, leader_epoch=7, isr=(1, 2), zk_version=4,
                replicas=(1, 2, 0), adding_replicas=(0,), is_new=True),)),),
        live_leaders=(control.LeaderAndIsrLiveLeader(broker_id=1, host_name="localhost", port=9092),)), 11, "ctl")
    yield "stop-replica-v3", encode_request(control.StopReplicaRequest(
        controller_id=0, controller_epoch=3, broker_epoch=25, topic_states=(control.StopReplicaTopicState(
            topic_name="orders", partition_states=(control.StopReplicaPartitionState(
                partition_index=2, leader_epoch=-2, delete_partition=True),)),)), 12, "ctl")
    yield "update-metadata-v7", encode_request(control.UpdateMetadataRequest(
        controller_id=0, controller_epoch=3, broker_epoch=25, topic_states=(control.UpdateMetadataTopicState(
            topic_name="orders", topic_id=topic_id, partition_states=(control.UpdateMetadataPartitionState(
                partition_index=0, controller_epoch=3, leader=1, leader_epoch=7, isr=(1,), zk_version=4,
                replicas=(1, 2), offline_replicas=(2,)),)),),
        live_brokers=(control.UpdateMetadataBroker(id=1, endpoints=(control.UpdateMetadataEndpoint(
            port=9092, host="localhost", listener="PLAINTEXT", security_protocol=0),), rack="r1"),)), 13, "ctl")
    yield "controlled-shutdown-v3", encode_request(
        control.ControlledShutdownRequest(broker_id=2, broker_epoch=25), 14, "ctl")
    # ControlledShutdown v0: the one request header without a client id.
    yield "controlled-shutdown-v0", struct.pack(">ihhii", 12, 7, 0, 15, 2)


def _legacy_message(magic: int, key: bytes | None, value: bytes | None, attributes: int = 0,
                    timestamp: int = 1_700_000_000_000, offset: int = 0) -> bytes:
    """One magic 0/1 message in its message set entry (offset, size, crc, ...)."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def record_batches() -> Iterator[tuple[str, bytes]]:
    """Flag byte (fuzz.record_batch) + records."""
    from odradek.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
    from odradek.protocol.records import CompressionType, SimpleRecord, build_batch

    records = [SimpleRecord(b"value-%d" % i * 3, b"key-%d" % i, headers=(("h", b"1"),)) for i in range(4)]
    for codec in CompressionType:
        batch = build_batch(records, timestamp=1_700_000_000_000, compression=codec, producer_id=5,
                            producer_epoch=0, base_sequence=0)
        yield f"v2-{codec.name.lower()}", b"\x00" + batch
        yield f"v2-{codec.name.lower()}-compact", b"\x01" + batch
    keyless = build_batch([SimpleRecord(b"no key"), SimpleRecord(b"keyed", b"k")], timestamp=1_700_000_000_000)
    yield "v2-keyless-compact-append-time", b"\x03" + keyless
    yield "v2-transactional", b"\x02" + build_batch(records[:1], timestamp=1, producer_id=9, producer_epoch=1,
                                                     base_sequence=4, is_transactional=True)
    yield "v2-control-from-coordinator", b"\x0a" + build_end_txn_marker_batch(
        ControlRecordType.COMMIT, producer_id=9, producer_epoch=1, coordinator_epoch=2, timestamp=1)
    yield "legacy-v0", b"\x00" + _legacy_message(0, b"k", b"v0") + _legacy_message(0, None, b"v1", offset=1)
    yield "legacy-v1", b"\x00" + _legacy_message(1, b"k", b"v") + _legacy_message(1, b"k2", None, offset=1)
    inner = _legacy_message(1, b"k", b"inner") + _legacy_message(1, b"k", b"inner2", offset=1)
    yield "legacy-v1-gzip", b"\x00" + _legacy_message(1, None, zlib.compress(inner, wbits=31), attributes=1)


def log_files() -> Iterator[tuple[str, bytes]]:
    from fuzz.log_recovery import CLEAN, RECOVER_FROM_ZERO, REPLACE, base_log

    base = base_log()
    for index, name in enumerate(base.files):
        stem = name.replace("/", "_").lstrip(".")
        size = len(base.contents[name])
        yield f"{stem}-intact-crash", bytes([index, RECOVER_FROM_ZERO]) + b"\xff\xff"
        yield f"{stem}-intact-clean", bytes([index, CLEAN]) + b"\xff\xff"
        yield f"{stem}-torn-tail", bytes([index, RECOVER_FROM_ZERO]) + struct.pack(">H", size * 2 // 3)
        yield f"{stem}-flipped-byte", bytes([index, RECOVER_FROM_ZERO]) + struct.pack(">HHB", 0xFFFF, size // 2, 0x40)
        yield f"{stem}-replaced", bytes([index, RECOVER_FROM_ZERO | REPLACE]) + base.contents[name][: size // 2]


def _token(data: bytes) -> bytes:
    return struct.pack(">H", len(data)) + data


def sasl_exchanges() -> Iterator[tuple[str, bytes]]:
    from fuzz.sasl import MECHANISMS, PASSWORD, SERVER_NONCE, USER
    from odradek.security.scram import ScramClient, ScramCredential

    plain = MECHANISMS.index("PLAIN")
    for version in (0, 1, 3):
        yield f"plain-v{version}", bytes([plain, version]) + _token(f"\0{USER}\0{PASSWORD}".encode())
    yield "plain-wrong-password", bytes([plain, 1]) + _token(f"{USER}\0{USER}\0nope".encode())
    for mechanism in MECHANISMS[1:3]:
        for version in (0, 2):
            client = ScramClient(mechanism, USER, PASSWORD, nonce="fuzz-client-nonce")
            first = client.first_message()
            credential = ScramCredential.from_password(mechanism, PASSWORD, salt=b"fuzz-salt-0123456789abcdef012345")
            server_first = (f"r=fuzz-client-nonce{SERVER_NONCE},s={_b64(credential.salt)},"
                            f"i={credential.iterations}").encode()
            final = client.final_message(server_first)
            name = mechanism.lower()
            yield f"{name}-v{version}", bytes([MECHANISMS.index(mechanism), version]) + _token(first) + _token(final)
        yield f"{name}-unknown-user", bytes([MECHANISMS.index(mechanism), 1]) + _token(b"n,,n=bob,r=abc")
    yield "gssapi", bytes([MECHANISMS.index("GSSAPI"), 1]) + _token(b"x")


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


def znodes() -> Iterator[tuple[str, bytes]]:
    from fuzz.znode_json import DECODERS
    from odradek.security.acls import (
        Acl,
        KafkaPrincipal,
        Operation,
        PatternType,
        PermissionType,
        ResourcePattern,
        ResourceType,
        encode_acl_change,
        encode_acls,
    )
    from odradek.security.scram import ScramCredential
    from odradek.zk import zk_data as z

    credential = ScramCredential.from_password("SCRAM-SHA-256", "secret", salt=b"s" * 16).to_string()
    prefixed = ResourcePattern(ResourceType.TOPIC, "app-", PatternType.PREFIXED)
    examples = {
        "cluster_id": z.ClusterIdZNode.encode("AAAAAAAAAAAAAAAAAAAAAQ"),
        "controller": z.ControllerZNode.encode(1, 1_700_000_000_000),
        "controller_epoch": z.ControllerEpochZNode.encode(7),
        "broker": z.BrokerIdZNode.encode(z.BrokerInfo(1, (z.EndPoint("PLAINTEXT", "localhost", 9092),
                                                          z.EndPoint("SSL", "::1", 9093, "SSL")), "r1", 1)),
        "topic": z.TopicZNode.encode(z.TopicAssignment({0: [1, 2], 1: [2, 0]}, "AAAAAAAAAAAAAAAAAAAAAQ",
                                                       {1: [0]}, {1: [1]})),
        "partition_state": z.TopicPartitionStateZNode.encode(z.LeaderAndIsr(1, 4, (1, 2), 3)),
        "config_entity": z.ConfigEntityZNode.encode({"SCRAM-SHA-256": credential, "producer_byte_rate": "1024"}),
        "config_change": z.ConfigEntityChangeNotificationSequenceZNode.encode("users", "alice"),
        "reassignment": z.ReassignPartitionsZNode.encode({("orders", 0): [1, 2]}),
        "preferred_election": z.PreferredReplicaElectionZNode.encode([("orders", 0)]),
        "log_dir_event": z.LogDirEventNotificationSequenceZNode.encode(2),
        "producer_id_block": z.ProducerIdBlockZNode.encode(1, 0, 999),
        "acls": encode_acls([Acl(KafkaPrincipal("User", "alice"), PermissionType.ALLOW, "*", Operation.READ)]),
        "acl_change_literal": encode_acl_change(ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)),
        "acl_change_extended": encode_acl_change(prefixed),
    }
    # As Kafka 2.8 writes them, beside the project's own encoding.
    examples_kafka = {
        "broker": b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://'
                  b'kafka-1:9092"],"jmx_port":-1,"features":{},"host":"kafka-1","timestamp":"1700000000000",'
                  b'"port":9092,"version":5}',
        "controller": b'{"version":1,"brokerid":0,"timestamp":"1700000000000"}',
        "topic": b'{"version":2,"partitions":{"0":[0]},"adding_replicas":{},"removing_replicas":{}}',
    }
    for index, (name, _check) in enumerate(DECODERS):
        yield name, bytes([index]) + examples[name]
        if name in examples_kafka:
            yield f"{name}-kafka", bytes([index]) + examples_kafka[name]


def spark_options() -> Iterator[tuple[str, bytes]]:
    bootstrap = "kafka.bootstrap.servers=localhost:9092\n"
    yield "read-subscribe", b"\x01" + f"{bootstrap}subscribe=orders".encode()
    yield "read-stream-earliest", b"\x00" + f"{bootstrap}subscribe=orders\nstartingOffsets=earliest".encode()
    yield "read-assign-offsets", b"\x01" + (
        f'{bootstrap}assign={{"orders":[0,1]}}\nstartingOffsets={{"orders":{{"0":-2,"1":5}}}}\n'
        f'endingOffsets={{"orders":{{"0":10,"1":-1}}}}').encode()
    yield "read-pattern-timestamps", b"\x00" + (
        f"{bootstrap}subscribePattern=ord.*\nstartingTimestamp=1700000000000\nmaxOffsetsPerTrigger=100\n"
        f"startingOffsetsByTimestampStrategy=latest\nkafka.isolation.level=read_committed\n"
        f"failOnDataLoss=false\nincludeHeaders=true\nminPartitions=4").encode()
    yield "read-by-timestamp", b"\x01" + (
        f'{bootstrap}subscribe=a,b\nstartingOffsetsByTimestamp={{"a":{{"0":1700000000000}}}}\n'
        f'endingTimestamp=1800000000000\nkafka.security.protocol=SASL_SSL\nkafka.sasl.mechanism=PLAIN').encode()
    yield "write", b"\x03" + f"{bootstrap}topic=orders-upper".encode()
    yield "write-exactly-once", b"\x03" + (
        f"{bootstrap}topic=orders-copy\ncheckpointLocation=/tmp/c\nexactlyOnce=true\nkafka.acks=all").encode()


def topics_arguments() -> Iterator[tuple[str, bytes]]:
    runs = {
        "create": "--zookeeper\nlocalhost:2181\n--create\n--topic\norders\n--partitions\n3\n--replication-factor\n2"
                  "\n--config\ncleanup.policy=compact\n--if-not-exists",
        "create-assignment": "--bootstrap-server\nlocalhost:9092\n--create\n--topic\na.b_c\n--replica-assignment"
                             "\n1:2,2:0,0:1\n--command-config\n/tmp/client.properties",
        "alter": "--zookeeper\nz:2181/chroot\n--alter\n--topic\norders\n--partitions\n6\n--replica-assignment\n"
                 "1:2,2:0,0:1,1:0\n--delete-config\nretention.ms\n--disable-rack-aware",
        "describe": "--bootstrap-server\nb:9092\n--describe\n--under-replicated-partitions\n--exclude-internal",
        "list": "--zookeeper\nz:2181\n--list",
        "delete": "--zookeeper\nz:2181\n--delete\n--topic\norders\n--if-exists",
        "bad-partitions": "--zookeeper\nz:2181\n--create\n--topic\nx\n--partitions\nmany",
        "help": "--help",
    }
    for name, argv in runs.items():
        yield name, argv.encode()


def main() -> None:
    makers = {"request_frame": request_frames, "record_batch": record_batches, "log_recovery": log_files,
              "sasl": sasl_exchanges, "znode_json": znodes, "spark_options": spark_options,
              "topics_args": topics_arguments}
    for target, make in makers.items():
        for old in (CORPUS / target).glob("seed-own-*"):
            old.unlink()
        count = 0
        for name, data in make():
            write(target, f"own-{name}", data)
            count += 1
        print(f"{target}: {count} seeds")


if __name__ == "__main__":
    main()
