"""A response's error codes, counted (Kafka's ``AbstractResponse.errorCounts``), sans-IO.

Kafka's ``RequestChannel`` marks ``ErrorsPerSec{request, error}`` once for every error code a
response carries, NONE included: the top-level one and each topic's, partition's or group's.
Most of Kafka's ``errorCounts`` methods are exactly "every ErrorCode field"; here that rule is
taken from the schemas themselves (kio's and :mod:`odradek.protocol.control`'s field metadata,
``kafka_type == "error_code"``), so a response payload is counted by walking only the fields
that lead to an error code.  The walk reads the payload a handler built, never the encoded
bytes.  The hand-written Produce and Fetch responses count their partitions with
:func:`count_partition_errors`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from types import NoneType, UnionType
from typing import Any, Final, Protocol, Union, get_args, get_origin

__all__ = ["ErrorCounts", "count_error", "count_errors", "count_partition_errors"]

ErrorCounts = dict[int, int]  # error code -> how many times a response carried it

# How a field leads to error codes: it is one, holds a struct that has some, or an array of them.
_CODE: Final = 0
_STRUCT: Final = 1
_ARRAY: Final = 2


class _HasErrorCode(Protocol):
    @property
    def error_code(self) -> int: ...


def count_error(counts: ErrorCounts, code: int) -> None:
    """One occurrence of ``code``."""
    counts[code] = counts.get(code, 0) + 1


def count_partition_errors(counts: ErrorCounts, topics: Iterable[tuple[str, Sequence[_HasErrorCode]]]) -> None:
    """Each partition's error code, of (topic, partitions) as the hand-written encoders take them."""
    for _topic, partitions in topics:
        for partition in partitions:
            code = partition.error_code
            counts[code] = counts.get(code, 0) + 1


def count_errors(counts: ErrorCounts, payload: Any) -> None:
    """Every error code field of a response payload (kio or control dataclass), at any depth."""
    for name, kind in _plan(type(payload)):
        value = getattr(payload, name)
        if kind == _CODE:
            counts[value] = counts.get(value, 0) + 1
        elif value is None:
            continue
        elif kind == _STRUCT:
            count_errors(counts, value)
        else:
            for item in value:
                count_errors(counts, item)


@functools.cache
def _plan(schema: type) -> tuple[tuple[str, int], ...]:
    """The fields of ``schema`` that are, or lead to, error codes (cached per schema)."""
    plan: list[tuple[str, int]] = []
    for f in dataclasses.fields(schema):
        if f.metadata.get("kafka_type") == "error_code":
            plan.append((f.name, _CODE))
            continue
        kind = f.type
        if get_origin(kind) in (UnionType, Union):
            kind = next(arg for arg in get_args(kind) if arg is not NoneType)
        is_array = get_origin(kind) is tuple
        item = get_args(kind)[0] if is_array else kind
        if isinstance(item, type) and dataclasses.is_dataclass(item) and _plan(item):
            plan.append((f.name, _ARRAY if is_array else _STRUCT))
    return tuple(plan)
