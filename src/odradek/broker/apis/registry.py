"""The table of implemented APIs: api key -> versions and handler."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from odradek.protocol.error_counts import count_errors
from odradek.protocol.framing import decode_request, encode_response
from odradek.protocol.messages import build, response_module

if TYPE_CHECKING:
    from odradek.net.server import Request, Response

# The first argument is the broker, as the handler's family Protocol (broker/context.py) sees it.
Handler = Callable[[Any, "Request"], "Response | Awaitable[Response]"]

__all__ = ["REGISTRY", "ApiSpec", "answer_when_done", "api", "build", "decode_body", "respond", "response_module"]

T = TypeVar("T")
H = TypeVar("H", bound=Handler)


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler


REGISTRY: dict[int, ApiSpec] = {}


def api(api_key: int, name: str, min_version: int, max_version: int) -> Callable[[H], H]:
    """Register ``handler`` for ``api_key`` in ``[min_version, max_version]``."""
    def register(handler: H) -> H:
        REGISTRY[api_key] = ApiSpec(api_key, name, min_version, max_version, handler)
        return handler
    return register


def decode_body(request: Request) -> Any:
    """The request's payload (kio or control-plane dataclass)."""
    return decode_request(request.frame)[1]


def answer_when_done(waited: asyncio.Future[T], encode: Callable[[T], Response]) -> asyncio.Future[Response]:
    """A future of the response that ``encode`` makes of ``waited``'s result, completed by a
    callback when ``waited`` is (a delayed operation's future), without a task in between.
    An exception (from ``waited`` or ``encode``) surfaces through the connection, as a
    failed handler's would; once the connection is gone, ``waited``'s result is dropped."""
    answer: asyncio.Future[Response] = waited.get_loop().create_future()

    def complete(done: asyncio.Future[T]) -> None:
        if answer.done():
            return  # cancelled: the connection closed meanwhile
        if done.cancelled():
            answer.cancel()
        elif (error := done.exception()) is not None:
            answer.set_exception(error)
        else:
            try:
                answer.set_result(encode(done.result()))
            except Exception as e:
                answer.set_exception(e)

    waited.add_done_callback(complete)
    return answer


def respond(request: Request, payload: Any) -> bytes:
    """The encoded response frame for ``request``; its error codes are counted when request
    metrics are on (``request.error_counts``)."""
    counts = request.error_counts
    if counts is not None:
        count_errors(counts, payload)
    return encode_response(payload, request.header.correlation_id)
