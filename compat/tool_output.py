"""Reading what Kafka's tools print (sans-IO): the column tables of kafka-consumer-groups and
kafka-transactions, kafka-topics' descriptions, kafka-broker-api-versions' per-broker lists,
and the UnsupportedVersionException a tool reports for an API the broker lacks."""

from __future__ import annotations

import re

__all__ = ["api_versions", "table", "topic_description", "unsupported_api"]

_API_LINE = re.compile(r"^\s*(\w+)\((\d+)\): (?:(\d+)(?: to (\d+))? \[usable: \d+\]|(UNSUPPORTED))")
_BROKER_LINE = re.compile(r"^\S+ \(id: (\d+) rack: \S+\) -> \($")


def table(text: str, first_column: str) -> list[dict[str, str]]:
    """The rows under the first header line starting with ``first_column``, as dicts of that
    header's columns (whitespace-separated; a blank line or a line of another shape ends it)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        header = line.split()
        if header and header[0] == first_column:
            rows = []
            for row in lines[i + 1:]:
                values = row.split()
                if len(values) != len(header):
                    break
                rows.append(dict(zip(header, values, strict=True)))
            return rows
    return []


def _fields(line: str) -> dict[str, str]:
    return {key.strip(): value.strip() for key, _, value in
            (part.partition(":") for part in line.strip().split("\t")) if key.strip()}


def topic_description(text: str, topic: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """kafka-topics --describe of ``topic``: its summary line's fields (``PartitionCount``,
    ``ReplicationFactor``, ``Configs``...) and one dict per partition line (``Partition``,
    ``Leader``, ``Replicas``, ``Isr``...); ({}, []) when it is not described."""
    summary: dict[str, str] = {}
    partitions = []
    for line in text.splitlines():
        fields = _fields(line)
        if fields.get("Topic") != topic:
            continue
        if "Partition" in fields:
            partitions.append(fields)
        elif "PartitionCount" in fields:
            summary = fields
    return summary, partitions


def api_versions(text: str) -> dict[int, dict[str, tuple[int, int, int] | None]]:
    """kafka-broker-api-versions: per broker id, each API's (key, min, max), None when the
    broker does not support it."""
    brokers: dict[int, dict[str, tuple[int, int, int] | None]] = {}
    current: dict[str, tuple[int, int, int] | None] | None = None
    for line in text.splitlines():
        if match := _BROKER_LINE.match(line):
            current = brokers.setdefault(int(match.group(1)), {})
        elif current is not None and (match := _API_LINE.match(line)):
            name, key, low, high, unsupported = match.groups()
            current[name] = None if unsupported else (int(key), int(low), int(high or low))
    return brokers


def unsupported_api(text: str) -> str | None:
    """The line of a tool's output that reports an UnsupportedVersionException (the broker
    lacks an API the tool called), or None (compat.suite.missing_api names the API from it)."""
    for line in text.splitlines():
        if "UnsupportedVersionException" in line:
            return line.strip()
    return None
