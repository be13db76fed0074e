"""The executor side of a write: the task's producer, the loop that produces its rows, and
the commit message it hands back to the driver."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from pyspark.sql.datasource import WriterCommitMessage

from odradek.spark.options import OptionError
from odradek.spark.sink_faults import SinkFaults

POLL_WHEN_FULL_S = 0.1


@dataclass(frozen=True)
class OpenTransaction:
    """A transaction a batch-write task left open for the driver to commit or abort."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What one task wrote: the number of records the broker acknowledged; with exactlyOnce,
    the transaction a batch-write task left open, or whether a micro-batch's task found its
    rows committed by an earlier attempt (and wrote none)."""

    records: int
    transaction: OpenTransaction | None = None
    already_committed: bool = False
    fail_commit: bool = False  # sink_faults.FAIL_COMMIT_PROPERTY
    pause_commit: str | None = None  # sink_faults.PAUSE_COMMIT_PROPERTY


class KafkaWriteError(RuntimeError):
    """The broker (or the client) refused records."""


def producer_config(kafka_params: Mapping[str, str]) -> dict[str, object]:
    conf: dict[str, object] = dict(kafka_params)
    acks = str(conf.setdefault("acks", "all")).lower()
    conf.setdefault("enable.idempotence", acks in ("all", "-1"))
    return conf


def new_producer(conf: Mapping[str, object]) -> Producer:
    try:
        return Producer(conf)
    except KafkaException as e:
        raise OptionError("kafka.*", f"rejected by the Kafka client: {e}") from e


def produce_all(
    producer: Producer,
    batches: Iterator[pa.RecordBatch],
    topic_option: str | None,
    faults: SinkFaults,
) -> int:
    """Produce every row of ``batches`` with ``producer``; return how many once all are
    acknowledged, or raise KafkaWriteError with the first failure."""
    failures: list[tuple[KafkaError, str, int]] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append((error, message.topic(), message.partition()))

    sent = 0
    for batch in batches:
        for topic, kwargs in _records(batch, topic_option):
            if sent == faults.fail_after or sent == faults.pause_after:
                producer.flush()  # the rows sent so far are on the brokers
                faults.at_row(sent)
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
    return sent


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
