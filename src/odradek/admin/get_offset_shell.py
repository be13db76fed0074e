"""``odradek get-offsets``: Kafka 3.9's GetOffsetShell (kafka-get-offsets.sh).

Which partitions: ``--topic`` (a regular expression over topic names, commas as
alternatives) with ``--partitions`` (ids), or ``--topic-partitions`` (a list of
``TOPIC-REGEX:PARTITIONS`` rules: a number, ``N-M`` (M exclusive), ``N-``, ``-M`` or nothing
for all).  Which offset: ``--time`` -1/latest, -2/earliest, -3/max-timestamp,
-4/earliest-local, -5/latest-tiered, or a timestamp in ms.  Output: ``topic:partition:offset``,
sorted by the text ``topic-partition`` as Kafka's TreeMap does; partitions without such an
offset print nothing.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from odradek.admin.leaders import EARLIEST, LATEST, MAX_TIMESTAMP
from odradek.common import TopicPartition

__all__ = ["EARLIEST_LOCAL", "INTERNAL_TOPICS", "LATEST_TIERED", "GetOffsetShellError", "PartitionRule", "matching",
           "offset_lines", "parse_partitions", "parse_time", "parse_topic_partitions", "topic_pattern", "topic_rule"]

EARLIEST_LOCAL, LATEST_TIERED = -4, -5
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_RULE = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
_NAMED_TIMES = {"latest": LATEST, "earliest": EARLIEST, "max-timestamp": MAX_TIMESTAMP,
                "earliest-local": EARLIEST_LOCAL, "latest-tiered": LATEST_TIERED}
_INT_MAX = 2**31 - 1


class GetOffsetShellError(Exception):
    """Input the command refuses, in one line."""


@dataclass(frozen=True, slots=True)
class PartitionRule:
    """Topics whose name matches ``topic``; of them, partitions in ``ids`` (empty: any) or in
    ``[low, high)``."""

    topic: re.Pattern[str]
    ids: frozenset[int] = frozenset()
    low: int = 0
    high: int = _INT_MAX

    def allows_topic(self, topic: str) -> bool:
        return self.topic.fullmatch(topic) is not None

    def allows(self, tp: TopicPartition) -> bool:
        if not self.allows_topic(tp.topic):
            return False
        return tp.partition in self.ids if self.ids else self.low <= tp.partition < self.high


def topic_pattern(raw: str) -> re.Pattern[str]:
    # Kafka's IncludeList: commas are alternatives, spaces and surrounding quotes are dropped.
    regex = re.sub(r"""["']+$""", "", re.sub(r"""^["']+""", "", raw.strip().replace(",", "|").replace(" ", "")))
    try:
        return re.compile(regex)
    except re.error:
        raise GetOffsetShellError(f"{raw} is an invalid regex.") from None


def topic_rule(topic: str | None, partitions: Iterable[int]) -> PartitionRule:
    """The rule of ``--topic`` (None: every topic) and ``--partitions``."""
    return PartitionRule(topic_pattern(topic if topic is not None else ".*"), frozenset(partitions))


def parse_partitions(text: str | None) -> list[int]:
    """``--partitions 0,1``: the ids (none given: all)."""
    if not text:
        return []
    try:
        return [int(item) for item in text.split(",")]
    except ValueError:
        raise GetOffsetShellError("--partitions expects a comma separated list of numeric partition ids, "
                                  f"but received: {text}") from None


def parse_topic_partitions(text: str) -> list[PartitionRule]:
    """``--topic-partitions``: one rule per comma-separated item."""
    rules = []
    for spec in text.split(","):
        match = _RULE.fullmatch(spec)
        if match is None:
            raise GetOffsetShellError(f"Invalid rule specification: {spec}")
        topic, single, low, high = (g or None for g in match.groups())
        pattern = topic_pattern(topic or ".*")
        if single is not None:
            rules.append(PartitionRule(pattern, frozenset({int(single)})))
        else:
            rules.append(PartitionRule(pattern, low=int(low or 0), high=int(high) if high else _INT_MAX))
    return rules


def parse_time(text: str) -> int:
    """``--time``: the ListOffsets timestamp it stands for."""
    if text in _NAMED_TIMES:
        return _NAMED_TIMES[text]
    try:
        return int(text)
    except ValueError:
        raise GetOffsetShellError(
            f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or max-timestamp / "
            "-4 or earliest-local / -5 or latest-tiered, or a specified long format timestamp") from None


def matching(rules: Collection[PartitionRule], partitions: Mapping[str, Iterable[int]],
             exclude_internal: bool) -> list[TopicPartition]:
    """The partitions (of ``partitions``: topic -> ids) that a rule allows."""
    return [TopicPartition(topic, p) for topic, ids in partitions.items()
            if not (exclude_internal and topic in INTERNAL_TOPICS)
            for p in ids if any(rule.allows(TopicPartition(topic, p)) for rule in rules)]


def offset_lines(offsets: Mapping[TopicPartition, int]) -> list[str]:
    """``topic:partition:offset`` for each partition with an offset (not -1), in Kafka's order."""
    return [f"{tp.topic}:{tp.partition}:{offset}"
            for tp, offset in sorted(offsets.items(), key=lambda item: str(item[0])) if offset != -1]
