"""Kafka's checkpoint files, byte for byte.

Every checkpoint is text: a version line (``0``), a line with the number of entries, then
one entry per line, fields separated by one space::

    0
    2
    my-topic 0 1234
    my-topic 1 99

``replication-offset-checkpoint``, ``recovery-point-offset-checkpoint`` and
``log-start-offset-checkpoint`` hold ``topic partition offset``; a partition's
``leader-epoch-checkpoint`` holds ``epoch start_offset``. Writes go to ``<file>.tmp``,
are fsynced and renamed over the old file, and the directory is fsynced, so a crash
leaves either the old or the new checkpoint, never a mix.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

VERSION = 0

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class CorruptCheckpointError(ValueError):
    """A checkpoint file does not follow the format (Kafka: "Malformed line in checkpoint")."""


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` via temp file + fsync + rename + directory fsync."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """fsync a directory so a created, renamed or removed entry survives a crash."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointFile:
    """Lines of space-separated fields under Kafka's version/count header."""

    fields: int = 0  # set by subclasses

    def __init__(self, path: Path) -> None:
        self.path = path

    def _write_lines(self, lines: list[str]) -> None:
        text = f"{VERSION}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
        write_atomically(self.path, text.encode())

    def _read_lines(self) -> list[list[str]]:
        """Entries as lists of fields; [] if the file does not exist or is empty (Kafka
        creates a checkpoint file empty before its first write, as its cleaner's
        ``cleaner-offset-checkpoint`` stays until something is cleaned)."""
        try:
            text = self.path.read_bytes().decode()
        except FileNotFoundError:
            return []
        except UnicodeDecodeError as e:
            raise CorruptCheckpointError(f"{self.path}: not text ({e})") from None
        if not text:
            return []
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) < 2:
            raise CorruptCheckpointError(f"{self.path}: missing version or count line")
        if lines[0].strip() != str(VERSION):
            raise CorruptCheckpointError(f"{self.path}: unrecognized version {lines[0]!r}")
        try:
            count = int(lines[1])
        except ValueError:
            raise CorruptCheckpointError(f"{self.path}: malformed count {lines[1]!r}") from None
        entries = [line.split(" ") for line in lines[2:]]
        if len(entries) != count:
            raise CorruptCheckpointError(
                f"{self.path}: expected {count} entries but found {len(entries)}")
        for fields in entries:
            if len(fields) != self.fields:
                raise CorruptCheckpointError(f"{self.path}: malformed line {' '.join(fields)!r}")
        return entries


class OffsetCheckpointFile(CheckpointFile):
    """``topic partition offset`` entries (recovery points, log start offsets, HWs)."""

    fields = 3

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Write ``{(topic, partition): offset}`` (sorted, for stable files)."""
        self._write_lines([f"{topic} {partition} {offset}"
                           for (topic, partition), offset in sorted(offsets.items())])

    def read(self) -> dict[tuple[str, int], int]:
        """``{(topic, partition): offset}``; empty when the file does not exist."""
        result: dict[tuple[str, int], int] = {}
        for topic, partition, offset in self._read_lines():
            try:
                result[(topic, int(partition))] = int(offset)
            except ValueError:
                raise CorruptCheckpointError(
                    f"{self.path}: malformed line {topic} {partition} {offset}") from None
        return result


class LeaderEpochCheckpointFile(CheckpointFile):
    """``epoch start_offset`` entries of one partition."""

    fields = 2

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        self._write_lines([f"{epoch} {offset}" for epoch, offset in entries])

    def read(self) -> list[tuple[int, int]]:
        result = []
        for epoch, offset in self._read_lines():
            try:
                result.append((int(epoch), int(offset)))
            except ValueError:
                raise CorruptCheckpointError(
                    f"{self.path}: malformed line {epoch} {offset}") from None
        return result
