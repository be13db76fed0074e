"""Idempotent producers: duplicates, sequence gaps, epoch fencing, and state rebuilt after
restarts and truncation."""

from __future__ import annotations

import struct
from collections.abc import Callable

import crc32c
import pytest
from log_helpers import T0, Clock, all_offsets, batch

from odradek.log.log import Log
from odradek.log.log_info import LogAppendInfo
from odradek.log.producer_state import InvalidProducerEpochError, OutOfOrderSequenceError

OpenLog = Callable[..., Log]
PID = 4242


def produce(lg: Log, seq: int, count: int = 2, epoch: int = 0, pid: int = PID) -> LogAppendInfo:
    return lg.append_as_leader(batch(count, producer_id=pid, producer_epoch=epoch,
                                     base_sequence=seq), leader_epoch=0)


def test_retried_batch_is_acknowledged_at_its_first_offsets(open_log: OpenLog) -> None:
    lg = open_log()
    first = produce(lg, 0)
    produce(lg, 2)
    retry = produce(lg, 0)
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    # Kafka answers a duplicate with the first append's timestamp as its log append time
    # (a CreateTime topic included), as the differential oracle showed.
    assert retry.log_append_time == T0 != first.log_append_time
    assert lg.log_end_offset == 4  # nothing appended twice
    for seq in range(4, 20, 2):
        produce(lg, seq)
    with pytest.raises(OutOfOrderSequenceError):
        produce(lg, 8)  # more than five batches back: no longer recognisable
    assert produce(lg, 12).duplicate  # one of the last five
    assert all_offsets(lg) == list(range(lg.log_end_offset))


def test_sequence_gaps_and_epochs(open_log: OpenLog) -> None:
    lg = open_log()
    produce(lg, 0, epoch=3)
    with pytest.raises(OutOfOrderSequenceError):
        produce(lg, 5, epoch=3)  # gap
    with pytest.raises(InvalidProducerEpochError):
        produce(lg, 2, epoch=2)  # a zombie with an older epoch
    with pytest.raises(OutOfOrderSequenceError):
        produce(lg, 7, epoch=4)  # a new epoch must start at 0
    assert lg.log_end_offset == 2
    assert produce(lg, 0, epoch=4).first_offset == 2  # bumped epoch restarts sequences
    assert produce(lg, 2, epoch=4).first_offset == 4
    assert produce(lg, 0, epoch=0, pid=7).first_offset == 6  # another producer
    assert produce(lg, 33, pid=8).first_offset == 8  # unknown producer: any sequence (KIP-360)


def test_several_batches_of_one_producer_in_one_append(open_log: OpenLog) -> None:
    lg = open_log()
    two = batch(2, producer_id=PID, producer_epoch=0, base_sequence=0) + batch(
        3, producer_id=PID, producer_epoch=0, base_sequence=2)
    assert lg.append_as_leader(two, leader_epoch=0).last_offset == 4
    gap = batch(1, producer_id=PID, producer_epoch=0, base_sequence=5) + batch(
        1, producer_id=PID, producer_epoch=0, base_sequence=7)
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(gap, leader_epoch=0)
    assert lg.log_end_offset == 5 and produce(lg, 5).first_offset == 5


def test_sequence_wraps_at_int32_max(open_log: OpenLog) -> None:
    lg = open_log()
    produce(lg, 2**31 - 2, count=3)  # sequences MAX-1, MAX, 0
    assert produce(lg, 1).first_offset == 3
    with pytest.raises(OutOfOrderSequenceError):
        produce(lg, 0)


@pytest.mark.parametrize("clean", [True, False])
def test_state_survives_restart(open_log: OpenLog, clean: bool) -> None:
    lg = open_log()
    offsets = [produce(lg, seq).first_offset for seq in range(0, 10, 2)]
    if clean:
        lg.flush()
        lg.close()  # writes a snapshot at the log end offset
        snapshots = sorted(p.name for p in lg.dir.iterdir() if p.suffix == ".snapshot")
        assert snapshots == ["00000000000000000010.snapshot"]
    again = open_log(had_clean_shutdown=clean)
    retry = produce(again, 8)
    assert retry.duplicate and retry.first_offset == offsets[-1]
    if not clean:  # rebuilt from the log itself: all five recent batches are known
        assert produce(again, 0).first_offset == offsets[0]
    with pytest.raises(OutOfOrderSequenceError):
        produce(again, 12)
    assert produce(again, 10).first_offset == 10


def test_snapshot_is_kafkas_format(open_log: OpenLog) -> None:
    lg = open_log()
    produce(lg, 0, count=3, epoch=2)
    lg.close()
    raw = (lg.dir / "00000000000000000003.snapshot").read_bytes()
    version, crc, count = struct.unpack_from(">hIi", raw)
    assert (version, count) == (1, 1) and crc == crc32c.crc32c(raw[6:])
    pid, epoch, last_seq, last_offset, delta, _ts, coordinator, txn = struct.unpack_from(
        ">qhiqiqiq", raw, 10)
    assert (pid, epoch, last_seq, last_offset, delta, coordinator, txn) == (
        PID, 2, 2, 2, 2, -1, -1)


def test_truncation_rebuilds_state(open_log: OpenLog) -> None:
    lg = open_log()
    for seq in range(0, 8, 2):
        produce(lg, seq)
    lg.truncate_to(4)  # the batches with sequences 4.. are gone
    with pytest.raises(OutOfOrderSequenceError):
        produce(lg, 6)
    assert produce(lg, 4).first_offset == 4 and not produce(lg, 6).duplicate


def test_idle_producers_expire(open_log: OpenLog, clock: Clock) -> None:
    lg = open_log(producer_id_expiration_ms=1000)
    lg.append_as_leader(batch(1, ts=clock.now, producer_id=PID, producer_epoch=0,
                              base_sequence=0), leader_epoch=0)
    clock.advance(2000)
    lg.producer_state.remove_expired_producers(clock.now)
    assert PID not in lg.producer_state.producers
    assert produce(lg, 40).first_offset == 1  # forgotten: any sequence again
