"""The controller's request builders: the dataclasses they produce, and that those go
through Kafka framing (encode_request / decode_request) unchanged."""

from __future__ import annotations

import uuid

from fakes import tp

from odradek.controller import control_requests as build
from odradek.controller.context import ReplicaAssignment
from odradek.protocol import control
from odradek.protocol.errors import ErrorCode
from odradek.protocol.framing import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from odradek.zk.zk_data import BrokerInfo, EndPoint, LeaderAndIsr, uuid_to_topic_id

TOPIC_UUID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
TOPIC_ID = uuid_to_topic_id(TOPIC_UUID)
assert TOPIC_ID is not None

BROKERS = [
    BrokerInfo(2, (EndPoint("INTERNAL", "h2", 9192), EndPoint("EXTERNAL", "x2", 9292, "SSL")), rack="r2"),
    BrokerInfo(0, (EndPoint("INTERNAL", "h0", 9190, "SASL_PLAINTEXT"),)),
    BrokerInfo(1, (EndPoint("PLAINTEXT", "h1", 9191),), rack="r1"),
]


def _roundtrip(payload: object) -> object:
    frame = encode_request(payload, correlation_id=42, client_id="controller-0")
    size = int.from_bytes(frame[:4], "big")
    assert size == len(frame) - 4
    header, decoded = decode_request(frame[4:])
    assert (header.api_key, header.api_version) == (type(payload).__api_key__, type(payload).__version__)
    assert header.correlation_id == 42 and header.client_id == "controller-0"
    return decoded


def test_leader_and_isr_request() -> None:
    request = build.build_leader_and_isr_request(
        controller_id=0, controller_epoch=7, broker_epoch=300,
        partitions={
            tp("b", 1): (LeaderAndIsr(2, 4, (2, 0), 6, 9), ReplicaAssignment((2, 0, 1), (1,), ()), False),
            tp("b", 0): (LeaderAndIsr(0, 1, (0,), 7, 3), ReplicaAssignment((0, 1)), True),
            tp("a", 0): (LeaderAndIsr(1, 0, (1, 2), 7, 0), ReplicaAssignment((1, 2)), True),
        },
        topic_ids={"b": TOPIC_ID}, live_leaders=[BROKERS[0], BROKERS[2]], listener="INTERNAL")

    assert (request.controller_id, request.controller_epoch, request.broker_epoch) == (0, 7, 300)
    # Topics and partitions come out sorted; unknown topic ids are Kafka's zero UUID.
    assert [t.topic_name for t in request.topic_states] == ["a", "b"]
    a, b = request.topic_states
    assert a.topic_id == uuid.UUID(int=0)
    assert b.topic_id == TOPIC_UUID
    assert [p.partition_index for p in b.partition_states] == [0, 1]
    p1 = b.partition_states[1]
    assert (p1.controller_epoch, p1.leader, p1.leader_epoch, p1.isr, p1.zk_version) == (6, 2, 4, (2, 0), 9)
    assert (p1.replicas, p1.adding_replicas, p1.removing_replicas, p1.is_new) == ((2, 0, 1), (1,), (), False)
    assert b.partition_states[0].is_new
    # Leaders' endpoints on the inter-broker listener, or the first one when they lack it.
    assert [(x.broker_id, x.host_name, x.port) for x in request.live_leaders] == [(2, "h2", 9192), (1, "h1", 9191)]

    decoded = _roundtrip(request)
    assert isinstance(decoded, control.LeaderAndIsrRequest)
    assert decoded.topic_states[1] == request.topic_states[1]
    assert decoded.topic_states[0].partition_states == request.topic_states[0].partition_states
    assert decoded.live_leaders == request.live_leaders
    assert decoded.broker_epoch == 300


