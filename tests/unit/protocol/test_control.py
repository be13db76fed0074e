"""The control API schemas against byte layouts written out by hand from Kafka's JSON schemas.

The golden vectors below are not produced by any codec: each line is one field of
LeaderAndIsrRequest.json (v5), StopReplicaRequest.json (v3), UpdateMetadataRequest.json (v7),
ControlledShutdownRequest.json (v3) and their responses, so a bug that encodes and decodes
symmetrically wrong still fails here.
"""

from __future__ import annotations

import dataclasses
import io
import typing
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from odradek.protocol import control as c
from support.examples import examples

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
UUID_HEX = "00112233445566778899aabbccddeeff"


def encode(payload: object) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(payload))(buffer, payload)
    return buffer.getvalue()


def decode(schema: type, data: bytes) -> object:
    payload, size = entity_reader(schema)(data, 0)
    assert size == len(data)
    return payload


GOLDEN: list[tuple[object, str]] = [
    (
        c.LeaderAndIsrRequest(
            controller_id=1,
            controller_epoch=5,
            broker_epoch=256,
            type=c.LeaderAndIsrType.FULL,
            topic_states=(
                c.LeaderAndIsrTopicState(
                    topic_name="foo",
                    topic_id=TOPIC_ID,
                    partition_states=(
                        c.LeaderAndIsrPartitionState(
                            partition_index=0,
                            controller_epoch=5,
                            leader=1,
                            leader_epoch=7,
                            isr=(1, 2),
                            zk_version=3,
                            replicas=(1, 2, 3),
                            adding_replicas=(3,),
                            is_new=True,
                        ),
                    ),
                ),
            ),
            live_leaders=(c.LeaderAndIsrLiveLeader(broker_id=1, host_name="h", port=9092),),
        ),
        "00000001"  # ControllerId
        "00000005"  # ControllerEpoch
        "0000000000000100"  # BrokerEpoch
        "01"  # Type (FULL)
        "02"  # TopicStates: compact array of 1
        "04666f6f"  # . TopicName "foo" (compact string: length + 1)
        + UUID_HEX  # . TopicId
        + "02"  # . PartitionStates: 1
        "00000000"  # . . PartitionIndex
        "00000005"  # . . ControllerEpoch
        "00000001"  # . . Leader
        "00000007"  # . . LeaderEpoch
        "03 00000001 00000002"  # . . Isr [1, 2]
        "00000003"  # . . ZkVersion
        "04 00000001 00000002 00000003"  # . . Replicas [1, 2, 3]
        "02 00000003"  # . . AddingReplicas [3]
        "01"  # . . RemovingReplicas []
        "01"  # . . IsNew
        "00"  # . . tagged fields
        "00"  # . tagged fields
        "02"  # LiveLeaders: 1
        "00000001"  # . BrokerId
        "0268"  # . HostName "h"
        "00002384"  # . Port 9092
        "00"  # . tagged fields
        "00",  # tagged fields
    ),
    (
        c.LeaderAndIsrResponse(
            error_code=ErrorCode.none,
            topics=(
                c.LeaderAndIsrTopicError(
                    topic_id=TOPIC_ID,
                    partition_errors=(
                        c.LeaderAndIsrPartitionError(partition_index=0, error_code=ErrorCode.none),
                        c.LeaderAndIsrPartitionError(
                            partition_index=1, error_code=ErrorCode.not_leader_or_follower
                        ),
                    ),
                ),
            ),
        ),
        "0000"  # ErrorCode
        "02"  # Topics: 1
        + UUID_HEX  # . TopicId
        + "03"  # . PartitionErrors: 2
        "00000000 0000 00"  # . . PartitionIndex 0, ErrorCode NONE, tagged fields
        "00000001 0006 00"  # . . PartitionIndex 1, NOT_LEADER_OR_FOLLOWER, tagged fields
        "00"  # . tagged fields
        "00",  # tagged fields
    ),
    (
        c.StopReplicaRequest(
            controller_id=1,
            controller_epoch=5,
            topic_states=(
                c.StopReplicaTopicState(
                    topic_name="foo",
                    partition_states=(
                        c.StopReplicaPartitionState(
                            partition_index=0, leader_epoch=-2, delete_partition=True
                        ),
                        c.StopReplicaPartitionState(
                            partition_index=1, leader_epoch=4, delete_partition=False
                        ),
                    ),
                ),
            ),
        ),
        "00000001"  # ControllerId
        "00000005"  # ControllerEpoch
        "ffffffffffffffff"  # BrokerEpoch (default -1)
        "02"  # TopicStates: 1
        "04666f6f"  # . TopicName "foo"
        "03"  # . PartitionStates: 2
        "00000000 fffffffe 01 00"  # . . index 0, LeaderEpoch -2, DeletePartition, tags
        "00000001 00000004 00 00"  # . . index 1, LeaderEpoch 4, keep, tags
        "00"  # . tagged fields
        "00",  # tagged fields
    ),
    (
        c.StopReplicaResponse(
            error_code=ErrorCode.none,
            partition_errors=(
                c.StopReplicaPartitionError(
                    topic_name="foo", partition_index=2, error_code=ErrorCode.kafka_storage_error
                ),
            ),
        ),
        "0000"  # ErrorCode
        "02"  # PartitionErrors: 1
        "04666f6f 00000002 0038 00"  # . "foo", 2, KAFKA_STORAGE_ERROR (56), tags
        "00",  # tagged fields
    ),
    (
        c.UpdateMetadataRequest(
            controller_id=1,
            controller_epoch=5,
            broker_epoch=10,
            topic_states=(
                c.UpdateMetadataTopicState(
                    topic_name="foo",
                    topic_id=TOPIC_ID,
                    partition_states=(
                        c.UpdateMetadataPartitionState(
                            partition_index=0,
                            controller_epoch=5,
                            leader=2,
                            leader_epoch=1,
                            isr=(2,),
                            zk_version=0,
                            replicas=(2, 1),
                            offline_replicas=(1,),
                        ),
                    ),
                ),
            ),
            live_brokers=(
                c.UpdateMetadataBroker(
                    id=2,
                    endpoints=(
                        c.UpdateMetadataEndpoint(
                            port=9092, host="h", listener="PLAINTEXT", security_protocol=0
                        ),
                    ),
                ),
                c.UpdateMetadataBroker(id=1, endpoints=(), rack="r1"),
            ),
        ),
        "00000001"  # ControllerId
        "00000005"  # ControllerEpoch
        "000000000000000a"  # BrokerEpoch
        "02"  # TopicStates: 1
        "04666f6f"  # . TopicName
        + UUID_HEX  # . TopicId
        + "02"  # . PartitionStates: 1
        "00000000"  # . . PartitionIndex
        "00000005"  # . . ControllerEpoch
        "00000002"  # . . Leader
        "00000001"  # . . LeaderEpoch
        "02 00000002"  # . . Isr [2]
        "00000000"  # . . ZkVersion
        "03 00000002 00000001"  # . . Replicas [2, 1]
        "02 00000001"  # . . OfflineReplicas [1]
        "00"  # . . tagged fields
        "00"  # . tagged fields
        "03"  # LiveBrokers: 2
        "00000002"  # . Id
        "02"  # . Endpoints: 1
        "00002384 0268"  # . . Port 9092, Host "h"
        "0a 504c41494e54455854"  # . . Listener "PLAINTEXT"
        "0000 00"  # . . SecurityProtocol PLAINTEXT, tagged fields
        "00"  # . Rack null
        "00"  # . tagged fields
        "00000001 01 037231 00"  # . Id 1, no endpoints, Rack "r1", tags
        "00",  # tagged fields
    ),
    (c.UpdateMetadataResponse(error_code=ErrorCode.stale_controller_epoch), "000b 00"),
    (
        c.ControlledShutdownRequest(broker_id=3, broker_epoch=99),
        "00000003 0000000000000063 00",  # BrokerId, BrokerEpoch, tagged fields
    ),
    (
        c.ControlledShutdownResponse(
            error_code=ErrorCode.none,
            remaining_partitions=(c.RemainingPartition(topic_name="foo", partition_index=2),),
        ),
        "0000 02 04666f6f 00000002 00 00",
    ),
]


