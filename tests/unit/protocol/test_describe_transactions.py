"""DescribeTransactions v0 responses read by hand, including the start time -1 kio refuses."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.describe_transactions.v0 import response as r

from odradek.protocol.describe_transactions import (
    DescribedTransaction,
    DescribeTransactionsResponseV0,
)
from odradek.protocol.framing import MalformedResponseError, decode_response, encode_response
from odradek.protocol.messages import build


def response_frame(start_ms: int) -> bytes:
    payload = build(r.DescribeTransactionsResponse, throttle_time=datetime.timedelta(milliseconds=7),
                    transaction_states=(build(
                        r.TransactionState, error_code=0, transactional_id="tx", transaction_state="Ongoing",
                        transaction_timeout=datetime.timedelta(seconds=60),
                        transaction_start_time=datetime.datetime.fromtimestamp(start_ms / 1000, tz=datetime.UTC),
                        producer_id=42, producer_epoch=3,
                        topics=(build(r.TopicData, topic="t", partitions=(0, 2)),
                                build(r.TopicData, topic="u", partitions=(1,)))),))
    return encode_response(payload, 99)[4:]  # without the size prefix


@pytest.mark.parametrize("start_ms", [-1, 1_795_000_000_123])
def test_reads_what_kafka_sends(start_ms: int) -> None:
    correlation_id, got = decode_response(response_frame(start_ms), DescribeTransactionsResponseV0)
    assert correlation_id == 99
    assert got == DescribeTransactionsResponseV0(7, (DescribedTransaction(
        0, "tx", "Ongoing", 60_000, start_ms, 42, 3, (("t", (0, 2)), ("u", (1,)))),))


def test_truncated_bytes_are_malformed() -> None:
    frame = response_frame(5)
    with pytest.raises(MalformedResponseError):
        decode_response(frame[:-6], DescribeTransactionsResponseV0)
