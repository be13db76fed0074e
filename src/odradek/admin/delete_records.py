"""``odradek delete-records``: Kafka's DeleteRecordsCommand (kafka-delete-records.sh, 2.8).

The offset JSON file names partitions and the offset before which their records go
(``{"partitions": [{"topic": "t", "partition": 0, "offset": 5}], "version": 1}``; offset -1
means the high watermark).  The output is Kafka's: "Executing records delete operation",
"Records delete operation completed:", then a line per partition, with its new low watermark
or the Java exception its error becomes, in the order Kafka's admin client's hash map gives.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from odradek.admin.hash_map_order import java_hash_map_order, java_topic_partition_hashcode
from odradek.admin.kafka_errors import exception_text
from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode

__all__ = ["DeleteRecordsCommandError", "completed_lines", "parse_offset_json"]

_VERSION = 1


class DeleteRecordsCommandError(Exception):
    """An offset JSON file the command refuses, in one line."""


def _field(item: Mapping[str, Any], name: str, kind: type) -> Any:
    if name not in item:
        raise DeleteRecordsCommandError(f"No such field exists: `{name}`")
    value = item[name]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise DeleteRecordsCommandError(f"Expected `{name}` to be an integer, got {json.dumps(value)}")
    if kind is str and not isinstance(value, str):
        raise DeleteRecordsCommandError(f"Expected `{name}` to be a string, got {json.dumps(value)}")
    return value


def parse_offset_json(text: str) -> dict[TopicPartition, int]:
    """The partitions and offsets of an offset JSON file, in the file's order; refuses what
    Kafka's tool refuses (no JSON object, another version, a missing field, a partition named
    twice)."""
    try:
        data = json.loads(text) if text.strip() else None
    except json.JSONDecodeError as e:
        raise DeleteRecordsCommandError(f"the offset JSON file is not JSON: {e}") from None
    if not isinstance(data, dict):
        raise DeleteRecordsCommandError(f"Expected JSON object, received {text.strip()[:60]}")
    version = data.get("version", _VERSION)
    if version != _VERSION:
        raise DeleteRecordsCommandError(f"Not supported version field value {json.dumps(version)}")
    items = data.get("partitions", [])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise DeleteRecordsCommandError("Expected `partitions` to be an array of JSON objects")
    pairs = [(TopicPartition(_field(i, "topic", str), _field(i, "partition", int)), _field(i, "offset", int))
             for i in items]
    seen: set[TopicPartition] = set()
    duplicates = list(dict.fromkeys(tp for tp, _ in pairs if tp in seen or seen.add(tp)))  # type: ignore[func-returns-value]
    if duplicates:
        raise DeleteRecordsCommandError("Offset json file contains duplicate topic partitions: "
                                        + ",".join(map(str, duplicates)))
    return dict(pairs)


def completed_lines(answers: Mapping[TopicPartition, tuple[ErrorCode, int]]) -> list[str]:
    """The lines after "Records delete operation completed:", one per partition of ``answers``
    (given in the file's order)."""
    order = java_hash_map_order(answers, lambda tp: java_topic_partition_hashcode(*tp), len(answers))
    lines = []
    for tp in order:
        error, low_watermark = answers[tp]
        lines.append(f"partition: {tp}\tlow_watermark: {low_watermark}" if error == ErrorCode.none
                     else f"partition: {tp}\terror: {exception_text(error)}")
    return lines
