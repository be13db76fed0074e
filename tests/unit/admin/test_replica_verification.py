"""The replica verification walk of Kafka's ReplicaVerificationTool, without brokers: replicas
agreeing up to their high watermarks, a checksum that differs, offsets that differ, a replica
missing from a round, and the periodic lag report."""

from __future__ import annotations

import pytest

from odradek.admin.replica_verification import (
    BatchInfo,
    FetchedReplica,
    ReplicaMismatch,
    ReplicaVerifier,
    batches_of,
    time_text,
)
from odradek.common import TopicPartition
from odradek.protocol.records import SimpleRecord, build_batch

TP = TopicPartition("t", 0)
NOW = 1_700_000_000_000


def batches(*last_offsets: int, crc: int = 7) -> list[BatchInfo]:
    return [BatchInfo(o, o + 1, crc) for o in last_offsets]


def verifier(replicas: int = 2, interval_ms: int = 1000) -> ReplicaVerifier:
    return ReplicaVerifier({TP: replicas}, {TP: 0}, interval_ms, NOW)


def test_agreeing_replicas_advance_to_the_lowest_high_watermark() -> None:
    v = verifier()
    lines = v.verify({TP: {1: FetchedReplica(3, batches(0, 1, 2)), 2: FetchedReplica(2, batches(0, 1, 2))}}, NOW + 10)
    assert lines == [] and v.offsets[TP] == 2  # replica 2's high watermark stops the walk at offset 2


def test_the_lag_is_reported_once_per_interval() -> None:
    v = verifier()
    fetched = {TP: {1: FetchedReplica(5, batches(0, 1)), 2: FetchedReplica(5, batches(0, 1))}}
    assert v.verify(fetched, NOW + 500) == []
    (line,) = v.verify(fetched, NOW + 1001)
    assert line == f"{time_text(NOW + 1001)}: max lag is 3 for partition t-0 at offset 2 among 1 partitions"
    assert v.verify(fetched, NOW + 1500) == []


def test_a_checksum_mismatch_is_printed_and_verification_goes_on() -> None:
    v = verifier()
    (line,) = v.verify({TP: {1: FetchedReplica(2, batches(0, 1)),
                             2: FetchedReplica(2, batches(0) + batches(1, crc=9))}}, NOW + 1)
    assert line == (f"{time_text(NOW + 1)}: partition t-0 has unmatched checksum at offset 1; replica 1's checksum 7; "
                    "replica 2's checksum 9")
    assert v.offsets[TP] == 2


def test_an_offset_mismatch_stops_the_tool() -> None:
    with pytest.raises(ReplicaMismatch, match="partition t-0: replica 1's offset 1 doesn't match replica 2's offset 2"):
        verifier().verify({TP: {1: FetchedReplica(5, batches(0, 1)), 2: FetchedReplica(5, batches(0, 2))}}, NOW)


def test_a_partition_missing_a_replica_waits_for_a_later_round() -> None:
    v = verifier(replicas=3)
    assert v.verify({TP: {1: FetchedReplica(2, batches(0, 1)), 2: FetchedReplica(2, batches(0, 1))}}, NOW + 1) == []
    assert v.offsets[TP] == 0


def test_batches_of_fetched_records_and_time_text() -> None:
    data = build_batch([SimpleRecord(b"v", b"k"), SimpleRecord(b"w")], base_offset=10)
    (batch,) = batches_of(bytes(data) + bytes(data)[:20])  # a cut batch at the end is left out
    assert (batch.last_offset, batch.next_offset) == (11, 12)
    assert int.from_bytes(bytes(data)[17:21], "big") == batch.checksum
    assert time_text(NOW + 5)[-4:] == ",005" and len(time_text(NOW)) == len("2023-11-14 22:13:20,000")
