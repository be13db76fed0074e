"""TxnOffsetCommit (key 28): a transactional producer's consumer offsets (KIP-98; v3 adds
KIP-447's member id, group instance id and generation).

The group coordinator validates and appends them as a transactional batch; they stay
pending until the transaction's marker (:meth:`GroupCoordinator.complete_txn`).

Authorization (KafkaApis, Kafka 2.8): Write on the transactional id, then Read on the group
(either refused fails every partition), then Read on each topic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.apis.authorization import authorized, unauthorized_names
from odradek.broker.apis.groups import group_allowed
from odradek.broker.apis.offsets_commit import by_topic, requested_offsets
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.common import now_ms
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import Operation, ResourceType

if TYPE_CHECKING:
    from odradek.broker.context import TransactionsContext
    from odradek.net.server import Request, Response


@api(ApiKey.TXN_OFFSET_COMMIT, "TxnOffsetCommit", 0, 3)
async def handle_txn_offset_commit(broker: TransactionsContext, request: Request) -> Response:
    body = decode_body(request)
    version = request.api_version
    now = now_ms()
    # Kafka's convertTxnOffsets: committed now, no expire timestamp.
    names = [t.name for t in body.topics]
    if broker.authorizer is None:
        refused = {}
    elif not authorized(broker, request, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        refused = dict.fromkeys(names, ErrorCode.transactional_id_authorization_failed)
    elif not group_allowed(broker, request, Operation.READ, body.group_id):
        refused = dict.fromkeys(names, ErrorCode.group_authorization_failed)
    else:
        refused = dict.fromkeys(unauthorized_names(broker, request, Operation.READ, ResourceType.TOPIC, names),
                                ErrorCode.topic_authorization_failed)
    order, errors, offsets = requested_offsets(broker.metadata_cache, body.topics, now, refused=refused)
    if offsets:
        errors.update(await broker.group_coordinator.txn_commit_offsets(
            body.group_id, body.producer_id, body.producer_epoch, getattr(body, "member_id", ""),
            getattr(body, "group_instance_id", None), getattr(body, "generation_id", -1), offsets))
    if version < 2:
        # Producers before 2.0 do not retry COORDINATOR_LOAD_IN_PROGRESS here (KAFKA-7296).
        errors = {tp: ErrorCode.coordinator_not_available if e == ErrorCode.coordinator_load_in_progress else e
                  for tp, e in errors.items()}
    m = response_module(ApiKey.TXN_OFFSET_COMMIT, version)
    topics = tuple(
        build(m.TxnOffsetCommitResponseTopic, name=topic, partitions=tuple(
            build(m.TxnOffsetCommitResponsePartition, partition_index=p, error_code=error) for p, error in parts))
        for topic, parts in by_topic((tp, errors[tp]) for tp in dict.fromkeys(order)).items())
    return respond(request, build(m.TxnOffsetCommitResponse, throttle_time=0, topics=topics))
