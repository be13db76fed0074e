"""The exactly-once sink's identities and its state records: pure functions, no I/O.

A streaming task writes its rows in a transaction whose ``transactional.id`` comes from
(query id, partition id), and the same transaction writes a state record, keyed by (query id,
partition id), saying which micro-batch that partition last committed. The state topic is
compacted, so it keeps one record per key, as Kafka Streams keeps one committed offset per
partition. A batch write (``df.write``) has no query id; each job draws a write id instead.
See docs/DESIGN.md, "Spark: exactly-once sink".
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "BATCH_ID_PROPERTY",
    "DEFAULT_STATE_TOPIC",
    "QUERY_ID_PROPERTY",
    "STATE_TOPIC_CONFIG",
    "STATE_TOPIC_PARTITIONS",
    "SinkStateError",
    "SinkStateRecord",
    "TaskIdentity",
    "batch_transactional_id",
    "state_key",
    "state_partition",
    "streaming_transactional_id",
    "task_identity",
]

DEFAULT_STATE_TOPIC = "odradek-spark-sink-state"
STATE_TOPIC_PARTITIONS = 8
# One record per key is all a task reads; compact often so that read stays short.
STATE_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "600000",
    "min.cleanable.dirty.ratio": "0.1",
}
_PREFIX = "odradek-spark"
_VERSION = 1

# Local properties Spark's micro-batch execution gives every task of a streaming query
# (StreamExecution.QUERY_ID_KEY, MicroBatchExecution.BATCH_ID_KEY).
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


class SinkStateError(ValueError):
    """A state record this version cannot read."""


def streaming_transactional_id(query_id: str, partition: int) -> str:
    """The transactional.id of partition ``partition`` of a streaming query: the same in every
    micro-batch and every restart from the checkpoint (the query id is stored there), so a new
    attempt fences every earlier one of that partition."""
    return f"{_PREFIX}-{query_id}-{partition}"


def batch_transactional_id(write_id: str, partition: int) -> str:
    """The transactional.id of partition ``partition`` of one batch write (``df.write``)."""
    return f"{_PREFIX}-write-{write_id}-{partition}"


@dataclass(frozen=True, slots=True)
class TaskIdentity:
    """Who a write task is: Spark's partition id and attempt number, and for a micro-batch
    of a streaming query, the query id and batch id."""

    partition: int
    attempt: int
    query_id: str | None = None
    batch_id: int | None = None


def task_identity(partition: int, attempt: int, properties: Mapping[str, str]) -> TaskIdentity:
    """The identity of a task from its TaskContext's partition id, attempt number and local
    properties."""
    query_id = properties.get(QUERY_ID_PROPERTY)
    batch = properties.get(BATCH_ID_PROPERTY)
    return TaskIdentity(partition, attempt, query_id, int(batch) if batch is not None else None)


@dataclass(frozen=True, slots=True)
class SinkStateRecord:
    """Partition ``partition`` of query ``query_id`` committed micro-batch ``batch_id`` with
    ``records`` rows."""

    query_id: str
    partition: int
    batch_id: int
    records: int = 0

    @property
    def key(self) -> bytes:
        return state_key(self.query_id, self.partition)

    @property
    def value(self) -> bytes:
        body = {"version": _VERSION, "batch": self.batch_id, "records": self.records}
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> SinkStateRecord:
        """The record of a state topic's key and value; SinkStateError if unreadable."""
        query_id, _, partition = key.decode().rpartition(":")
        try:
            if not query_id or not partition.isdigit():
                raise ValueError("the key is not 'query id:partition'")
            body = json.loads(value)
            if body["version"] != _VERSION:
                raise ValueError(f"version {body['version']!r}")
            return cls(query_id, int(partition), int(body["batch"]), int(body["records"]))
        except (ValueError, KeyError, TypeError) as e:
            raise SinkStateError(f"unreadable sink state record {key!r}: {e}") from None

    def covers(self, batch_id: int) -> bool:
        """Whether micro-batch ``batch_id`` of this partition is already committed. Spark runs
        a query's batches in order and a partition of batch N+1 only after batch N committed,
        so a later batch committed means this one was too."""
        return self.batch_id >= batch_id


def state_key(query_id: str, partition: int) -> bytes:
    """The compaction key of a partition of a query."""
    return f"{query_id}:{partition}".encode()


def state_partition(key: bytes, partitions: int) -> int:
    """The state topic's partition holding ``key``: chosen by the sink, not by a client's
    partitioner, so that a reader knows the one partition to read."""
    return zlib.crc32(key) % partitions
