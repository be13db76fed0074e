"""Responses as plain trees, what legitimately differs between two clusters normalised away,
and the field-by-field differences that remain.

A decoded response (a kio dataclass, or a dict or list of them for a sequence of requests)
becomes a tree of dicts, lists and scalars (:func:`to_tree`). :class:`Normaliser` rewrites
what two clusters may answer differently without either being wrong: throttle times, cluster
and topic ids, hosts and ports, generated member, producer and session ids (named by order of
appearance, so that "the same id twice" survives), wall-clock times. :func:`diff` then lists
each path where the two trees still differ; lists of named items (topics by name, partitions
by index, configs by name, ...) are compared by name, so one missing item is one difference
and not a shifted tail.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.protocol.records import decode_batch, iter_batches

__all__ = ["ZERO_UUID", "Difference", "Normaliser", "diff", "to_tree"]

ZERO_UUID = "00000000-0000-0000-0000-000000000000"

Tree = Any  # dict[str, Tree] | list[Tree] | str | int | bytes | bool | None


def to_tree(value: Any) -> Tree:
    """A kio payload (or a dict, list or tuple of them) as dicts, lists and scalars:
    enums by name, durations in milliseconds, UUIDs as strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_tree(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_tree(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)  # kio's i32 and friends
    return value


# --- normalisation -------------------------------------------------------------------------


class Normaliser:
    """Rewrites one cluster's trees so that what legitimately differs reads the same.

    ``topic_names`` maps this cluster's topic ids to names (a topic id becomes
    ``<id:name>``); ``controller`` is this cluster's controller; ids a cluster generates
    (member ids, producer ids, fetch sessions) become ``<member-1>``, ``<producer-1>``... in
    order of first appearance within one case, on each side alike.
    """

    # Fields whose value is the same on both sides only by accident.
    ERASED = {
        "throttle_time": 0,
        "throttle_time_ms": 0,
        "host": "<host>",
        "port": "<port>",
        "cluster_id": "<cluster-id>",
        # a Kafka-generated transaction start, group rebalance or log time
        "transaction_start_time": "<time>",
        "log_append_time": "<time>",
    }
    # Free text (null, empty or a sentence): clients show it when present, the error code's
    # own description otherwise.
    FREE_TEXT = frozenset({"error_message", "batch_index_error_message"})
    # Generated ids, named by order of appearance.
    ALIASED = {"member_id": "member", "leader": "member", "producer_id": "producer", "session_id": "session"}

    def __init__(self, topic_names: Callable[[str], str | None], controller: Callable[[], int]) -> None:
        self._topic_names = topic_names
        self._controller = controller
        self._aliases: dict[tuple[str, Any], str] = {}

    def alias(self, kind: str, value: Any) -> str:
        """The stable name of a generated id within this case."""
        key = (kind, value)
        if key not in self._aliases:
            count = sum(1 for k, _ in self._aliases if k == kind) + 1
            self._aliases[key] = f"<{kind}-{count}>"
        return self._aliases[key]

    def __call__(self, tree: Tree) -> Tree:
        return self._walk(tree)

    def _walk(self, tree: Tree) -> Tree:
        if isinstance(tree, list):
            return [self._walk(v) for v in tree]
        if not isinstance(tree, dict):
            return tree
        return {k: self._field(k, v) for k, v in tree.items()}

    def _field(self, name: str, value: Tree) -> Tree:
        if name == "records" and isinstance(value, bytes):
            return self._walk(_batches(value))
        if isinstance(value, dict | list):
            return self._walk(value)
        if name in self.FREE_TEXT:
            return None
        if name in self.ERASED and value not in (None, -1, "", 0):
            return self.ERASED[name]
        if name == "topic_id" and isinstance(value, str) and value != ZERO_UUID:
            topic = self._topic_names(value)
            return f"<id:{topic}>" if topic is not None else "<unknown topic id>"
        if name == "controller_id" and isinstance(value, int) and value >= 0:
            return "<controller>" if value == self._controller() else value
        kind = self.ALIASED.get(name)
        if name == "leader" and not isinstance(value, str):
            kind = None  # a broker id, not JoinGroup's leading member
        if kind is not None and value not in (None, "", -1, 0):
            return self.alias(kind, value)
        return value


def _batches(records: bytes) -> list[dict[str, Any]]:
    """A fetched record set as its batches (headers and records), a cut last batch as such."""
    out: list[dict[str, Any]] = []
    end = 0
    for pos, header in iter_batches(records, partial_tail_ok=True):
        _, decoded = decode_batch(records[pos:pos + header.size])
        fields = header._asdict()
        del fields["crc"]  # covers the producer id, which is aliased
        rows = [dataclasses.asdict(r) for r in decoded]
        if header.is_control:  # a transaction marker, stamped when the coordinator wrote it
            fields.update(base_timestamp="<time>", max_timestamp="<time>")
            rows = [{**row, "timestamp": "<time>"} for row in rows]
        out.append({**fields, "records": rows})
        end = pos + header.size
    if end < len(records):
        out.append({"partial_batch_bytes": len(records) - end})
    return out


# --- comparison ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Difference:
    """One path where the two trees differ (``MISSING`` for a key only one side has)."""

    path: str
    kafka: Any
    odradek: Any

    def __str__(self) -> str:
        return f"{self.path}: kafka={_short(self.kafka)} odradek={_short(self.odradek)}"


MISSING = "<missing>"

# Fields that name the items of a list, most specific first: a list of dicts that all carry
# one of them, with distinct values, is compared as a mapping from that field.
_ITEM_NAMES = ("api_key", "name", "topic", "topic_name", "resource_name", "partition_index", "partition", "index",
               "group_id", "transactional_id", "key", "user", "node_id", "broker_id", "member_id")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _item_name(*sides: list[Any]) -> str | None:
    """The field naming the items of both lists, if there is one."""
    items = [i for side in sides for i in side]
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for field in _ITEM_NAMES:
        if all(field in i for i in items) and all(
                len({repr(i[field]) for i in side}) == len(side) for side in sides):
            return field
    return None


def _keyed(items: list[Any], field: str) -> dict[str, Any]:
    return {str(i[field]): i for i in items}


def diff(kafka: Tree, odradek: Tree, path: str = "") -> list[Difference]:
    """Every path where the two normalised trees differ."""
    if isinstance(kafka, dict) and isinstance(odradek, dict):
        out: list[Difference] = []
        for key in list(kafka) + [k for k in odradek if k not in kafka]:
            sub = f"{path}.{key}" if path else key
            if key not in odradek:
                out.append(Difference(sub, kafka[key], MISSING))
            elif key not in kafka:
                out.append(Difference(sub, MISSING, odradek[key]))
            else:
                out += diff(kafka[key], odradek[key], sub)
        return out
    if isinstance(kafka, list) and isinstance(odradek, list):
        field = _item_name(kafka, odradek) if kafka and odradek else None
        if field is not None:
            return _diff_keyed(_keyed(kafka, field), _keyed(odradek, field), path)
        out = [] if len(kafka) == len(odradek) else [Difference(f"{path}.length", len(kafka), len(odradek))]
        for i, (a, b) in enumerate(zip(kafka, odradek, strict=False)):
            out += diff(a, b, f"{path}[{i}]")
        return out
    if kafka != odradek:
        return [Difference(path, kafka, odradek)]
    return []


def _diff_keyed(kafka: dict[str, Any], odradek: dict[str, Any], path: str) -> list[Difference]:
    out: list[Difference] = []
    for key in list(kafka) + [k for k in odradek if k not in kafka]:
        sub = f"{path}[{key}]"
        if key not in odradek:
            out.append(Difference(sub, kafka[key], MISSING))
        elif key not in kafka:
            out.append(Difference(sub, MISSING, odradek[key]))
        else:
            out += diff(kafka[key], odradek[key], sub)
    return out


# --- path patterns -------------------------------------------------------------------------


def path_pattern(pattern: str) -> re.Pattern[str]:
    """A path glob as a regex: ``[*]`` matches any one name or index (dots included, as in a
    config's name), ``*`` any part of one field name, ``**`` anything across levels."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern.startswith("[*]", i):
            out.append(r"\[[^\]]*\]")
            i += 3
        elif pattern[i] == "*":
            out.append(r"[^.\[\]]*")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def matching(differences: Iterable[Difference], pattern: str) -> list[Difference]:
    """The differences whose path the glob ``pattern`` matches."""
    regex = path_pattern(pattern)
    return [d for d in differences if regex.fullmatch(d.path)]
