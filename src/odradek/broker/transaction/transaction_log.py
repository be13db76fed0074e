"""The records of ``__transaction_state``, byte-compatible with Kafka's TransactionLog.

Every record's key is TransactionLogKey (int16 version 0, then the transactional id as an
int16-length string).  Its value is TransactionLogValue, again behind an int16 version:

* v0 (what Kafka 2.8 writes, and so does :func:`encode_value`): producer id int64, producer
  epoch int16, transaction timeout int32, transaction status int8 (the
  :class:`~odradek.broker.transaction.transaction_state.TransactionState` byte), the
  transaction's partitions as a nullable int32-count array of (topic string, int32 array of
  partition ids), last update timestamp int64, start timestamp int64;
* v1 (KIP-915, later Kafkas): the same fields in the flexible encoding (compact strings and
  arrays, a tagged-field section after each struct).  Its tagged fields (previous and next
  producer id, client transaction version) are skipped.

An Empty transaction is written with a null partition array, and its partitions are ignored on
reading, as Kafka does.  A null value is a tombstone: the transactional id expired and was
removed.  Sans-IO: bytes in, dataclasses out, and back; used by the transaction coordinator to
write its state and to load it when it becomes leader of a ``__transaction_state`` partition.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Protocol

from odradek.broker.transaction.transaction_state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalStateError,
    TransactionMetadata,
    TransactionState,
)
from odradek.common import TopicPartition
from odradek.protocol.record_codec import RecordFormatError, SchemaReader, SchemaWriter

__all__ = [
    "TRANSACTION_LOG_KEY_VERSION",
    "TRANSACTION_LOG_VALUE_VERSION",
    "TxnLogRecordError",
    "TxnLogValue",
    "TxnLogValueFields",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
]

TRANSACTION_LOG_KEY_VERSION = 0
TRANSACTION_LOG_VALUE_VERSION = 0  # written by Kafka 2.8
_HIGHEST_VALUE_VERSION = 1  # KIP-915's flexible v1


class TxnLogRecordError(RecordFormatError):
    """Bytes that are not a valid ``__transaction_state`` key or value."""


class TxnLogValueFields(Protocol):
    """What a value is written from: a :class:`TxnLogValue` or a prepared
    :class:`~odradek.broker.transaction.transaction_state.TxnTransitMetadata`."""

    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def txn_timeout_ms(self) -> int: ...
    @property
    def state(self) -> TransactionState: ...
    @property
    def topic_partitions(self) -> frozenset[TopicPartition]: ...
    @property
    def txn_last_update_timestamp(self) -> int: ...
    @property
    def txn_start_timestamp(self) -> int: ...


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_last_update_timestamp: int
    txn_start_timestamp: int

    def to_metadata(self, transactional_id: str) -> TransactionMetadata:
        """The cached metadata a loaded record becomes (Kafka's ``readTxnRecordValue``: the
        last producer id and epoch are not in v0 and start unknown)."""
        return TransactionMetadata(transactional_id, self.producer_id, NO_PRODUCER_ID, self.producer_epoch,
                                   NO_PRODUCER_EPOCH, self.txn_timeout_ms, self.state, set(self.topic_partitions),
                                   self.txn_start_timestamp, self.txn_last_update_timestamp)


# ----------------------------------------------------------------------------- writing


def encode_key(transactional_id: str) -> bytes:
    """TransactionLogKey v0."""
    w = SchemaWriter(TRANSACTION_LOG_KEY_VERSION, TxnLogRecordError)
    w.string(transactional_id)
    return w.finish()


def encode_value(value: TxnLogValueFields) -> bytes:
    """TransactionLogValue v0.  Topics and partition ids are written sorted (Kafka's order is
    that of a hash set, so any order reads the same)."""
    if value.state is TransactionState.EMPTY and value.topic_partitions:
        raise IllegalStateError(f"a transaction in state Empty cannot have partitions: {value}")
    w = SchemaWriter(TRANSACTION_LOG_VALUE_VERSION, TxnLogRecordError)
    w.i64(value.producer_id)
    w.i16(value.producer_epoch)
    w.i32(value.txn_timeout_ms)
    w.i8(value.state.value)
    if value.state is TransactionState.EMPTY:
        w.i32(-1)
    else:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in value.topic_partitions:
            by_topic[tp.topic].append(tp.partition)
        w.i32(len(by_topic))
        for topic in sorted(by_topic):
            ids = sorted(by_topic[topic])
            w.string(topic)
            w.i32(len(ids))
            for p in ids:
                w.i32(p)
    w.i64(value.txn_last_update_timestamp)
    w.i64(value.txn_start_timestamp)
    return w.finish()


# ----------------------------------------------------------------------------- reading


def decode_key(data: bytes) -> str:
    """The transactional id of a TransactionLogKey."""
    r = SchemaReader(data, error=TxnLogRecordError)
    version = r.i16()
    if version != TRANSACTION_LOG_KEY_VERSION:
        raise TxnLogRecordError(f"unknown transaction log key version {version}")
    return r.string()


def decode_value(data: bytes | None) -> TxnLogValue | None:
    """A TransactionLogValue of version 0 or 1; None for a tombstone."""
    if data is None:
        return None
    r = SchemaReader(data, error=TxnLogRecordError)
    r.version(_HIGHEST_VALUE_VERSION, _HIGHEST_VALUE_VERSION, "transaction log value")
    producer_id = r.i64()
    producer_epoch = r.i16()
    timeout_ms = r.i32()
    status = r.i8()
    try:
        state = TransactionState(status)
    except ValueError:
        raise TxnLogRecordError(f"unknown transaction state byte {status}") from None
    partitions: set[TopicPartition] = set()
    for _ in range(max(r.array_length(nullable=True), 0)):  # null (Empty): no partitions
        topic = r.string()
        count = r.array_length(nullable=True)
        if count < 0:
            raise TxnLogRecordError(f"null partition id array for topic {topic}")
        partitions.update(TopicPartition(topic, r.i32()) for _ in range(count))
        r.tagged_fields()
    last_update = r.i64()
    start = r.i64()
    r.tagged_fields()
    if state is TransactionState.EMPTY:
        partitions.clear()  # Kafka ignores them in Empty
    return TxnLogValue(producer_id, producer_epoch, timeout_ms, state, frozenset(partitions), last_update, start)
