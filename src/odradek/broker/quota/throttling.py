"""Where quotas meet the request path (Kafka's KafkaApis quota calls and KIP-219).

The broker's dispatcher hands a request to :func:`handle_with_quotas` instead of its handler
once any quota is set (with none, a request pays one attribute check).  Around the handler it
records what the produce and request quotas measure: a produce request's size in bytes, and
the time the handler took (``request_percentage``: percent of one thread's time).  A fetch
records its own response bytes (``apis/fetch.py``: a consumer over its quota gets an empty
response).  A throttled client gets its answer at once, carrying the throttle time, and its
connection is muted for that time (:func:`throttle`): no request of it is read until the time
is up.  Broker-to-broker requests (control requests, followers' fetches) are exempt.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from odradek.broker.apis.registry import answer_when_done
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.throttle_time import with_throttle_time

if TYPE_CHECKING:
    from odradek.broker.quota.quota_managers import QuotaManagers
    from odradek.net.kafka_channel import Request, Response

__all__ = ["client_of", "handle_with_quotas", "is_follower_fetch", "throttle"]

# Kafka's cluster actions: answered without recording or throttling (sendResponseExemptThrottle).
_EXEMPT: Final = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
                            ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS, ApiKey.ALTER_PARTITION})
_NANOS_TO_PERCENT: Final = 100 / 1e9  # a handler busy for a whole second is 100 %


def client_of(request: Request) -> tuple[str, str | None]:
    """Who a quota counts a request against: the connection's principal name and the client id."""
    return request.connection.principal.name, request.header.client_id


def throttle(request: Request, throttle_ms: int) -> None:
    """Mute the request's connection for ``throttle_ms`` from now (KIP-219), unless it is muted
    longer already."""
    connection = request.connection
    until_ns = time.monotonic_ns() + throttle_ms * 1_000_000
    muted = connection.channel.muted_until_ns
    if muted is None or until_ns > muted:
        connection.mute(until_ns)
    request.throttle_ms = throttle_ms  # RequestMetrics' ThrottleTimeMs


def handle_with_quotas(quotas: QuotaManagers, handler: Callable[[Any, Request], Any], broker: Any,
                       request: Request) -> Response | Awaitable[Response]:
    """Run ``handler`` under the produce and request quotas (see the module docstring)."""
    api_key = request.api_key
    if api_key in _EXEMPT or (api_key == ApiKey.FETCH and is_follower_fetch(request)):
        return handler(broker, request)
    user, client_id = client_of(request)
    throttle_ms = 0
    if api_key == ApiKey.PRODUCE and quotas.produce.enabled:
        throttle_ms = quotas.produce.record(user, client_id, len(request.frame))
    if not quotas.request.enabled:
        result = handler(broker, request)
    else:
        started = time.monotonic_ns()
        result = handler(broker, request)
        if result is not None:  # acks=0 produce: no answer and, as in Kafka, no request quota
            handler_ns = time.monotonic_ns() - started
            throttle_ms = max(throttle_ms, quotas.request.record(user, client_id, handler_ns * _NANOS_TO_PERCENT))
    if throttle_ms <= 0:
        return result
    throttle(request, throttle_ms)
    return _with_throttle_time(result, request, throttle_ms)


def is_follower_fetch(request: Request) -> bool:
    """A Fetch from a replica (its replica id, the body's first field, is a broker id)."""
    offset = request.body_offset
    return int.from_bytes(request.frame[offset:offset + 4], "big", signed=True) >= 0


def _with_throttle_time(result: Any, request: Request, throttle_ms: int) -> Response | Awaitable[Response]:
    api_key, version = request.api_key, request.api_version
    if isinstance(result, asyncio.Future):
        return answer_when_done(result, lambda response: with_throttle_time(response, api_key, version, throttle_ms))
    if inspect.isawaitable(result):
        return _awaited(result, api_key, version, throttle_ms)
    return with_throttle_time(result, api_key, version, throttle_ms)


async def _awaited(result: Awaitable[Response], api_key: int, version: int, throttle_ms: int) -> Response:
    return with_throttle_time(await result, api_key, version, throttle_ms)
