"""The client quota keys, their stored values and Java's Double.toString (broker/quota/quota_config.py)."""

from __future__ import annotations

import pytest

from odradek.broker.quota.quota_config import (
    QuotaConfigError,
    QuotaType,
    java_double_string,
    quota_bounds,
    quota_value_string,
)


@pytest.mark.parametrize(("value", "text"), [
    (12.5, "12.5"), (1024.0, "1024.0"), (1000000.0, "1000000.0"), (9999999.0, "9999999.0"),
    (1e7, "1.0E7"), (10485760.0, "1.048576E7"), (123456789.125, "1.23456789125E8"),
    (0.001, "0.001"), (0.0001, "1.0E-4"), (0.1, "0.1"), (-3.0, "-3.0"), (0.0, "0.0"), (-0.0, "-0.0"),
    (float("inf"), "Infinity"), (float("nan"), "NaN"),
])
def test_doubles_print_as_java_prints_them(value: float, text: str) -> None:
    assert java_double_string(value) == text


def test_byte_rates_are_stored_as_whole_numbers_and_percentages_as_doubles() -> None:
    assert quota_value_string("producer_byte_rate", 10485760.0) == "10485760"
    assert quota_value_string("consumer_byte_rate", 2048.0000001) == "2048"
    assert quota_value_string("request_percentage", 50.0) == "50.0"
    assert quota_value_string("request_percentage", -3.0) == "-3.0"  # Kafka 2.8 does not refuse it either


@pytest.mark.parametrize(("key", "value", "message"), [
    ("producer_byte_rate", 1.5, "Configuration producer_byte_rate must be a LONG value"),
    ("consumer_byte_rate", -5.0, "Configuration consumer_byte_rate must be a LONG value"),
    ("consumer_byte_rate", float("inf"), "Configuration consumer_byte_rate must be a LONG value"),
    ("producer_byte_rate", 1e30, "Configuration producer_byte_rate must be a LONG value"),
    ("foo", 1.0, "Invalid configuration key foo"),
    ("SCRAM-SHA-256", 1.0, "Invalid configuration key SCRAM-SHA-256"),
])
def test_what_kafka_refuses(key: str, value: float, message: str) -> None:
    with pytest.raises(QuotaConfigError, match=f"^{message}$"):
        quota_value_string(key, value)


def test_a_stored_config_gives_its_quotas_and_nothing_else() -> None:
    stored = {"producer_byte_rate": "1024", "request_percentage": "12.5", "consumer_byte_rate": "junk",
              "SCRAM-SHA-512": "salt=...,stored_key=...,server_key=...,iterations=4096"}
    assert quota_bounds(stored) == {QuotaType.PRODUCE: 1024.0, QuotaType.REQUEST: 12.5}
