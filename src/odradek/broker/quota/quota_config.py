"""The client quota keys (Kafka 2.8's QuotaConfigs: DynamicConfig.Client and the quota keys of
DynamicConfig.User), their values as ZooKeeper stores them, and Java's ``Double.toString``,
in which Kafka writes and prints quota values.

``producer_byte_rate`` and ``consumer_byte_rate`` are LONG keys: a value must be a whole number
(within 1e-6, Kafka's test, which also refuses negative whole numbers); ``request_percentage``
is a DOUBLE (a share of one request-handler thread, in percent).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum

__all__ = ["QUOTA_KEYS", "QuotaConfigError", "QuotaKey", "QuotaType", "java_double_string", "quota_bounds",
           "quota_value_string"]


class QuotaType(Enum):
    """Which quota manager a key feeds (Kafka's ClientQuotaType)."""

    PRODUCE = "producer_byte_rate"
    FETCH = "consumer_byte_rate"
    REQUEST = "request_percentage"


@dataclass(frozen=True, slots=True)
class QuotaKey:
    name: str
    integral: bool  # LONG (else DOUBLE)
    quota_type: QuotaType


QUOTA_KEYS: Mapping[str, QuotaKey] = {key.name: key for key in (
    QuotaKey("producer_byte_rate", True, QuotaType.PRODUCE),
    QuotaKey("consumer_byte_rate", True, QuotaType.FETCH),
    QuotaKey("request_percentage", False, QuotaType.REQUEST),
)}

_EPSILON = 1e-6


class QuotaConfigError(ValueError):
    """A quota key or value Kafka refuses (INVALID_REQUEST); the message is Kafka's."""


def quota_value_string(key: str, value: float) -> str:
    """How ZooKeeper stores ``value`` for ``key`` (``10485760``, ``12.5``), checked as Kafka's
    ZkAdminManager.alterClientQuotas checks it."""
    spec = QUOTA_KEYS.get(key)
    if spec is None:
        raise QuotaConfigError(f"Invalid configuration key {key}")
    if not spec.integral:
        return java_double_string(value)
    # Kafka truncates value + epsilon toward zero and refuses what moved by more than epsilon.
    whole = math.trunc(value + _EPSILON) if math.isfinite(value) else None
    if whole is None or abs(whole - value) > _EPSILON or not -2**63 <= whole < 2**63:
        raise QuotaConfigError(f"Configuration {key} must be a LONG value")
    return str(whole)


def quota_bounds(config: Mapping[str, str]) -> dict[QuotaType, float]:
    """The quotas an entity's stored config sets (other keys, e.g. SCRAM credentials, are not
    quotas); a value that does not parse is left out."""
    bounds = {}
    for key, spec in QUOTA_KEYS.items():
        text = config.get(key)
        if text is None:
            continue
        try:
            bounds[spec.quota_type] = float(text)
        except ValueError:
            continue
    return bounds


def java_double_string(value: float) -> str:
    """Java's ``Double.toString``: plain decimals from 10^-3 up to 10^7 (``12.5``, ``1024.0``),
    computerized scientific notation outside (``1.048576E7``), the shortest digits that
    read back as the same double."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    exact = Decimal(repr(abs(value))).normalize()
    _, digit_tuple, exponent = exact.as_tuple()
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + int(exponent)  # digits before the decimal point
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        whole = digits[:point].ljust(point, "0")
        return f"{sign}{whole}.{digits[point:] or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"
