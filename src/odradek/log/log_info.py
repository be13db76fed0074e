"""What the log hands back: append results, read results as file regions, ListOffsets
answers (Kafka's ``LogAppendInfo``, ``FetchDataInfo``, ``TimestampAndOffset``)."""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path


class AppendOrigin(enum.Enum):
    """Who appends as leader (Kafka's ``AppendOrigin``): a producing CLIENT (every check)
    or a COORDINATOR (transaction markers, the group coordinator's transactional offset
    commits: control batches allowed, no sequence checks). A follower appends through
    ``Log.append_as_follower``, Kafka's ``AppendOrigin.Replication``."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


@dataclass(frozen=True, slots=True)
class FileRegion:
    """Bytes ``[position, position + size)`` of a segment file. ``fd`` stays open until the
    segment is deleted, which happens ``file.delete.delay.ms`` after it left the log (or
    when the log is closed), so the network layer may ``sendfile`` from it meanwhile."""

    fd: int
    position: int
    size: int
    path: Path

    def read(self) -> bytes:
        return os.pread(self.fd, self.size, self.position)


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """What a read found: whole batches, the first one holding ``fetch_offset``."""

    fetch_offset: int
    regions: tuple[FileRegion, ...] = ()

    @property
    def size(self) -> int:
        return sum(r.size for r in self.regions)

    def read_bytes(self) -> bytes:
        """The regions' bytes (when ``sendfile`` is not an option, and in tests)."""
        return b"".join(r.read() for r in self.regions)


@dataclass(slots=True)
class LogAppendInfo:
    """The outcome of an append (not frozen: one is built per produce, and a frozen
    dataclass's ``__init__`` costs a microsecond here)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # NO_TIMESTAMP (-1) unless the topic uses LogAppendTime
    log_start_offset: int
    num_batches: int
    num_records: int
    valid_bytes: int
    duplicate: bool = False  # an idempotent retry: nothing was appended


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """A ListOffsets answer."""

    timestamp: int
    offset: int
    leader_epoch: int | None
