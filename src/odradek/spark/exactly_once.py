"""Transactional writes of the sink's ``exactlyOnce`` mode (docs/DESIGN.md, "Spark:
exactly-once sink").

Micro-batches: each task writes its rows and its partition's state record in one transaction
and commits it itself. Its transactional.id, from (query id, partition id), is the same in
every attempt, batch and restart, so ``init_transactions`` fences every earlier attempt of the
partition and waits until their transactions are complete; the task then reads the state and
writes nothing if this batch's partition is already committed.

Batch writes: each task writes its rows in a transaction it leaves open, and reports its
producer id and epoch; the driver's ``commit`` ends them all with EndTxn(commit), its
``abort`` with EndTxn(abort). The transactional.id comes from (write id, partition id), so a
retried task fences the attempt before it, whose transaction is then aborted.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from confluent_kafka import KafkaException, Producer

from odradek.spark.options import OptionError, SinkOptions
from odradek.spark.sink_faults import InjectedTaskFailure, SinkFaults
from odradek.spark.sink_state import (
    SinkStateRecord,
    TaskIdentity,
    batch_transactional_id,
    streaming_transactional_id,
)
from odradek.spark.sink_state_topic import SinkStateTopic
from odradek.spark.write_task import (
    KafkaCommitMessage,
    KafkaWriteError,
    OpenTransaction,
    new_producer,
    produce_all,
    producer_config,
)

if TYPE_CHECKING:
    from odradek.admin.transactions import TransactionsAdmin

__all__ = [
    "abort_open_transactions",
    "commit_open_transactions",
    "write_micro_batch",
    "write_open_transaction",
]

TIMEOUT_S = 60.0
# A batch write's transactions stay open from a task's first row to the driver's commit:
# give them Kafka's default transaction.max.timeout.ms (15 minutes), unless the user sets
# kafka.transaction.timeout.ms.
BATCH_TRANSACTION_TIMEOUT_MS = 900_000
ONGOING = "Ongoing"


def write_micro_batch(
    batches: Iterator[pa.RecordBatch], options: SinkOptions, task: TaskIdentity, faults: SinkFaults
) -> KafkaCommitMessage:
    """Write one task's rows of a micro-batch, and its state record, in one committed
    transaction; or nothing if an earlier attempt committed this batch's partition."""
    if task.query_id is None or task.batch_id is None:
        raise KafkaWriteError(
            "odradek data source: exactlyOnce: the task has no streaming query id or batch id"
        )
    batches = _nonempty(batches)
    if batches is None:
        return KafkaCommitMessage(0, **faults.commit_faults)
    transactional_id = streaming_transactional_id(task.query_id, task.partition)
    producer = new_producer(_transactional_config(options, transactional_id))
    _call(producer.init_transactions, transactional_id)
    state = SinkStateTopic(options)
    committed = state.last_committed(task.query_id, task.partition)
    if committed is not None and committed.covers(task.batch_id):
        for _ in batches:  # consume the input, as a task that wrote it would
            pass
        return KafkaCommitMessage(0, already_committed=True, **faults.commit_faults)
    producer.begin_transaction()
    try:
        sent = produce_all(producer, batches, options.topic, faults)
        record = SinkStateRecord(task.query_id, task.partition, task.batch_id, sent)
        producer.produce(
            state.topic, record.value, record.key, partition=state.partition_of(record.key)
        )
        _call(producer.commit_transaction, transactional_id)
    except InjectedTaskFailure:
        raise  # as an executor dying mid-write: the next attempt's init_transactions aborts it
    except BaseException:
        _abort_quietly(producer)
        raise
    return KafkaCommitMessage(sent, **faults.commit_faults)


def write_open_transaction(
    batches: Iterator[pa.RecordBatch],
    options: SinkOptions,
    write_id: str,
    task: TaskIdentity,
    faults: SinkFaults,
) -> KafkaCommitMessage:
    """Write one task's rows of a batch write in a transaction left open for the driver."""
    batches = _nonempty(batches)
    if batches is None:
        return KafkaCommitMessage(0, **faults.commit_faults)
    transactional_id = batch_transactional_id(write_id, task.partition)
    conf = _transactional_config(options, transactional_id)
    conf.setdefault("transaction.timeout.ms", BATCH_TRANSACTION_TIMEOUT_MS)
    producer = new_producer(conf)
    _call(producer.init_transactions, transactional_id)
    # librdkafka does not tell its producer id and epoch; the coordinator does. Asked before
    # the first row: if a later attempt fenced this one in between, this one's writes fail,
    # so an attempt that returns reports its own epoch.
    described = asyncio.run(_describe(options, transactional_id))
    producer.begin_transaction()
    try:
        sent = produce_all(producer, batches, options.topic, faults)
    except InjectedTaskFailure:
        raise
    except BaseException:
        _abort_quietly(producer)
        raise
    # The producer goes away with the transaction open: librdkafka does not abort on close.
    transaction = (
        OpenTransaction(transactional_id, described.producer_id, described.producer_epoch)
        if sent
        else None
    )
    return KafkaCommitMessage(sent, transaction=transaction, **faults.commit_faults)


