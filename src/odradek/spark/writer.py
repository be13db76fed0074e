"""Writes: ``df.write.format("odradek")`` and ``df.writeStream.format("odradek")``.

By default each task produces its rows with its own idempotent producer (acks=all unless the
user overrides it), waits for every delivery report and fails with the broker's error if any
record was not written. Like Spark's Kafka sink this is at-least-once: a retried task or
micro-batch writes its rows again. With ``exactlyOnce`` the rows go in transactions
(spark/exactly_once.py): each micro-batch's rows reach read_committed readers once, and a
batch write's rows all or none.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from odradek.spark import exactly_once
from odradek.spark.options import SinkOptions
from odradek.spark.sink_faults import (
    FAIL_COMMIT_PROPERTY,
    FAIL_TASKS_PROPERTY,
    PAUSE_COMMIT_PROPERTY,
    PAUSE_TASKS_PROPERTY,
    InjectedCommitFailure,
    SinkFaults,
    pause,
    sink_faults,
)
from odradek.spark.sink_state import (
    BATCH_ID_PROPERTY,
    QUERY_ID_PROPERTY,
    TaskIdentity,
    task_identity,
)
from odradek.spark.worker_python import ExecutorChecked
from odradek.spark.write_task import (
    KafkaCommitMessage,
    OpenTransaction,
    new_producer,
    produce_all,
    producer_config,
)


def current_task() -> tuple[TaskIdentity, SinkFaults]:
    """The running task's identity and the faults the tests ask it to inject."""
    from pyspark import TaskContext

    context = TaskContext.get()
    assert context is not None, "called outside a Spark task"
    names = (
        QUERY_ID_PROPERTY,
        BATCH_ID_PROPERTY,
        FAIL_TASKS_PROPERTY,
        PAUSE_TASKS_PROPERTY,
        FAIL_COMMIT_PROPERTY,
        PAUSE_COMMIT_PROPERTY,
    )
    properties = {n: v for n in names if (v := context.getLocalProperty(n)) is not None}
    partition, attempt = context.partitionId(), context.attemptNumber()
    return task_identity(partition, attempt, properties), sink_faults(partition, attempt, properties)


def write_batches(
    batches: Iterator[pa.RecordBatch], options: SinkOptions, faults: SinkFaults
) -> KafkaCommitMessage:
    """Produce every row of ``batches``; return once all are acknowledged."""
    producer = new_producer(producer_config(options.kafka_params))
    sent = produce_all(producer, batches, options.topic, faults)
    return KafkaCommitMessage(sent, **faults.commit_faults)


def check_commit(messages: list[WriterCommitMessage | None]) -> None:
    """The driver-side faults a test asked for: pause (sink_faults.PAUSE_COMMIT_PROPERTY),
    then raise (FAIL_COMMIT_PROPERTY)."""
    ours = [m for m in messages if isinstance(m, KafkaCommitMessage)]
    marker = next((m.pause_commit for m in ours if m.pause_commit), None)
    if marker is not None:
        pause(Path(marker))
    if any(m.fail_commit for m in ours):
        raise InjectedCommitFailure("injected failure of the driver's commit")


class KafkaBatchWriter(ExecutorChecked, DataSourceArrowWriter):
    """``df.write``. With exactlyOnce the tasks leave their transactions open and the
    driver commits them all in ``commit``, or aborts them in ``abort``."""

    def __init__(self, options: SinkOptions, write_id: str) -> None:
        self.options = options
        self.write_id = write_id  # one per job: names its transactional ids

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        task, faults = current_task()
        if self.options.exactly_once:
            return exactly_once.write_open_transaction(
                iterator, self.options, self.write_id, task, faults
            )
        return write_batches(iterator, self.options, faults)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        check_commit(messages)
        if self.options.exactly_once:
            exactly_once.commit_open_transactions(self.options, _open_transactions(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """With exactlyOnce, abort every transaction a task of this job left open; without,
        nothing can be undone (at-least-once)."""
        if self.options.exactly_once:
            exactly_once.abort_open_transactions(self.options, self.write_id, len(messages))


class KafkaStreamWriter(ExecutorChecked, DataSourceStreamArrowWriter):
    """``df.writeStream``. With exactlyOnce each task commits its own transaction, which
    also records the micro-batch as done for its partition."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        task, faults = current_task()
        if self.options.exactly_once:
            return exactly_once.write_micro_batch(iterator, self.options, task, faults)
        return write_batches(iterator, self.options, faults)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every record was acknowledged (and with exactlyOnce, committed)
        before its task finished."""
        check_commit(messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: acknowledged records stay (at-least-once); with exactlyOnce, a
        replay of the batch finds the committed partitions in the sink state and skips them."""


def _open_transactions(messages: list[WriterCommitMessage | None]) -> list[OpenTransaction]:
    return [
        m.transaction
        for m in messages
        if isinstance(m, KafkaCommitMessage) and m.transaction is not None
    ]