@pytest.mark.parametrize(("payload", "golden"), GOLDEN, ids=lambda v: type(v).__name__)
def test_golden_encode(payload: object, golden: str) -> None:
    assert encode(payload) == bytes.fromhex(golden)


@pytest.mark.parametrize(("payload", "golden"), GOLDEN, ids=lambda v: type(v).__name__)
def test_golden_decode(payload: object, golden: str) -> None:
    assert decode(type(payload), bytes.fromhex(golden)) == payload


def test_schema_defaults_follow_kafka() -> None:
    request = c.LeaderAndIsrRequest(
        controller_id=0, controller_epoch=1, topic_states=(), live_leaders=()
    )
    assert request.broker_epoch == -1
    assert request.type == c.LeaderAndIsrType.INCREMENTAL
    state = c.StopReplicaPartitionState(partition_index=0, delete_partition=False)
    assert state.leader_epoch == -1
    assert c.ControlledShutdownRequest(broker_id=1).broker_epoch == -1
    assert c.UpdateMetadataBroker(id=1, endpoints=()).rack is None


def test_zero_topic_id_is_none() -> None:
    state = c.UpdateMetadataTopicState(topic_name="t", topic_id=None, partition_states=())
    assert encode(state) == bytes.fromhex("0274" + "00" * 16 + "01 00")