def _nonempty(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch] | None:
    """``batches`` again, or None if they hold no row. A task without rows needs no
    transaction: a replay has none either, and its partition's earlier attempts were fenced
    by the attempt whose commit message Spark kept."""
    for batch in batches:
        if batch.num_rows:
            return itertools.chain([batch], batches)
    return None


def commit_open_transactions(options: SinkOptions, transactions: Sequence[OpenTransaction]) -> None:
    """Commit the tasks' transactions, once every one of them is seen still open: one that
    timed out or was fenced fails the write before any is committed."""
    asyncio.run(_commit(options, transactions))


def abort_open_transactions(options: SinkOptions, write_id: str, partitions: int) -> None:
    """Abort every open transaction of the write's ``partitions`` tasks, including those of
    attempts that failed without a commit message."""
    asyncio.run(_abort(options, write_id, partitions))


async def _describe(options: SinkOptions, transactional_id: str):  # type: ignore[no-untyped-def]
    async with _transactions_admin(options) as admin:
        return await admin.describe_transaction(transactional_id)


async def _commit(options: SinkOptions, transactions: Sequence[OpenTransaction]) -> None:
    async with _transactions_admin(options) as admin:
        for t in transactions:
            found = await admin.find_transaction(t.transactional_id)
            if (
                found is None
                or found.state != ONGOING
                or (found.producer_id, found.producer_epoch) != (t.producer_id, t.producer_epoch)
            ):
                seen = "unknown" if found is None else (
                    f"{found.state}, producer id {found.producer_id} epoch {found.producer_epoch}"
                )
                raise KafkaWriteError(
                    f"odradek data source: exactlyOnce: the transaction of "
                    f"{t.transactional_id} (producer id {t.producer_id} epoch {t.producer_epoch}) "
                    f"is no longer open ({seen}): it timed out (kafka.transaction.timeout.ms) "
                    "or was fenced; nothing of this write was committed"
                )
        for t in transactions:
            await admin.end_transaction(
                t.transactional_id, t.producer_id, t.producer_epoch, commit=True
            )


async def _abort(options: SinkOptions, write_id: str, partitions: int) -> None:
    from odradek.admin.transactions import TransactionsCommandError

    async with _transactions_admin(options) as admin:
        for partition in range(partitions):
            transactional_id = batch_transactional_id(write_id, partition)
            found = await admin.find_transaction(transactional_id)
            if found is not None and found.state == ONGOING:
                try:
                    await admin.end_transaction(
                        transactional_id, found.producer_id, found.producer_epoch, commit=False
                    )
                except TransactionsCommandError:
                    pass  # fenced or ended meanwhile: not open any more either way


def _transactions_admin(options: SinkOptions) -> TransactionsAdmin:
    # Imported here, not with the module: a streaming task never needs odradek's own admin
    # client (and the protocol library it brings), and every executor imports this module.
    from odradek.admin.transactions import TransactionsAdmin
    from odradek.security.client import ClientSecurity

    try:
        security = ClientSecurity.from_properties(options.kafka_params)
    except ValueError as e:
        raise OptionError("kafka.security.protocol", str(e)) from e
    return TransactionsAdmin(options.kafka_params["bootstrap.servers"], security=security)


def _transactional_config(options: SinkOptions, transactional_id: str) -> dict[str, object]:
    conf = producer_config(options.kafka_params)
    conf["transactional.id"] = transactional_id
    return conf


def _call(operation, transactional_id: str) -> None:  # type: ignore[no-untyped-def]
    try:
        operation(TIMEOUT_S)
    except KafkaException as e:
        raise KafkaWriteError(
            f"odradek data source: exactlyOnce: transactional id {transactional_id}: "
            f"{e.args[0].str()}"
        ) from e


def _abort_quietly(producer: Producer) -> None:
    try:
        producer.abort_transaction(TIMEOUT_S)
    except KafkaException:
        pass  # fenced, or the failure was fatal: the coordinator aborts it or a retry fences it
