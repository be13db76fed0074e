"""Offsets of the `odradek` data source: checkpoint JSON, ranges, admission control.

Pure functions over plain data. A streaming offset is Spark's Kafka source format,
``{"topic": {"partition": offset}}`` with partitions as strings, always written in sorted
order so that two equal offsets serialize to the same JSON (Spark compares them as text).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

# Kafka's ListOffsets sentinels, also used in the JSON of startingOffsets / endingOffsets.
EARLIEST = -2
LATEST = -1

PartitionOffsets = Mapping["TopicPartition", int]


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class DataLossError(RuntimeError):
    """Offsets a query needs are gone (retention, deletion, truncation)."""


@dataclass(frozen=True)
class OffsetRange:
    """The records of one topic-partition with offsets in [start, end)."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def offsets_to_json(offsets: PartitionOffsets) -> dict[str, dict[str, int]]:
    """``{tp: offset}`` -> ``{"topic": {"partition": offset}}``, topics and partitions sorted."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return result


def offsets_from_json(data: object) -> dict[TopicPartition, int]:
    """The inverse of offsets_to_json, for offsets read back from Spark's checkpoint."""
    if not isinstance(data, dict):
        raise ValueError(f"odradek offset must be a JSON object, got {data!r}")
    result: dict[TopicPartition, int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise ValueError(f"odradek offset of topic {topic!r} must be an object: {parts!r}")
        for part, offset in parts.items():
            if not str(part).isdigit() or not isinstance(offset, int) or offset < 0:
                raise ValueError(f"bad odradek offset {topic!r}/{part!r}: {offset!r}")
            result[TopicPartition(topic, int(part))] = offset
    return result


def rate_limit(
    start: PartitionOffsets, latest: PartitionOffsets, max_offsets: int
) -> dict[TopicPartition, int]:
    """End offsets that admit at most ``max_offsets`` offsets past ``start`` in total.

    The budget is split across partitions in proportion to their backlog (as Spark's Kafka
    source does), after first granting one offset to every partition with a backlog so
    that small partitions are not starved by busy ones. Unlike Spark, the total never
    exceeds the limit. A partition missing from ``start`` appeared after the query
    started and begins at 0. Partitions without a backlog keep ``latest`` as it is.
    """
    backlog = {tp: end - start.get(tp, 0) for tp, end in latest.items() if end > start.get(tp, 0)}
    if sum(backlog.values()) <= max_offsets:
        return dict(latest)

    by_size = sorted(backlog, key=lambda tp: (-backlog[tp], tp))
    grant = dict.fromkeys(backlog, 0)
    for tp in by_size[:max_offsets]:
        grant[tp] = 1
    budget = max_offsets - min(max_offsets, len(by_size))
    if budget:
        rest = {tp: backlog[tp] - grant[tp] for tp in backlog}
        rest_total = sum(rest.values())  # > budget, since the whole backlog exceeds the limit
        shares = {tp: budget * rest[tp] / rest_total for tp in rest}
        floors = {tp: math.floor(share) for tp, share in shares.items()}
        left = budget - sum(floors.values())
        # Largest remainders first; each gets at most one more, which still fits its backlog.
        for tp in sorted(shares, key=lambda tp: (floors[tp] - shares[tp], tp))[:left]:
            floors[tp] += 1
        for tp in grant:
            grant[tp] += floors[tp]
    return {
        tp: (start.get(tp, 0) + grant[tp] if tp in grant else end) for tp, end in latest.items()
    }


def cap_offsets(latest: PartitionOffsets, target: PartitionOffsets) -> dict[TopicPartition, int]:
    """Latest offsets no further than ``target`` (Trigger.AvailableNow's fixed goal)."""
    return {tp: min(end, latest[tp]) for tp, end in target.items() if tp in latest}


def plan_ranges(
    start: PartitionOffsets,
    end: PartitionOffsets,
    earliest: PartitionOffsets,
    *,
    fail_on_data_loss: bool,
) -> tuple[list[OffsetRange], list[str]]:
    """The non-empty offset ranges between two offsets of a streaming query.

    Returns the ranges and the data-loss warnings; raises DataLossError instead when
    ``fail_on_data_loss``. Data loss is: a partition of ``start`` missing from ``end``
    (deleted), an end offset below the start offset (truncated log), or an earliest
    available offset above the start offset (retention or DeleteRecords removed it).
    A partition missing from ``start`` appeared later and is read from offset 0.
    """
    ranges: list[OffsetRange] = []
    losses: list[str] = []
    for tp in sorted(set(start) - set(end)):
        losses.append(f"partition {tp} is gone (topic deleted?)")
    for tp in sorted(end):
        first, last = start.get(tp, 0), end[tp]
        if last < first:
            losses.append(f"the end of partition {tp} moved back from offset {first} to {last}")
            continue
        low = earliest.get(tp, first)
        if low > first:
            lost_to = min(low, last)
            losses.append(
                f"offsets {first}..{lost_to - 1} of partition {tp} were removed "
                f"(earliest available offset is {low})"
            )
            first = lost_to
        if last > first:
            ranges.append(OffsetRange(tp.topic, tp.partition, first, last))
    if losses and fail_on_data_loss:
        raise DataLossError(data_loss_message(losses))
    return ranges, losses


def data_loss_message(losses: Iterable[str]) -> str:
    detail = "; ".join(losses)
    return (
        f"Some data may have been lost: {detail}. The records were aged out by retention, "
        "deleted, or the topic was deleted before they were processed. If you want the query "
        "to go on reading from the earliest available offsets, set the source option "
        "failOnDataLoss to false."
    )


def split_ranges(
    ranges: Iterable[OffsetRange], *, min_partitions: int | None, max_records: int
) -> list[OffsetRange]:
    """Cut ranges so no piece holds more than ``max_records`` offsets and, when
    ``min_partitions`` exceeds the number of ranges, into about that many pieces in
    proportion to their sizes (Spark's minPartitions hint). Empty ranges are dropped."""
    ranges = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in ranges)
    want_more = min_partitions is not None and min_partitions > len(ranges)
    pieces: list[OffsetRange] = []
    for r in ranges:
        count = math.ceil(r.size / max_records)
        if want_more:
            count = max(count, math.ceil(r.size * min_partitions / total))
        count = min(count, r.size)
        bounds = [r.start + r.size * i // count for i in range(count + 1)]
        pieces.extend(
            OffsetRange(r.topic, r.partition, lo, hi) for lo, hi in itertools.pairwise(bounds)
        )
    return pieces
