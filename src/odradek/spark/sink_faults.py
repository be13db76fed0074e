"""Faults the sink injects into its own writes, for the tests that prove it exactly-once.

A test turns them on with Spark local properties, which reach every task of the jobs the
setting thread starts (a streaming query's tasks too): nothing of this is a sink option.

- ``odradek.test.sinkFailTasks = "0,3@500"``: the first attempt of the tasks with partition
  ids 0 and 3 raises InjectedTaskFailure once 500 of its rows are on the brokers, without
  finishing its transaction, as a task whose executor dies mid-write.
- ``odradek.test.sinkPauseTasks = "0@500:/tmp/run/pause"``: the first attempt of the task with
  partition id 0 that has 500 rows on the brokers creates the marker file, writes its process
  id in it and waits until ``/tmp/run/pause.release`` exists, then goes on writing. Only one
  task ever pauses per marker (the first to create it), so a test can time one fault per
  query: SIGKILL the task's executor, or a broker, while it waits.
- ``odradek.test.sinkFailCommit = "true"``: every task's commit message asks the driver's
  commit to raise InjectedCommitFailure, after the tasks wrote (and, per micro-batch,
  committed) their rows and before Spark records the batch in its checkpoint.
- ``odradek.test.sinkPauseCommit = "/tmp/run/commit"``: at the same point the driver's commit
  creates the marker file, writes its process id in it and waits until
  ``/tmp/run/commit.release`` exists (once per marker, as a task's pause): a test SIGKILLs the
  driver then, and starts the query again from its checkpoint.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

__all__ = [
    "FAIL_COMMIT_PROPERTY",
    "FAIL_TASKS_PROPERTY",
    "PAUSE_COMMIT_PROPERTY",
    "PAUSE_TASKS_PROPERTY",
    "CommitFaults",
    "InjectedCommitFailure",
    "InjectedTaskFailure",
    "SinkFaults",
    "pause",
    "release_path",
    "sink_faults",
]

FAIL_TASKS_PROPERTY = "odradek.test.sinkFailTasks"
PAUSE_TASKS_PROPERTY = "odradek.test.sinkPauseTasks"
FAIL_COMMIT_PROPERTY = "odradek.test.sinkFailCommit"
PAUSE_COMMIT_PROPERTY = "odradek.test.sinkPauseCommit"
PAUSE_LIMIT_S = 300.0
_RELEASE_POLL_S = 0.05


class InjectedTaskFailure(RuntimeError):
    """A write task failed on purpose (sinkFailTasks), or its pause was never released."""


class InjectedCommitFailure(RuntimeError):
    """The driver's commit failed on purpose (sinkFailCommit)."""


def release_path(marker: str | os.PathLike[str]) -> Path:
    """The file whose creation ends the pause of the task that created ``marker``."""
    marker = Path(marker)
    return marker.with_name(marker.name + ".release")


class CommitFaults(TypedDict):
    fail_commit: bool
    pause_commit: str | None


@dataclass(frozen=True, slots=True)
class SinkFaults:
    """The faults one task injects: fail after ``fail_after`` rows, pause after
    ``pause_after`` rows on ``pause_marker`` (None: never); and whether the driver's commit of
    its job or micro-batch fails, or pauses on the marker ``pause_commit``."""

    fail_after: int | None = None
    fail_commit: bool = False
    pause_after: int | None = None
    pause_marker: str | None = None
    pause_commit: str | None = None

    @property
    def commit_faults(self) -> CommitFaults:
        """What the task's commit message carries to the driver's commit (KafkaCommitMessage)."""
        return {"fail_commit": self.fail_commit, "pause_commit": self.pause_commit}

    def at_row(self, sent: int) -> None:
        """Act at ``sent`` rows, all of them on the brokers: pause, fail, or both in turn."""
        if sent == self.pause_after and self.pause_marker is not None:
            pause(Path(self.pause_marker))
        if sent == self.fail_after:
            raise InjectedTaskFailure(f"injected failure after {sent} rows")


NO_FAULTS = SinkFaults()


def pause(marker: Path) -> None:
    """Create ``marker`` with this process's id in it and wait for its release; at once if
    the marker exists (each marker pauses once)."""
    # Written aside and linked in place: the marker appears at once, with the process id in
    # it, and only for the first task (link fails if the marker exists). The file aside is the
    # calling thread's own: tasks of one Python worker may run in threads of one process.
    mine = marker.with_name(f"{marker.name}.{os.getpid()}.{threading.get_ident()}")
    mine.write_text(str(os.getpid()))
    try:
        os.link(mine, marker)
    except FileExistsError:
        return  # another task, or an earlier micro-batch, took this marker's one pause
    finally:
        mine.unlink()
    release = release_path(marker)
    deadline = time.monotonic() + PAUSE_LIMIT_S
    while not release.exists():  # the test's fault happens meanwhile, outside this process
        if time.monotonic() > deadline:
            raise InjectedTaskFailure(f"pause on {marker} not released within {PAUSE_LIMIT_S:.0f} s")
        time.sleep(_RELEASE_POLL_S)


def sink_faults(partition: int, attempt: int, properties: Mapping[str, str]) -> SinkFaults:
    """The faults of attempt ``attempt`` of the task with partition id ``partition``, from its
    local properties. ValueError if a property is malformed."""
    fail_after = pause_after = pause_marker = None
    if attempt == 0:
        fail_after = _rows_if_chosen(FAIL_TASKS_PROPERTY, properties, partition, "'0,3@500'")
        spec, _, marker = properties.get(PAUSE_TASKS_PROPERTY, "").partition(":")
        if spec:
            if not marker:
                raise ValueError(
                    f"{PAUSE_TASKS_PROPERTY}: expected a marker file after ':', got {spec!r}"
                )
            pause_after = _rows_if_chosen(
                PAUSE_TASKS_PROPERTY, {PAUSE_TASKS_PROPERTY: spec}, partition, "'0@500:/tmp/m'"
            )
            pause_marker = marker if pause_after is not None else None
    fail_commit = properties.get(FAIL_COMMIT_PROPERTY, "").lower() == "true"
    pause_commit = properties.get(PAUSE_COMMIT_PROPERTY) or None
    faults = SinkFaults(fail_after, fail_commit, pause_after, pause_marker, pause_commit)
    return NO_FAULTS if faults == NO_FAULTS else faults


def _rows_if_chosen(
    name: str, properties: Mapping[str, str], partition: int, example: str
) -> int | None:
    """The row count of ``name``'s ``<partition ids>@<rows>`` if it chooses ``partition``."""
    spec = properties.get(name)
    if not spec:
        return None
    partitions, _, after = spec.partition("@")
    try:
        chosen = {int(p) for p in partitions.split(",")}
        rows = int(after)
    except ValueError:
        raise ValueError(
            f"{name}: expected partition ids and a row count like {example}, got {spec!r}"
        ) from None
    return rows if partition in chosen else None
