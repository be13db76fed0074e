"""What ``odradek console-producer`` and ``console-consumer`` share: the Kafka client they
run on (confluent-kafka's librdkafka, as the perf tools: group membership and transactions
isolation come with it) and their client properties, Kafka's names passed through to
librdkafka, which shares most of them."""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

from odradek.admin.console import ConsoleError, parse_key_values
from odradek.cli.common import fail, read_properties

__all__ = ["client_config", "confluent_kafka", "error_text"]


def confluent_kafka() -> ModuleType:
    """The confluent_kafka module; fail() with one line naming the extra that installs it."""
    try:
        import confluent_kafka as module
    except ImportError:
        fail("the console tools need confluent-kafka: pip install 'odradek[spark]'")
    return module


def client_config(bootstrap_server: str | None, config_file: str | None, properties: tuple[str, ...],
                  option: str, defaults: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka's configuration: ``defaults``, then the ``--*.config`` file, then the repeated
    ``--*-property k=v`` options, and the bootstrap servers; bad input fails with one line."""
    if bootstrap_server is None or not bootstrap_server.strip():
        fail("Missing required argument \"[bootstrap-server]\"")
    config: dict[str, Any] = dict(defaults)
    if config_file is not None:
        config.update(read_properties(config_file))
    try:
        config.update(parse_key_values(properties, option))
    except ConsoleError as e:
        fail(str(e))
    # Java serializers and deserializers have no librdkafka counterpart: bytes in, bytes out.
    for java_only in ("key.serializer", "value.serializer", "key.deserializer", "value.deserializer"):
        config.pop(java_only, None)
    config["bootstrap.servers"] = bootstrap_server
    return config


def error_text(e: BaseException) -> str:
    """A confluent-kafka exception as its message alone (a KafkaException wraps a KafkaError)."""
    inner = e.args[0] if e.args else None
    return inner.str() if hasattr(inner, "str") else str(e)
