"""DescribeProducers (key 61, KIP-664): the active producers of partitions hosted here, as the
partition's producer state holds them (Kafka's KafkaApis.handleDescribeProducersRequest).
Read on the topic is required: TOPIC_AUTHORIZATION_FAILED otherwise."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from odradek.broker.apis.authorization import unauthorized_names
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import Operation, ResourceType

if TYPE_CHECKING:
    from odradek.broker.context import ProduceFetchContext
    from odradek.net.server import Request, Response


@api(ApiKey.DESCRIBE_PRODUCERS, "DescribeProducers", 0, 0)
def handle_describe_producers(broker: ProduceFetchContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.DESCRIBE_PRODUCERS, request.api_version)
    denied = unauthorized_names(broker, request, Operation.READ, ResourceType.TOPIC, (t.name for t in body.topics))
    topics = []
    for t in body.topics:
        parts = []
        for index in t.partition_indexes:
            found = (ErrorCode.topic_authorization_failed if t.name in denied
                     else broker.replica_manager.active_producers(t.name, index))
            if isinstance(found, ErrorCode):
                parts.append(build(m.PartitionResponse, partition_index=index, error_code=found,
                                   error_message=None, active_producers=()))
                continue
            producers = tuple(
                build(m.ProducerState, producer_id=e.producer_id, producer_epoch=e.producer_epoch,
                      last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
                      coordinator_epoch=e.coordinator_epoch,
                      current_txn_start_offset=-1 if e.current_txn_first_offset is None
                      else e.current_txn_first_offset)
                for e in found)
            parts.append(build(m.PartitionResponse, partition_index=index, error_code=ErrorCode.none,
                               error_message=None, active_producers=producers))
        topics.append(build(m.TopicResponse, name=t.name, partitions=tuple(parts)))
    return respond(request, build(m.DescribeProducersResponse, throttle_time=datetime.timedelta(0),
                                  topics=tuple(topics)))
