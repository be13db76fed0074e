"""InitProducerId (key 22): producer ids for idempotent producers.

Ids come from the broker's :class:`~odradek.broker.producer_id_manager.ProducerIdManager`.
Transactional producers are refused: this broker has no transaction coordinator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.context import BrokerContext
    from odradek.net.server import Request, Response

_MAX_EPOCH = 32767


@api(ApiKey.INIT_PRODUCER_ID, "InitProducerId", 0, 4)
async def handle_init_producer_id(broker: BrokerContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.INIT_PRODUCER_ID, request.api_version)
    if body.transactional_id is not None:
        return respond(request, build(m.InitProducerIdResponse, error_code=ErrorCode.transactional_id_authorization_failed,
                                      producer_id=-1, producer_epoch=-1))
    producer_id = getattr(body, "producer_id", -1)
    epoch = getattr(body, "producer_epoch", -1)
    if producer_id >= 0 and 0 <= epoch < _MAX_EPOCH:
        # KIP-360: an idempotent producer that lost track of its sequences bumps its epoch.
        result_id, result_epoch = producer_id, epoch + 1
    else:
        result_id, result_epoch = await broker.producer_ids.next_id(), 0
    return respond(request, build(m.InitProducerIdResponse, error_code=ErrorCode.none,
                                  producer_id=result_id, producer_epoch=result_epoch))