@pytest.mark.parametrize(
    ("key", "version", "request_type", "response_type"),
    [
        (4, 5, c.LeaderAndIsrRequest, c.LeaderAndIsrResponse),
        (5, 3, c.StopReplicaRequest, c.StopReplicaResponse),
        (6, 7, c.UpdateMetadataRequest, c.UpdateMetadataResponse),
        (7, 3, c.ControlledShutdownRequest, c.ControlledShutdownResponse),
    ],
)
def test_class_attributes(key: int, version: int, request_type: type, response_type: type) -> None:
    assert c.REQUEST_TYPES[key, version] is request_type
    assert c.RESPONSE_TYPES[key, version] is response_type
    for schema, entity_type, header in (
        (request_type, EntityType.request, RequestHeaderV2),
        (response_type, EntityType.response, ResponseHeaderV1),
    ):
        assert (schema.__api_key__, schema.__version__) == (key, version)
        assert schema.__flexible__ is True
        assert schema.__type__ is entity_type
        assert schema.__header_schema__ is header


def _nested_structs(schema: type) -> set[type]:
    found: set[type] = set()
    for f in dataclasses.fields(schema):
        for arg in (f.type, *typing.get_args(f.type)):
            if dataclasses.is_dataclass(arg) and arg not in found:
                found |= {arg} | _nested_structs(arg)
    return found


@pytest.mark.parametrize("message", [*c.REQUEST_TYPES.values(), *c.RESPONSE_TYPES.values()],
                         ids=lambda t: t.__name__)
def test_every_struct_of_a_message_carries_its_api_key_version_and_header(message: type) -> None:
    nested = _nested_structs(message)
    if message is not c.UpdateMetadataResponse and message is not c.ControlledShutdownRequest:
        assert nested, "the walk finds the message's structs"
    for struct in nested:
        assert struct.__type__ is EntityType.nested, struct
        assert (struct.__api_key__, struct.__version__) == (message.__api_key__, message.__version__)
        assert struct.__flexible__ is True
        assert struct.__header_schema__ is message.__header_schema__, struct
    for schema in (message, *nested):
        assert "__weakref__" not in dir(schema), f"{schema.__name__} is not fully slotted"


# --- round trips -------------------------------------------------------------------------

int8s = st.integers(-(2**7), 2**7 - 1)
int16s = st.integers(-(2**15), 2**15 - 1)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
names = st.text(max_size=12)
topic_ids = st.none() | st.uuids().filter(lambda u: u.int != 0)
ids = st.lists(int32s, max_size=4).map(tuple)
errors = st.sampled_from(ErrorCode)


def tuples(strategy: st.SearchStrategy[object]) -> st.SearchStrategy[tuple[object, ...]]:
    return st.lists(strategy, max_size=3).map(tuple)


