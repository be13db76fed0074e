"""The table of implemented APIs: api key -> versions and handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from odradek.protocol.framing import decode_request, encode_response
from odradek.protocol.messages import build, response_module

if TYPE_CHECKING:
    from odradek.broker.context import BrokerContext
    from odradek.net.server import Request, Response

Handler = Callable[["BrokerContext", "Request"], "Response | Awaitable[Response]"]

__all__ = ["REGISTRY", "ApiSpec", "api", "build", "decode_body", "respond", "response_module"]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler


REGISTRY: dict[int, ApiSpec] = {}


def api(api_key: int, name: str, min_version: int, max_version: int) -> Callable[[Handler], Handler]:
    """Register ``handler`` for ``api_key`` in ``[min_version, max_version]``."""
    def register(handler: Handler) -> Handler:
        REGISTRY[api_key] = ApiSpec(api_key, name, min_version, max_version, handler)
        return handler
    return register


def decode_body(request: Request) -> Any:
    """The request's payload (kio or control-plane dataclass)."""
    return decode_request(request.frame)[1]


def respond(request: Request, payload: Any) -> bytes:
    """The encoded response frame for ``request``."""
    return encode_response(payload, request.header.correlation_id)
