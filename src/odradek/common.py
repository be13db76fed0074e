"""Names shared by every layer: topic partitions, Kafka's rules for topic names (Kafka's
org.apache.kafka.common.TopicPartition and common.internals.Topic) and the clock."""

from __future__ import annotations

import re
import time
from typing import NamedTuple

from odradek.protocol.errors import InvalidTopicError

__all__ = ["INTERNAL_TOPICS", "MAX_NAME_LENGTH", "TopicPartition", "has_collision_chars", "monotonic_ms",
           "now_ms", "set_clock_skew_ms", "unify_collision_chars", "validate_topic_name"]

_clock_skew_ms = 0  # what a clock fault adds to the wall clock (broker/clock_skew.py); 0 otherwise


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch (Kafka's ``Time.milliseconds``): what record
    timestamps, znode timestamps, retention and expiry are measured in."""
    return time.time_ns() // 1_000_000 + _clock_skew_ms


def set_clock_skew_ms(skew_ms: int) -> None:
    """Step this process's wall clock (``now_ms``) ``skew_ms`` away from the system's: the
    nemesis's clock faults, through broker/clock_skew.py. Intervals (``monotonic_ms``, the
    event loop's timers) are not affected, as a real clock step does not affect them."""
    global _clock_skew_ms
    _clock_skew_ms = skew_ms


def monotonic_ms() -> int:
    """Milliseconds of a clock that never steps back, for intervals only (idle times)."""
    return time.monotonic_ns() // 1_000_000


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


MAX_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(topic: str) -> None:
    """Kafka's Topic.validate; raises InvalidTopicError (INVALID_TOPIC_EXCEPTION)."""
    if not topic:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if topic in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(topic) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {topic}")
    if not _LEGAL.match(topic):
        raise InvalidTopicError(
            f'Topic name "{topic}" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'")


def has_collision_chars(topic: str) -> bool:
    return "." in topic or "_" in topic


def unify_collision_chars(topic: str) -> str:
    """'.' and '_' collide in metric names, so topics equal under this mapping cannot coexist."""
    return topic.replace(".", "_")
