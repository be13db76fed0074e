"""The line formats of Kafka 2.8's console producer and consumer, without I/O.

``LineReader`` is ConsoleProducer's LineMessageReader: each input line is a record's value,
or with ``parse.key=true`` its key, ``key.separator`` (a tab by default) and its value; a
line without the separator is refused ("No key found on line N: ...") unless
``ignore.error=true`` makes it a value without key.

``MessageFormatter`` is ConsoleConsumer's DefaultMessageFormatter: per record, the columns
``print.timestamp`` (``CreateTime:ms``), ``print.partition`` (``Partition:p``),
``print.offset`` (``Offset:o``), ``print.headers`` (``k:v`` joined by ``headers.separator``,
or ``NO_HEADERS``), ``print.key`` and ``print.value`` (on by default) asked for, joined by
``key.separator`` and ended by ``line.separator``; null keys and values print
``null.literal``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["ConsoleError", "LineReader", "MessageFormatter", "line_text", "parse_key_values",
           "timestamp_text"]

# librdkafka's and Kafka's timestamp types: 0 none, 1 create time, 2 log append time.
_TIMESTAMP_TYPES = {1: "CreateTime", 2: "LogAppendTime"}


class ConsoleError(Exception):
    """Input a console tool refuses, in one line."""


def parse_key_values(items: Iterable[str], option: str) -> dict[str, str]:
    """Repeated ``--property k=v`` options (Kafka's parseKeyValueArgs: split at the first '=',
    a key alone means an empty value)."""
    result = {}
    for item in items:
        key, _, value = item.partition("=")
        if not key:
            raise ConsoleError(f"{option} expects key=value, got {item!r}")
        result[key] = value
    return result


def _flag(props: Mapping[str, str], name: str, default: bool) -> bool:
    # Java's Boolean.parseBoolean: "true" in any case is true, anything else false.
    return props[name].strip().lower() == "true" if name in props else default


def line_text(raw: bytes) -> bytes:
    """A line read from a binary stream without its end (\\n or \\r\\n), as Java's
    BufferedReader.readLine gives it."""
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    return raw[:-1] if raw.endswith(b"\r") else raw


@dataclass(frozen=True, slots=True)
class LineReader:
    parse_key: bool = False
    key_separator: bytes = b"\t"
    ignore_error: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> LineReader:
        return cls(_flag(props, "parse.key", False), props.get("key.separator", "\t").encode(),
                   _flag(props, "ignore.error", False))

    def record(self, line: bytes, line_number: int) -> tuple[bytes | None, bytes]:
        """(key, value) of input line ``line_number`` (from 1)."""
        if not self.parse_key:
            return None, line
        at = line.find(self.key_separator)
        if at == -1:
            if self.ignore_error:
                return None, line
            raise ConsoleError(f"No key found on line {line_number}: {line.decode(errors='replace')}")
        return line[:at], line[at + len(self.key_separator):]


def timestamp_text(timestamp_type: int, timestamp: int) -> str:
    """``CreateTime:ms``, ``LogAppendTime:ms`` or ``NO_TIMESTAMP``."""
    kind = _TIMESTAMP_TYPES.get(timestamp_type)
    return f"{kind}:{timestamp}" if kind else "NO_TIMESTAMP"


@dataclass(frozen=True, slots=True)
class MessageFormatter:
    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> MessageFormatter:
        return cls(_flag(props, "print.timestamp", False), _flag(props, "print.partition", False),
                   _flag(props, "print.offset", False), _flag(props, "print.headers", False),
                   _flag(props, "print.key", False), _flag(props, "print.value", True),
                   props.get("key.separator", "\t").encode(), props.get("line.separator", "\n").encode(),
                   props.get("headers.separator", ",").encode(), props.get("null.literal", "null").encode())

    def format(self, *, timestamp_type: int, timestamp: int, partition: int, offset: int,
               headers: Sequence[tuple[str, bytes | None]], key: bytes | None, value: bytes | None) -> bytes:
        """One record as DefaultMessageFormatter writes it."""
        columns: list[bytes] = []
        if self.print_timestamp:
            columns.append(timestamp_text(timestamp_type, timestamp).encode())
        if self.print_partition:
            columns.append(b"Partition:%d" % partition)
        if self.print_offset:
            columns.append(b"Offset:%d" % offset)
        if self.print_headers:
            columns.append(self.headers_separator.join(
                k.encode() + b":" + (v if v is not None else self.null_literal) for k, v in headers)
                if headers else b"NO_HEADERS")
        if self.print_key:
            columns.append(key if key is not None else self.null_literal)
        if self.print_value:
            columns.append(value if value is not None else self.null_literal)
        if not columns:
            return b""
        # Every column but the last is followed by the key separator, the last by the line separator.
        return self.key_separator.join(columns) + self.line_separator
