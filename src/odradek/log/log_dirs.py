"""The ``log.dirs`` of one broker (JBOD): the names of what lives in them, which of them are
live, and where a new log goes.

Names, as Kafka's ``Log`` spells them: ``<topic>-<partition>`` (a partition's log),
``<topic>-<partition>.<uuid>-delete`` (being deleted) and ``<topic>-<partition>.<uuid>-future``
(a copy being made in another directory by AlterReplicaLogDirs).

Placement is Kafka's ``LogManager.nextLogDirs``: a new log goes to the live directory holding
the fewest logs (current and future ones), the first configured one on a tie, unless
AlterReplicaLogDirs named a directory for the partition before its log existed.  The counts
are kept as logs come and go, so placing ten thousand partitions is not quadratic.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from pathlib import Path

from odradek.common import TopicPartition

__all__ = [
    "DELETE_DIR_SUFFIX",
    "FUTURE_DIR_SUFFIX",
    "LogDirs",
    "delete_dir_name",
    "future_dir_name",
    "log_dir_name",
    "parse_delete_dir_name",
    "parse_future_dir_name",
    "parse_log_dir_name",
]

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
_SUFFIXED_DIR_RE = re.compile(r"^(?P<name>.+)\.(?P<uid>[0-9a-f]{32})(?P<suffix>-delete|-future)$")


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """``topic-partition`` -> ``(topic, partition)``; topics may hold '-' and '.', so the
    partition is what follows the last '-'. None for anything else."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit() or name.startswith("."):
        return None
    return TopicPartition(topic, int(partition))


def delete_dir_name(topic: str, partition: int) -> str:
    """Kafka's ``<topic>-<partition>.<uuid without dashes>-delete``."""
    return f"{log_dir_name(topic, partition)}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"


def future_dir_name(topic: str, partition: int) -> str:
    """Kafka's ``<topic>-<partition>.<uuid without dashes>-future``."""
    return f"{log_dir_name(topic, partition)}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def _parse_suffixed(name: str, suffix: str) -> TopicPartition | None:
    m = _SUFFIXED_DIR_RE.match(name)
    return parse_log_dir_name(m["name"]) if m and m["suffix"] == suffix else None


def parse_delete_dir_name(name: str) -> TopicPartition | None:
    return _parse_suffixed(name, DELETE_DIR_SUFFIX)


def parse_future_dir_name(name: str) -> TopicPartition | None:
    return _parse_suffixed(name, FUTURE_DIR_SUFFIX)


class LogDirs:
    """Which configured directories are live, how many logs each holds, and the directories
    AlterReplicaLogDirs asked for partitions that have no log yet.  No I/O."""

    def __init__(self, dirs: Iterable[Path]) -> None:
        self.all = list(dirs)
        # Mutated in place, never replaced: the log cleaner holds this list.
        self.live = list(self.all)
        self._counts = dict.fromkeys(self.all, 0)
        self.preferred: dict[TopicPartition, Path] = {}

    def __contains__(self, log_dir: Path) -> bool:
        return log_dir in self._counts

    def is_live(self, log_dir: Path) -> bool:
        return log_dir in self.live

    @property
    def offline(self) -> list[Path]:
        return [d for d in self.all if d not in self.live]

    def mark_offline(self, log_dir: Path) -> bool:
        """Take ``log_dir`` out of service; False if it already was."""
        if log_dir not in self.live:
            return False
        self.live.remove(log_dir)
        return True

    def log_added(self, log_dir: Path) -> None:
        self._counts[log_dir] = self._counts.get(log_dir, 0) + 1

    def log_removed(self, log_dir: Path) -> None:
        self._counts[log_dir] = max(self._counts.get(log_dir, 0) - 1, 0)

    def count(self, log_dir: Path) -> int:
        return self._counts.get(log_dir, 0)

    def placement(self, tp: TopicPartition) -> list[Path]:
        """The live directories to try for a new log of ``tp``, best first."""
        preferred = self.preferred.get(tp)
        if preferred is not None and preferred in self.live:
            return [preferred]
        if len(self.live) == 1:
            return list(self.live)
        return sorted(self.live, key=self.count)  # stable: the first configured one on a tie
