"""The DescribeTransactions (key 65) v0 response read by hand.

Kafka sends ``transaction_start_time_ms = -1`` for a transactional id with no transaction
started since its coordinator loaded it (an Empty id read back from ``__transaction_state``),
and its clients read that as "no start time". kio's reader refuses a negative timestamp, so
an operator's ``odradek transactions describe`` reads this response here instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.record_codec import SchemaReader

__all__ = ["DescribeTransactionsResponseV0", "DescribedTransaction"]


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    error_code: int
    transactional_id: str
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int  # -1: none
    producer_id: int
    producer_epoch: int
    topics: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class DescribeTransactionsResponseV0:
    __api_key__ = ApiKey.DESCRIBE_TRANSACTIONS
    __version__ = 0
    __flexible__ = True

    throttle_time_ms: int
    transaction_states: tuple[DescribedTransaction, ...]

    @classmethod
    def read_body(cls, body: bytes) -> DescribeTransactionsResponseV0:
        """The response body (after its header); RecordFormatError for bytes that do not parse
        (``protocol.framing`` reads a response type with this method instead of kio)."""
        r = SchemaReader(body, flexible=True)
        throttle = r.i32()
        states = []
        for _ in range(r.array_length()):
            error, txn_id, state, timeout, start, pid, epoch = (r.i16(), r.string(), r.string(), r.i32(), r.i64(),
                                                                r.i64(), r.i16())
            topics = []
            for _ in range(r.array_length()):
                topic = r.string()
                partitions = tuple(r.i32() for _ in range(r.array_length()))
                r.tagged_fields()
                topics.append((topic, partitions))
            r.tagged_fields()
            states.append(DescribedTransaction(error, txn_id, state, timeout, start, pid, epoch, tuple(topics)))
        r.tagged_fields()
        return cls(throttle, tuple(states))

