"""InitProducerId (key 22): producer ids for idempotent and transactional producers.

Without a transactional id a new id, at epoch 0, comes from the broker's
:class:`~odradek.broker.producer_id_manager.ProducerIdManager` on every request (a KIP-360
bump included, as Kafka); with one, from the transaction coordinator (epoch bumps, fencing,
KIP-360).

Authorization (KafkaApis): Write on the transactional id, or for an idempotent producer
IdempotentWrite on the cluster or (KIP-679, Kafka 2.8 and later) Write on some topic.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from odradek.broker.apis.authorization import (
    authorized,
    authorized_by_resource_type,
    cluster_authorized,
)
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import Operation, ResourceType

if TYPE_CHECKING:
    from odradek.broker.context import TransactionsContext
    from odradek.net.server import Request, Response


@api(ApiKey.INIT_PRODUCER_ID, "InitProducerId", 0, 4)
async def handle_init_producer_id(broker: TransactionsContext, request: Request) -> Response:
    body = decode_body(request)
    version = request.api_version
    m = response_module(ApiKey.INIT_PRODUCER_ID, version)
    producer_id = getattr(body, "producer_id", -1)
    epoch = getattr(body, "producer_epoch", -1)
    refused = None
    if body.transactional_id is not None:
        if not authorized(broker, request, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
            refused = ErrorCode.transactional_id_authorization_failed
    elif not (cluster_authorized(broker, request, Operation.IDEMPOTENT_WRITE)
              or authorized_by_resource_type(broker, request, Operation.WRITE, ResourceType.TOPIC)):
        refused = ErrorCode.cluster_authorization_failed
    if refused is not None:
        return respond(request, build(m.InitProducerIdResponse, error_code=refused, producer_id=-1, producer_epoch=-1))
    if body.transactional_id is not None:
        error, result_id, result_epoch = await _transactional(broker, body, producer_id, epoch)
        if error == ErrorCode.producer_fenced and version < 4:  # KIP-588
            error = ErrorCode.invalid_producer_epoch
        return respond(request, build(m.InitProducerIdResponse, error_code=error, producer_id=result_id,
                                      producer_epoch=result_epoch))
    # An idempotent producer gets a new id at epoch 0 whatever id and epoch it sends (Kafka's
    # TransactionCoordinator.handleInitProducerId): its KIP-360 "epoch bump" after lost
    # sequences starts a fresh producer, so no partition holds state of that id at that epoch.
    return respond(request, build(m.InitProducerIdResponse, error_code=ErrorCode.none,
                                  producer_id=await broker.producer_ids.next_id(), producer_epoch=0))


async def _transactional(broker: TransactionsContext, body: object, producer_id: int, epoch: int
                         ) -> tuple[ErrorCode, int, int]:
    # Both or neither of the KIP-360 fields (Kafka's handleInitProducerIdRequest).
    if (producer_id == -1) != (epoch == -1):
        return ErrorCode.invalid_request, -1, -1
    timeout = body.transaction_timeout  # type: ignore[attr-defined]
    timeout_ms = timeout // datetime.timedelta(milliseconds=1) if isinstance(timeout, datetime.timedelta) else timeout
    result = await broker.transaction_coordinator.init_producer_id(
        body.transactional_id, timeout_ms,  # type: ignore[attr-defined]
        None if producer_id == -1 else (producer_id, epoch))
    return result.error, result.producer_id, result.producer_epoch