def test_update_metadata_request() -> None:
    request = build.build_update_metadata_request(
        controller_id=1, controller_epoch=3, broker_epoch=-1,
        partitions={
            tp("t", 1): (LeaderAndIsr(-2, 5, (1,), 3, 2), (1, 2), (2,)),
            tp("t", 0): (LeaderAndIsr(0, 1, (0, 1), 3, 1), (0, 1), ()),
        },
        topic_ids={"t": TOPIC_ID}, live_brokers=BROKERS)

    [topic] = request.topic_states
    assert (topic.topic_name, topic.topic_id) == ("t", TOPIC_UUID)
    p0, p1 = topic.partition_states
    assert (p0.partition_index, p0.leader, p0.isr, p0.replicas, p0.offline_replicas) == (0, 0, (0, 1), (0, 1), ())
    assert (p1.leader, p1.leader_epoch, p1.zk_version, p1.offline_replicas) == (-2, 5, 2, (2,))
    # Brokers sorted by id, every endpoint with Kafka's security protocol id, racks kept.
    assert [b.id for b in request.live_brokers] == [0, 1, 2]
    assert [(e.listener, e.host, e.port, e.security_protocol) for e in request.live_brokers[2].endpoints] == [
        ("INTERNAL", "h2", 9192, 0), ("EXTERNAL", "x2", 9292, 1)]
    assert request.live_brokers[0].endpoints[0].security_protocol == 2
    assert [b.rack for b in request.live_brokers] == [None, "r1", "r2"]

    decoded = _roundtrip(request)
    assert isinstance(decoded, control.UpdateMetadataRequest)
    assert decoded.topic_states == request.topic_states
    assert decoded.live_brokers == request.live_brokers
    assert (decoded.controller_id, decoded.controller_epoch) == (1, 3)


def test_stop_replica_request() -> None:
    request = build.build_stop_replica_request(
        controller_id=0, controller_epoch=2, broker_epoch=55,
        partitions={tp("b", 0): (-2, True), tp("a", 3): (4, False), tp("a", 1): (-1, True)})
    assert [t.topic_name for t in request.topic_states] == ["a", "b"]
    a, b = request.topic_states
    assert [(p.partition_index, p.leader_epoch, p.delete_partition) for p in a.partition_states] == [
        (1, -1, True), (3, 4, False)]
    assert [(p.partition_index, p.leader_epoch, p.delete_partition) for p in b.partition_states] == [(0, -2, True)]

    decoded = _roundtrip(request)
    assert decoded == request


def test_leader_and_isr_response_errors_map_topic_ids_back_to_names() -> None:
    response = control.LeaderAndIsrResponse(error_code=ErrorCode.none, topics=(
        control.LeaderAndIsrTopicError(topic_id=TOPIC_UUID, partition_errors=(
            control.LeaderAndIsrPartitionError(partition_index=0, error_code=ErrorCode.none),
            control.LeaderAndIsrPartitionError(partition_index=1, error_code=ErrorCode.stale_controller_epoch),
        )),
    ))
    frame = encode_response(response, correlation_id=9)
    correlation_id, decoded = decode_response(frame[4:], control.LeaderAndIsrResponse)
    assert correlation_id == 9
    top, errors = build.leader_and_isr_response_errors(decoded, {"t": TOPIC_ID, "u": "AAAAAAAAAAAAAAAAAAAAAQ"})
    assert top == 0
    assert errors == {("t", 0): 0, ("t", 1): int(ErrorCode.stale_controller_epoch)}


def test_stop_replica_response_errors() -> None:
    response = control.StopReplicaResponse(error_code=ErrorCode.stale_controller_epoch, partition_errors=(
        control.StopReplicaPartitionError(topic_name="t", partition_index=2, error_code=ErrorCode.none),
        control.StopReplicaPartitionError(topic_name="u", partition_index=0,
                                          error_code=ErrorCode.kafka_storage_error),
    ))
    frame = encode_response(response, correlation_id=1)
    _, decoded = decode_response(frame[4:], control.StopReplicaResponse)
    top, errors = build.stop_replica_response_errors(decoded)
    assert top == int(ErrorCode.stale_controller_epoch)
    assert errors == {("t", 2): 0, ("u", 0): int(ErrorCode.kafka_storage_error)}
