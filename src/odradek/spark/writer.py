"""Writes: ``df.write.format("odradek")`` and ``df.writeStream.format("odradek")``.

Each task produces its rows with its own idempotent producer (acks=all unless the user
overrides it), waits for every delivery report and fails with the broker's error if any
record was not written. Like Spark's Kafka sink this is at-least-once: a retried task or
micro-batch writes its rows again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from odradek.spark.options import OptionError, SinkOptions
from odradek.spark.worker_python import ExecutorChecked

POLL_WHEN_FULL_S = 0.1


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What one task wrote: the number of records the broker acknowledged."""

    records: int


class KafkaWriteError(RuntimeError):
    """The broker (or the client) refused records."""


def producer_config(kafka_params: Mapping[str, str]) -> dict[str, object]:
    conf: dict[str, object] = dict(kafka_params)
    acks = str(conf.setdefault("acks", "all")).lower()
    conf.setdefault("enable.idempotence", acks in ("all", "-1"))
    return conf


def write_batches(batches: Iterator[pa.RecordBatch], options: SinkOptions) -> KafkaCommitMessage:
    """Produce every row of ``batches``; return once all are acknowledged."""
    try:
        producer = Producer(producer_config(options.kafka_params))
    except KafkaException as e:
        raise OptionError("kafka.*", f"rejected by the Kafka client: {e}") from e
    failures: list[tuple[KafkaError, str, int]] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append((error, message.topic(), message.partition()))

    sent = 0
    for batch in batches:
        for topic, kwargs in _records(batch, options.topic):
            while True:
                try:
                    producer.produce(topic, on_delivery=on_delivery, **kwargs)
                    break
                except BufferError:
                    producer.poll(POLL_WHEN_FULL_S)  # the local queue is full: let it drain
                except KafkaException as e:
                    producer.flush()
                    raise KafkaWriteError(
                        f"odradek data source: cannot write to topic {topic!r}"
                        f"{_where(kwargs.get('partition'))}: {e.args[0].str()}"
                    ) from e
            sent += 1
        producer.poll(0)
        if failures:
            break
    producer.flush()
    if failures:
        error, topic, partition = failures[0]
        raise KafkaWriteError(
            f"odradek data source: {len(failures)} of {sent} records were not written; "
            f"first failure on topic {topic!r} partition {partition}: "
            f"{error.name()}: {error.str()}"
        )
    return KafkaCommitMessage(sent)


def _records(batch: pa.RecordBatch, topic_option: str | None) -> Iterator[tuple[str, dict]]:
    columns = {name.lower(): i for i, name in enumerate(batch.schema.names)}

    def column(name: str) -> list:
        i = columns.get(name)
        return batch.column(i).to_pylist() if i is not None else [None] * batch.num_rows

    values, keys, partitions, headers = (
        column("value"),
        column("key"),
        column("partition"),
        column("headers"),
    )
    topics = [topic_option] * batch.num_rows if topic_option else column("topic")
    for i in range(batch.num_rows):
        topic = topics[i]
        if topic is None:
            raise KafkaWriteError(
                "odradek data source: a row has a null 'topic' and no 'topic' option is set"
            )
        kwargs: dict[str, object] = {"value": values[i], "key": keys[i]}
        if partitions[i] is not None:
            kwargs["partition"] = partitions[i]
        if headers[i]:
            kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
        yield topic, kwargs


def _where(partition: object) -> str:
    return "" if partition is None else f" partition {partition}"


class KafkaBatchWriter(ExecutorChecked, DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        return write_batches(iterator, self.options)


class KafkaStreamWriter(ExecutorChecked, DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        return write_batches(iterator, self.options)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every record was acknowledged before its task finished."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: Kafka cannot take back acknowledged records (at-least-once)."""
