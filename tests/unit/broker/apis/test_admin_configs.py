"""IncrementalAlterConfigs operations on a topic's overrides (KIP-339)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from odradek.broker.apis.admin_configs import APPEND, DELETE, SET, SUBTRACT, apply_incremental_ops
from odradek.protocol.errors import InvalidConfigError, InvalidRequestError


def op(name: str, operation: int, value: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(name=name, config_operation=operation, value=value)


def test_set_and_delete() -> None:
    current = {"retention.ms": "1000", "segment.ms": "5000"}
    assert apply_incremental_ops(current, [op("retention.ms", DELETE), op("max.message.bytes", SET, "10")]) == {
        "segment.ms": "5000", "max.message.bytes": "10"}
    assert current == {"retention.ms": "1000", "segment.ms": "5000"}  # not modified in place


def test_append_starts_from_the_topic_default_and_skips_duplicates() -> None:
    assert apply_incremental_ops({}, [op("cleanup.policy", APPEND, "compact,delete")]) == {"cleanup.policy": "delete,compact"}


def test_subtract() -> None:
    assert apply_incremental_ops({"cleanup.policy": "delete,compact"}, [op("cleanup.policy", SUBTRACT, "delete")]) == {
        "cleanup.policy": "compact"}


def test_append_to_a_non_list_config_is_refused() -> None:
    with pytest.raises(InvalidConfigError, match=re.escape("Config value append is not allowed for config key: retention.ms")):
        apply_incremental_ops({}, [op("retention.ms", APPEND, "1")])


@pytest.mark.parametrize(("ops", "message"), [
    ([op("retention.ms", SET, "1"), op("retention.ms", DELETE)], "duplicate config keys"),
    ([op("retention.ms", SET, None)], "Null value not supported"),
    ([op("retention.ms", 9, "1")], "Unknown config operation 9"),
])
def test_malformed_requests(ops: list[SimpleNamespace], message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        apply_incremental_ops({}, ops)
