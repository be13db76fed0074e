"""The exactly-once sink's state topic: created by the driver when a streaming query starts,
read by each task before it writes (spark/sink_state.py has the records and keys).

A task reads the one partition its key lives in, as a read_committed consumer, up to the high
watermark it saw after its own ``init_transactions``. That call returned only once every
earlier transaction of its transactional.id was complete, so an earlier attempt's committed
record lies below that watermark. A read_committed consumer stops at the last stable offset,
which another task's open transaction on the same partition can hold below that record: the
task waits until the last stable offset reaches the watermark, then reads to it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from odradek.spark.options import OptionError, SinkOptions
from odradek.spark.sink_state import (
    STATE_TOPIC_CONFIG,
    STATE_TOPIC_PARTITIONS,
    SinkStateRecord,
    state_key,
    state_partition,
)

__all__ = ["SinkStateTopic", "connection_params", "ensure_state_topic", "stable_end"]

TIMEOUT_S = 60.0
_STABLE_POLL_S = 0.05
_CONNECTION_PREFIXES = ("bootstrap.", "security.", "ssl.", "sasl.", "client.", "socket.")


def connection_params(kafka_params: Mapping[str, str]) -> dict[str, str]:
    """The user's settings of how to reach and log in to the cluster, without the producer
    settings a consumer or admin client would warn about."""
    return {k: v for k, v in kafka_params.items() if k.startswith(_CONNECTION_PREFIXES)}


def ensure_state_topic(options: SinkOptions) -> None:
    """Create the state topic (compacted) unless it exists; on the driver, as a query starts."""
    admin = _admin(options)
    topic = options.state_topic
    existing = admin.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
    if existing is not None and existing.error is None:
        return
    new = NewTopic(topic, STATE_TOPIC_PARTITIONS, config=dict(STATE_TOPIC_CONFIG))
    try:
        admin.create_topics([new], request_timeout=TIMEOUT_S)[topic].result(TIMEOUT_S)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise OptionError(
                "exactlyOnce.stateTopic", f"cannot create the sink's state topic {topic!r}: {e}"
            ) from e


class SinkStateTopic:
    """Reads of the state topic by one task."""

    def __init__(self, options: SinkOptions) -> None:
        self.topic = options.state_topic
        self.admin = _admin(options)
        self.params = connection_params(options.kafka_params)
        metadata = self.admin.list_topics(self.topic, timeout=TIMEOUT_S).topics.get(self.topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            raise OptionError(
                "exactlyOnce.stateTopic",
                f"the sink's state topic {self.topic!r} is missing "
                f"({metadata.error if metadata is not None else 'unknown topic'})",
            )
        self.partitions = len(metadata.partitions)

    def partition_of(self, key: bytes) -> int:
        return state_partition(key, self.partitions)

    def last_committed(self, query_id: str, partition: int) -> SinkStateRecord | None:
        """The newest committed state record of ``partition`` of ``query_id``, if any."""
        key = state_key(query_id, partition)
        tp = TopicPartition(self.topic, self.partition_of(key))
        end = stable_end(self.admin, tp)
        if end == 0:
            return None
        found: SinkStateRecord | None = None
        consumer = Consumer(
            {
                **self.params,
                "group.id": f"odradek-spark-sink-state-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                # The read ends on an end-of-partition event (the last offset is a commit
                # marker, never a record): let the broker answer an empty fetch at once.
                "fetch.wait.max.ms": 10,
            }
        )
        try:
            consumer.assign([TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING)])
            deadline = time.monotonic() + TIMEOUT_S
            while True:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading {tp.topic}-{tp.partition} to offset {end} took too long")
                for message in consumer.consume(1000, 1.0):
                    error = message.error()
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF:
                            raise KafkaException(error)
                        if message.offset() >= end:
                            return found
                        continue
                    if message.key() == key:
                        found = SinkStateRecord.decode(message.key(), message.value())
                    if message.offset() >= end - 1:
                        return found
        finally:
            consumer.close()

def stable_end(admin: AdminClient, tp: TopicPartition, timeout_s: float = TIMEOUT_S) -> int:
    """The partition's high watermark, once its last stable offset has reached it (every
    transaction on it up to there complete, its markers written)."""
    high = _end(admin, tp, IsolationLevel.READ_UNCOMMITTED)
    deadline = time.monotonic() + timeout_s
    while _end(admin, tp, IsolationLevel.READ_COMMITTED) < high:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"a transaction kept {tp.topic}-{tp.partition} unstable below offset {high} "
                f"for {timeout_s:.0f} s"
            )
        time.sleep(_STABLE_POLL_S)
    return high


def _end(admin: AdminClient, tp: TopicPartition, isolation: IsolationLevel) -> int:
    futures = admin.list_offsets(
        {tp: OffsetSpec.latest()}, isolation_level=isolation, request_timeout=TIMEOUT_S
    )
    return futures[tp].result(TIMEOUT_S).offset


def _admin(options: SinkOptions) -> AdminClient:
    try:
        return AdminClient(connection_params(options.kafka_params))
    except KafkaException as e:
        raise OptionError("kafka.*", f"rejected by the Kafka client: {e}") from e
