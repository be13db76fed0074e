"""Faults the sink injects into its own writes, for the tests that prove it exactly-once.

A test turns them on with Spark local properties, which reach every task of the jobs the
setting thread starts (a streaming query's tasks too): nothing of this is a sink option.

- ``odradek.test.sinkFailTasks = "0,3@500"``: the first attempt of the tasks with partition
  ids 0 and 3 raises InjectedTaskFailure once 500 of its rows are on the brokers, without
  finishing its transaction, as a task whose executor dies mid-write.
- ``odradek.test.sinkFailCommit = "true"``: every task's commit message asks the driver's
  commit to raise InjectedCommitFailure, after the tasks wrote (and, per micro-batch,
  committed) their rows and before Spark records the batch in its checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "FAIL_COMMIT_PROPERTY",
    "FAIL_TASKS_PROPERTY",
    "InjectedCommitFailure",
    "InjectedTaskFailure",
    "SinkFaults",
    "sink_faults",
]

FAIL_TASKS_PROPERTY = "odradek.test.sinkFailTasks"
FAIL_COMMIT_PROPERTY = "odradek.test.sinkFailCommit"


class InjectedTaskFailure(RuntimeError):
    """A write task failed on purpose (sinkFailTasks)."""


class InjectedCommitFailure(RuntimeError):
    """The driver's commit failed on purpose (sinkFailCommit)."""


@dataclass(frozen=True, slots=True)
class SinkFaults:
    """The faults one task injects: fail after ``fail_after`` rows (None: never), and
    whether the driver's commit of its job or micro-batch fails."""

    fail_after: int | None = None
    fail_commit: bool = False


NO_FAULTS = SinkFaults()


def sink_faults(partition: int, attempt: int, properties: Mapping[str, str]) -> SinkFaults:
    """The faults of attempt ``attempt`` of the task with partition id ``partition``, from its
    local properties. ValueError if a property is malformed."""
    fail_after = None
    spec = properties.get(FAIL_TASKS_PROPERTY)
    if spec and attempt == 0:
        partitions, _, after = spec.partition("@")
        try:
            chosen = {int(p) for p in partitions.split(",")}
            rows = int(after)
        except ValueError:
            raise ValueError(
                f"{FAIL_TASKS_PROPERTY}: expected partition ids and a row count like '0,3@500', "
                f"got {spec!r}"
            ) from None
        if partition in chosen:
            fail_after = rows
    fail_commit = properties.get(FAIL_COMMIT_PROPERTY, "").lower() == "true"
    return SinkFaults(fail_after, fail_commit) if fail_after is not None or fail_commit else NO_FAULTS
