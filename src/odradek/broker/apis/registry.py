"""The table of implemented APIs: api key -> versions and handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from odradek.broker.server import KafkaServer
    from odradek.net.server import Request, Response

Handler = Callable[["KafkaServer", "Request"], "Response | Awaitable[Response]"]

__all__ = ["REGISTRY", "ApiSpec", "api"]


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
    from odradek.protocol.framing import decode_request

    return decode_request(request.frame)[1]


# ----------------------------------------------------------------------------- responses

import datetime  # noqa: E402
import functools  # noqa: E402
import sys  # noqa: E402
import types  # noqa: E402
from dataclasses import fields as _fields  # noqa: E402

from kio.index import load_response_schema  # noqa: E402
from kio.schema.errors import ErrorCode  # noqa: E402

_ZERO = datetime.timedelta(0)


@functools.cache
def response_module(api_key: int, api_version: int) -> types.ModuleType:
    """The kio module holding an API version's response classes (nested ones included)."""
    return sys.modules[load_response_schema(api_key, api_version).__module__]


@functools.cache
def _field_info(cls: type) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    names = frozenset(f.name for f in _fields(cls))
    timedeltas = frozenset(f.name for f in _fields(cls) if f.metadata.get("kafka_type", "").startswith("timedelta"))
    errors = frozenset(f.name for f in _fields(cls) if f.metadata.get("kafka_type") == "error_code")
    return names, timedeltas, errors


def build(cls: type, **values: Any) -> Any:
    """Instantiate a kio class with the fields its version has: fields the version lacks
    are dropped, millisecond integers become the timedeltas kio expects and integer error
    codes become ErrorCode members."""
    names, timedeltas, errors = _field_info(cls)
    kwargs = {}
    for key, value in values.items():
        if key not in names:
            continue
        if key in timedeltas and not isinstance(value, datetime.timedelta):
            value = datetime.timedelta(milliseconds=value or 0)
        elif key in errors and not isinstance(value, ErrorCode):
            value = ErrorCode(value)
        kwargs[key] = value
    for key in timedeltas:
        kwargs.setdefault(key, _ZERO)
    return cls(**kwargs)


def respond(request: Request, payload: Any) -> bytes:
    from odradek.protocol.framing import encode_response

    return encode_response(payload, request.header.correlation_id)
