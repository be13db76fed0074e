"""The ``__transaction_state`` record codec against byte vectors built by hand from Kafka's
TransactionLogKey/TransactionLogValue schemas (value v0 as Kafka 2.8 writes it, v1 in the
flexible encoding), round trips, tombstones and corrupt input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.broker.transaction.transaction_log import (
    TxnLogRecordError,
    TxnLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from odradek.broker.transaction.transaction_state import (
    IllegalStateError,
    TransactionMetadata,
    TransactionState,
)
from odradek.common import TopicPartition
from odradek.protocol.varint import encode_uvarint

S = TransactionState


def h(text: str) -> bytes:
    """Hex with spaces and ``|`` separators, as written below field by field."""
    return bytes.fromhex(text.replace("|", " "))


# TransactionLogKey v0: version 0 | transactional id "txn"
KEY = h("0000 | 0003 74786e")
ONGOING = TxnLogValue(producer_id=1000, producer_epoch=2, txn_timeout_ms=60000, state=S.ONGOING,
                      topic_partitions=frozenset({TopicPartition("b", 2), TopicPartition("a", 1),
                                                  TopicPartition("a", 0)}),
                      txn_last_update_timestamp=5000, txn_start_timestamp=4000)
# TransactionLogValue v0: version 0 | producer id 1000 | epoch 2 | timeout 60000 | status Ongoing (1)
# | 2 topics: "a" [0, 1], "b" [2] | last update 5000 | start 4000
ONGOING_V0 = h("0000 | 00000000000003e8 | 0002 | 0000ea60 | 01 | 00000002"
               "| 0001 61 | 00000002 | 00000000 00000001 | 0001 62 | 00000001 | 00000002"
               "| 0000000000001388 | 0000000000000fa0")
# The same in v1 (flexible): compact arrays and strings (n + 1), a tagged-field count after each
# partition entry, and at the end two tagged fields: PreviousProducerId (tag 0) = 999 and
# ClientTransactionVersion (tag 2) = 2, which are skipped.
ONGOING_V1 = h("0001 | 00000000000003e8 | 0002 | 0000ea60 | 01 | 03"
               "| 02 61 | 03 00000000 00000001 | 00 | 02 62 | 02 00000002 | 00"
               "| 0000000000001388 | 0000000000000fa0 | 02 | 00 08 00000000000003e7 | 02 02 0002")
EMPTY = TxnLogValue(1000, 3, 60000, S.EMPTY, frozenset(), 5000, -1)
# Empty: the partition array is null (-1)
EMPTY_V0 = h("0000 | 00000000000003e8 | 0003 | 0000ea60 | 00 | ffffffff | 0000000000001388 | ffffffffffffffff")


def test_key() -> None:
    assert encode_key("txn") == KEY
    assert decode_key(KEY) == "txn"


def test_value_v0_bytes() -> None:
    assert encode_value(ONGOING) == ONGOING_V0
    assert decode_value(ONGOING_V0) == ONGOING


def test_empty_writes_null_partitions() -> None:
    assert encode_value(EMPTY) == EMPTY_V0
    assert decode_value(EMPTY_V0) == EMPTY


def test_partitions_of_an_empty_record_are_ignored() -> None:
    # An Empty record that carries partitions anyway (status 00, one topic "a" [0]).
    data = h("0000 | 00000000000003e8 | 0003 | 0000ea60 | 00 | 00000001 | 0001 61 | 00000001 | 00000000"
             "| 0000000000001388 | ffffffffffffffff")
    assert decode_value(data) == EMPTY


def test_empty_with_partitions_is_not_written() -> None:
    bad = TxnLogValue(1, 0, 1, S.EMPTY, frozenset({TopicPartition("a", 0)}), 0, -1)
    with pytest.raises(IllegalStateError, match="Empty cannot have partitions"):
        encode_value(bad)


def test_value_v1_flexible() -> None:
    assert decode_value(ONGOING_V1) == ONGOING


def test_complete_state_writes_an_empty_array() -> None:
    value = TxnLogValue(1, 0, 1, S.COMPLETE_COMMIT, frozenset(), 0, 0)
    assert encode_value(value)[2 + 8 + 2 + 4:][:5] == h("04 | 00000000")
    assert decode_value(encode_value(value)) == value


def test_tombstone() -> None:
    assert decode_value(None) is None


def test_written_from_a_prepared_transition() -> None:
    md = TransactionMetadata.new("txn", producer_id=1000, producer_epoch=2, txn_timeout_ms=60000, timestamp=3000)
    transit = md.prepare_add_partitions(ONGOING.topic_partitions, 4000)
    transit_value = decode_value(encode_value(transit))
    assert transit_value == TxnLogValue(1000, 2, 60000, S.ONGOING, ONGOING.topic_partitions, 4000, 4000)


def test_to_metadata() -> None:
    md = ONGOING.to_metadata("txn")
    assert (md.transactional_id, md.producer_id, md.producer_epoch, md.state) == ("txn", 1000, 2, S.ONGOING)
    assert (md.last_producer_id, md.last_producer_epoch, md.pending_state) == (-1, -1, None)
    assert md.topic_partitions == set(ONGOING.topic_partitions)
    assert (md.txn_start_timestamp, md.txn_last_update_timestamp, md.txn_timeout_ms) == (4000, 5000, 60000)


# ----------------------------------------------------------------------------- corrupt input


@pytest.mark.parametrize("data", [ONGOING_V0, ONGOING_V1, EMPTY_V0], ids=["v0", "v1", "empty"])
def test_every_truncation_is_reported(data: bytes) -> None:
    for n in range(len(data)):
        with pytest.raises(TxnLogRecordError, match="truncated"):
            decode_value(data[:n])


@pytest.mark.parametrize(("data", "message"), [
    (h("0002") + ONGOING_V0[2:], "unknown transaction log value version 2"),
    (h("ffff") + ONGOING_V0[2:], "unknown transaction log value version -1"),
    (ONGOING_V0[:16] + h("08") + ONGOING_V0[17:], "unknown transaction state byte 8"),
    (ONGOING_V0[:17] + h("fffffffe") + ONGOING_V0[21:], "invalid array length -2"),
    (ONGOING_V0[:17] + h("7fffffff") + ONGOING_V0[21:], "an array of 2147483647 elements"),
    (ONGOING_V0[:24] + h("ffffffff") + ONGOING_V0[28:], "null partition id array for topic a"),
    (ONGOING_V0[:21] + h("ffff") + ONGOING_V0[23:], "unexpected null string"),
    (ONGOING_V0[:23] + h("ff") + ONGOING_V0[24:], "invalid UTF-8"),
    (ONGOING_V1[:17] + h("ffffffffff"), "varint is longer"),
])
def test_corrupt_value(data: bytes, message: str) -> None:
    with pytest.raises(TxnLogRecordError, match=message):
        decode_value(data)


@pytest.mark.parametrize(("data", "message"), [
    (h("0001 | 0003 74786e"), "unknown transaction log key version 1"),
    (h("0000 | 0005 74786e"), "truncated"),
    (h("00"), "truncated"),
])
def test_corrupt_key(data: bytes, message: str) -> None:
    with pytest.raises(TxnLogRecordError, match=message):
        decode_key(data)


# ----------------------------------------------------------------------------- round trips


def encode_value_v1(v: TxnLogValue) -> bytes:
    """TransactionLogValue v1 written independently of the module, from the JSON schema."""
    def string(s: str) -> bytes:
        data = s.encode("utf-8")
        return encode_uvarint(len(data) + 1) + data

    out = h("0001") + v.producer_id.to_bytes(8, "big", signed=True) + v.producer_epoch.to_bytes(2, "big", signed=True)
    out += v.txn_timeout_ms.to_bytes(4, "big", signed=True) + bytes([v.state.value])
    topics = sorted({tp.topic for tp in v.topic_partitions})
    if v.state is S.EMPTY:
        out += h("00")  # null
    else:
        out += encode_uvarint(len(topics) + 1)
        for topic in topics:
            ids = sorted(tp.partition for tp in v.topic_partitions if tp.topic == topic)
            out += string(topic) + encode_uvarint(len(ids) + 1)
            out += b"".join(p.to_bytes(4, "big", signed=True) for p in ids) + h("00")
    out += v.txn_last_update_timestamp.to_bytes(8, "big", signed=True)
    return out + v.txn_start_timestamp.to_bytes(8, "big", signed=True) + h("00")


INT64 = st.integers(-2**63, 2**63 - 1)


@st.composite
def values(draw: st.DrawFn) -> TxnLogValue:
    state = draw(st.sampled_from(S))
    partitions: frozenset[TopicPartition] = frozenset()
    if state is not S.EMPTY:
        partitions = draw(st.frozensets(st.builds(TopicPartition, st.text(max_size=20),
                                                  st.integers(-2**31, 2**31 - 1)), max_size=8))
    return TxnLogValue(draw(INT64), draw(st.integers(-2**15, 2**15 - 1)), draw(st.integers(-2**31, 2**31 - 1)),
                       state, partitions, draw(INT64), draw(INT64))


@given(values())
def test_value_round_trip(value: TxnLogValue) -> None:
    encoded = encode_value(value)
    assert decode_value(encoded) == value
    assert decode_value(encode_value_v1(value)) == value


@given(st.text(max_size=100))
def test_key_round_trip(transactional_id: str) -> None:
    assert decode_key(encode_key(transactional_id)) == transactional_id


@given(st.binary(max_size=64))
def test_garbage_fails_cleanly(data: bytes) -> None:
    """Arbitrary bytes decode or raise TxnLogRecordError, never struct.error or IndexError."""
    for decode in (decode_value, decode_key):
        try:
            decode(data)
        except TxnLogRecordError:
            pass
