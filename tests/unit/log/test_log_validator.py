"""LogValidator's rule for compacted topics: every record needs a key (Kafka's
LogValidator.validateKey); keyless records are named by their index in the batch and the
whole append fails, uncompressed or compressed.  Records too far from now are named the
same way (INVALID_TIMESTAMP)."""

from __future__ import annotations

import pytest
from log_helpers import T0, batch, config

from odradek.log.log_validator import (
    RecordValidationError,
    TimestampValidationError,
    keyless_records,
    validate_produced,
)
from odradek.protocol.errors import CorruptMessageError, ErrorCode, InvalidRecordError
from odradek.protocol.records import CompressionType, SimpleRecord, build_batch, parse_header

COMPACT = config(cleanup_policy=("compact",))
MESSAGE = "Compacted topic cannot accept message without key in topic partition events-3."


def mixed(compression: CompressionType = CompressionType.NONE) -> bytes:
    records = [SimpleRecord(b"a", b"k1"), SimpleRecord(b"b", None), SimpleRecord(b"c", b"k2"),
               SimpleRecord(None, None)]
    return build_batch(records, timestamp=T0, compression=compression)


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.GZIP])
def test_keyless_records_are_found_by_their_index_in_the_batch(compression: CompressionType) -> None:
    buf = mixed(compression)
    assert keyless_records(buf, 0, parse_header(buf)) == [1, 3]


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.GZIP])
def test_a_compacted_topic_refuses_a_batch_with_keyless_records(compression: CompressionType) -> None:
    buf = batch(2, key=b"k") + mixed(compression)
    with pytest.raises(RecordValidationError) as raised:
        validate_produced(buf, COMPACT, T0, "events-3")
    assert isinstance(raised.value, InvalidRecordError)
    assert str(raised.value) == "One or more records have been rejected"
    assert raised.value.record_errors == [(1, MESSAGE), (3, MESSAGE)]


def test_keyed_records_and_tombstones_pass_and_other_policies_take_keyless_records() -> None:
    tombstone = build_batch([SimpleRecord(None, b"gone")], timestamp=T0)
    assert len(validate_produced(batch(3, key=b"k") + tombstone, COMPACT, T0, "events-3")) == 2
    both = config(cleanup_policy=("compact", "delete"))
    with pytest.raises(RecordValidationError):
        validate_produced(batch(1), both, T0, "events-3")
    assert validate_produced(batch(1), config(), T0, "events-3")


def test_a_record_running_past_its_batch_is_corrupt() -> None:
    buf = bytearray(build_batch([SimpleRecord(b"v", b"k")], timestamp=T0))
    header = parse_header(buf)
    buf[61] = 0x7E  # the first record's length (a varlong): far beyond the batch
    with pytest.raises(CorruptMessageError):
        keyless_records(buf, 0, header)


def test_an_append_to_a_compacted_log_with_a_keyless_record_appends_nothing(open_log) -> None:
    lg = open_log(COMPACT, name="events-3")
    lg.append_as_leader(batch(1, key=b"k"), 0)
    with pytest.raises(RecordValidationError) as raised:
        lg.append_as_leader(batch(1, key=b"k") + batch(1), 0)
    assert raised.value.record_errors == [(0, MESSAGE)]
    assert lg.log_end_offset == 1


def test_records_out_of_the_timestamp_range_are_named_by_index() -> None:
    hour = 3_600_000
    records = [SimpleRecord(b"a", b"k", timestamp=T0), SimpleRecord(b"b", b"k", timestamp=T0 - 2 * hour),
               SimpleRecord(b"c", b"k", timestamp=T0 + 1000), SimpleRecord(b"d", b"k", timestamp=T0 + 2 * hour)]
    limited = config(message_timestamp_difference_max_ms=hour)
    with pytest.raises(TimestampValidationError) as raised:
        validate_produced(build_batch(records, timestamp=T0), limited, T0, "events-3")
    assert raised.value.code == ErrorCode.invalid_timestamp
    assert [index for index, _ in raised.value.record_errors] == [1, 3]
    assert validate_produced(build_batch(records[:1] + records[2:3], timestamp=T0), limited, T0, "events-3")
