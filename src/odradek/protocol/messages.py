"""Version-tolerant construction of kio message classes.

kio generates one module per API version.  ``build`` lets code write a response (or request)
once for many versions: fields a version lacks are dropped, millisecond integers become the
timedeltas kio expects and integer error codes become ``ErrorCode`` members.
"""

from __future__ import annotations

import datetime
import functools
import sys
import types
from dataclasses import fields
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode

__all__ = ["build", "request_module", "response_module"]

_ZERO = datetime.timedelta(0)


@functools.cache
def response_module(api_key: int, api_version: int) -> types.ModuleType:
    """The kio module holding an API version's response classes (nested ones included)."""
    return sys.modules[load_response_schema(api_key, api_version).__module__]


@functools.cache
def request_module(api_key: int, api_version: int) -> types.ModuleType:
    """The kio module holding an API version's request classes (nested ones included)."""
    return sys.modules[load_request_schema(api_key, api_version).__module__]


@functools.cache
def _field_info(cls: type) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    all_fields = fields(cls)
    names = frozenset(f.name for f in all_fields)
    timedeltas = frozenset(f.name for f in all_fields if f.metadata.get("kafka_type", "").startswith("timedelta"))
    errors = frozenset(f.name for f in all_fields if f.metadata.get("kafka_type") == "error_code")
    return names, timedeltas, errors


def build(cls: type, **values: Any) -> Any:
    """Instantiate a kio class with the fields its version has (see the module docstring)."""
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