leader_and_isr_requests = st.builds(
    c.LeaderAndIsrRequest,
    controller_id=int32s,
    controller_epoch=int32s,
    broker_epoch=int64s,
    type=int8s,
    topic_states=tuples(
        st.builds(
            c.LeaderAndIsrTopicState,
            topic_name=names,
            topic_id=topic_ids,
            partition_states=tuples(
                st.builds(
                    c.LeaderAndIsrPartitionState,
                    partition_index=int32s,
                    controller_epoch=int32s,
                    leader=int32s,
                    leader_epoch=int32s,
                    isr=ids,
                    zk_version=int32s,
                    replicas=ids,
                    adding_replicas=ids,
                    removing_replicas=ids,
                    is_new=st.booleans(),
                )
            ),
        )
    ),
    live_leaders=tuples(
        st.builds(c.LeaderAndIsrLiveLeader, broker_id=int32s, host_name=names, port=int32s)
    ),
)
leader_and_isr_responses = st.builds(
    c.LeaderAndIsrResponse,
    error_code=errors,
    topics=tuples(
        st.builds(
            c.LeaderAndIsrTopicError,
            topic_id=topic_ids,
            partition_errors=tuples(
                st.builds(c.LeaderAndIsrPartitionError, partition_index=int32s, error_code=errors)
            ),
        )
    ),
)
stop_replica_requests = st.builds(
    c.StopReplicaRequest,
    controller_id=int32s,
    controller_epoch=int32s,
    broker_epoch=int64s,
    topic_states=tuples(
        st.builds(
            c.StopReplicaTopicState,
            topic_name=names,
            partition_states=tuples(
                st.builds(
                    c.StopReplicaPartitionState,
                    partition_index=int32s,
                    leader_epoch=int32s,
                    delete_partition=st.booleans(),
                )
            ),
        )
    ),
)
stop_replica_responses = st.builds(
    c.StopReplicaResponse,
    error_code=errors,
    partition_errors=tuples(
        st.builds(
            c.StopReplicaPartitionError,
            topic_name=names,
            partition_index=int32s,
            error_code=errors,
        )
    ),
)
update_metadata_requests = st.builds(
    c.UpdateMetadataRequest,
    controller_id=int32s,
    controller_epoch=int32s,
    broker_epoch=int64s,
    topic_states=tuples(
        st.builds(
            c.UpdateMetadataTopicState,
            topic_name=names,
            topic_id=topic_ids,
            partition_states=tuples(
                st.builds(
                    c.UpdateMetadataPartitionState,
                    partition_index=int32s,
                    controller_epoch=int32s,
                    leader=int32s,
                    leader_epoch=int32s,
                    isr=ids,
                    zk_version=int32s,
                    replicas=ids,
                    offline_replicas=ids,
                )
            ),
        )
    ),
    live_brokers=tuples(
        st.builds(
            c.UpdateMetadataBroker,
            id=int32s,
            endpoints=tuples(
                st.builds(
                    c.UpdateMetadataEndpoint,
                    port=int32s,
                    host=names,
                    listener=names,
                    security_protocol=int16s,
                )
            ),
            rack=st.none() | names,
        )
    ),
)
update_metadata_responses = st.builds(c.UpdateMetadataResponse, error_code=errors)
controlled_shutdown_requests = st.builds(
    c.ControlledShutdownRequest, broker_id=int32s, broker_epoch=int64s
)
controlled_shutdown_responses = st.builds(
    c.ControlledShutdownResponse,
    error_code=errors,
    remaining_partitions=tuples(
        st.builds(c.RemainingPartition, topic_name=names, partition_index=int32s)
    ),
)

any_control_payload = st.one_of(
    leader_and_isr_requests,
    leader_and_isr_responses,
    stop_replica_requests,
    stop_replica_responses,
    update_metadata_requests,
    update_metadata_responses,
    controlled_shutdown_requests,
    controlled_shutdown_responses,
)


@given(any_control_payload)
def test_round_trip(payload: object) -> None:
    assert decode(type(payload), encode(payload)) == payload


@given(st.one_of(leader_and_isr_requests, update_metadata_requests))
@settings(max_examples=examples(100))
def test_fast_writers_match_kio(payload: object) -> None:
    """The hand-written writers for the two big control requests produce kio's exact bytes."""
    buf = io.BytesIO()
    entity_writer(type(payload))(buf, payload)
    assert c.FAST_WRITERS[type(payload)](payload) == buf.getvalue()
