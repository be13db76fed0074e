"""Log: appends as leader and follower, reads, rolls, ListOffsets, validation, flushes."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from log_helpers import T0, Clock, all_offsets, batch, config

from odradek.log.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Log,
    UnexpectedAppendOffsetError,
)
from odradek.log.log_validator import InvalidTimestampError
from odradek.protocol.errors import (
    CorruptMessageError,
    InvalidRecordError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from odradek.protocol.records import (
    SimpleRecord,
    TimestampType,
    build_batch,
    check_crc,
    compute_crc,
    decode_batch,
    iter_batches,
    parse_header,
)

OpenLog = Callable[..., Log]


def test_append_assigns_offsets_and_epochs(open_log: OpenLog) -> None:
    lg = open_log()
    first = lg.append_as_leader(batch(3, ts=T0 + 5), leader_epoch=4)
    assert (first.first_offset, first.last_offset, first.max_timestamp) == (0, 2, T0 + 5)
    assert first.log_append_time == -1 and first.num_records == 3 and first.num_batches == 1
    two = batch(2) + batch(1)  # a request may carry several batches
    second = lg.append_as_leader(bytearray(two), leader_epoch=4)
    assert (second.first_offset, second.last_offset, second.num_batches) == (3, 5, 2)
    assert lg.log_end_offset == 6
    data = lg.read(0, 1 << 20).read_bytes()
    headers = [h for _, h in iter_batches(data)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 4), (3, 4), (5, 4)]
    for pos, h in iter_batches(data):
        check_crc(data, pos, h)
    assert lg.leader_epoch_cache.entries[0].epoch == 4
    lg.append_as_leader(batch(1), leader_epoch=6)
    assert [(e.epoch, e.start_offset) for e in lg.leader_epoch_cache.entries] == [(4, 0), (6, 6)]


def test_reads_across_segment_rolls(open_log: OpenLog) -> None:
    lg = open_log(config(segment_bytes=1000, index_interval_bytes=64))
    for i in range(100):
        lg.append_as_leader(batch(1 + i % 4, size=20 + i), leader_epoch=0)
    assert len(lg.segments) > 10
    total = lg.log_end_offset
    assert all_offsets(lg) == list(range(total))
    assert all_offsets(lg, max_bytes=1) == list(range(total))  # min_one_message
    assert all_offsets(lg, start=total // 2) == list(range(total // 2, total))
    for seg, nxt in zip(lg.segments, lg.segments[1:], strict=False):
        assert seg.next_offset == nxt.base_offset
        assert seg.log_path.name == f"{seg.base_offset:020d}.log"


def test_read_chunks_covers_the_log_in_whole_batches(open_log: OpenLog) -> None:
    lg = open_log(config(segment_bytes=1000, index_interval_bytes=64))
    for i in range(60):
        lg.append_as_leader(batch(1 + i % 4, size=20 + i), leader_epoch=0)
    lg.update_high_watermark(lg.log_end_offset)
    lg.maybe_increment_log_start_offset(lg.segments[1].base_offset)
    chunks = list(lg.read_chunks(300))
    assert len(chunks) > 5
    offsets = [o for chunk in chunks for _, h in iter_batches(chunk) for o in range(h.base_offset, h.next_offset)]
    assert offsets == list(range(lg.log_start_offset, lg.log_end_offset))


def test_read_limits(open_log: OpenLog) -> None:
    lg = open_log()
    for _ in range(10):
        lg.append_as_leader(batch(2, size=100), leader_epoch=0)
    size = len(batch(2, size=100))
    info = lg.read(0, size * 3 + 10)
    assert info.size == size * 3 and len(info.regions) == 1
    assert lg.read(0, size - 1).size == size  # min_one_message
    assert lg.read(0, size - 1, min_one_message=False).size == 0
    assert lg.read(7, size).read_bytes()[:8] == struct.pack(">q", 6)  # the batch holding 7
    assert lg.read(20, 100).size == 0  # at the log end: empty
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(21, 100)
    region = lg.read(4, size).regions[0]
    assert region.path == lg.active_segment.log_path and region.read() == lg.read(
        4, size).read_bytes()


def test_consumer_reads_stop_at_high_watermark(open_log: OpenLog) -> None:
    lg = open_log()
    for _ in range(10):
        lg.append_as_leader(batch(2), leader_epoch=0)
    assert lg.high_watermark == 0
    assert lg.update_high_watermark(7) == 7
    # HW mid-batch: the batch holding it is not exposed (Kafka's maxPosition semantics)
    assert all_offsets(lg, max_offset=lg.high_watermark) == list(range(6))
    lg.update_high_watermark(8)
    assert all_offsets(lg, max_offset=lg.high_watermark) == list(range(8))
    assert lg.read(8, 1000, max_offset=8).size == 0
    assert all_offsets(lg) == list(range(20))  # followers read to the log end
    assert lg.update_high_watermark(100) == 20  # clamped to the log end
    assert not lg.maybe_increment_high_watermark(5)


def test_high_watermark_bound_across_segments(open_log: OpenLog) -> None:
    lg = open_log(config(segment_bytes=300))
    for _ in range(20):
        lg.append_as_leader(batch(1, size=50), leader_epoch=0)
    for hw in (0, 3, 4, 5, 11, 19, 20):
        lg.update_high_watermark(hw)
        assert all_offsets(lg, max_offset=hw, max_bytes=250) == list(range(hw))


def test_offset_for_timestamp(open_log: OpenLog) -> None:
    lg = open_log(config(segment_bytes=600, index_interval_bytes=1))
    for i in range(30):
        records = [SimpleRecord(b"x", timestamp=T0 + 10 * i + j) for j in range(3)]
        lg.append_as_leader(build_batch(records), leader_epoch=2)
    assert len(lg.segments) > 2
    got = lg.offset_for_timestamp(T0 + 101)  # record 1 of batch 10
    assert (got.timestamp, got.offset, got.leader_epoch) == (T0 + 101, 31, 2)
    got = lg.offset_for_timestamp(T0 + 104)  # between batches: first record of batch 11
    assert (got.timestamp, got.offset) == (T0 + 110, 33)
    assert lg.offset_for_timestamp(T0 - 5).offset == 0
    assert lg.offset_for_timestamp(T0 + 1000) is None
    assert lg.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 0
    assert lg.offset_for_timestamp(LATEST_TIMESTAMP).offset == 90
    newest = lg.offset_for_timestamp(MAX_TIMESTAMP)
    assert (newest.timestamp, newest.offset) == (T0 + 292, 89)
    lg.update_high_watermark(33)
    assert lg.offset_for_timestamp(LATEST_TIMESTAMP, max_offset=lg.high_watermark).offset == 33
    assert lg.offset_for_timestamp(T0 + 104, max_offset=lg.high_watermark) is None
    assert lg.offset_for_timestamp(T0 + 101, max_offset=lg.high_watermark).offset == 31


def test_offset_for_timestamp_out_of_order_timestamps(open_log: OpenLog) -> None:
    lg = open_log(config(index_interval_bytes=1))
    lg.append_as_leader(build_batch([SimpleRecord(b"a", timestamp=T0 + 50)]), leader_epoch=0)
    lg.append_as_leader(build_batch([SimpleRecord(b"b", timestamp=T0 + 10)]), leader_epoch=0)
    lg.append_as_leader(build_batch([SimpleRecord(b"c", timestamp=T0 + 60)]), leader_epoch=0)
    assert lg.offset_for_timestamp(T0 + 5).offset == 0
    assert lg.offset_for_timestamp(T0 + 55).offset == 2


def test_max_timestamp_is_the_record_that_carries_it(open_log: OpenLog) -> None:
    # ListOffsets v7's MAX_TIMESTAMP answers the newest record's own offset, not its batch's
    # last one (Kafka's Java AdminClient, OffsetSpec.maxTimestamp(), found it).
    lg = open_log(config(index_interval_bytes=1))
    lg.append_as_leader(build_batch([SimpleRecord(b"a", timestamp=T0 + 5)]), leader_epoch=0)
    lg.append_as_leader(build_batch([SimpleRecord(v, timestamp=T0 + ts) for v, ts in
                                     ((b"b", 6), (b"c", 50), (b"d", 7))]), leader_epoch=0)
    lg.append_as_leader(build_batch([SimpleRecord(b"e", timestamp=T0 + 8)]), leader_epoch=0)
    newest = lg.offset_for_timestamp(MAX_TIMESTAMP)
    assert (newest.timestamp, newest.offset) == (T0 + 50, 2)


def test_log_append_time(open_log: OpenLog, clock: Clock) -> None:
    lg = open_log(config(message_timestamp_type="LogAppendTime"))
    clock.advance(12_345)
    info = lg.append_as_leader(batch(3, ts=5), leader_epoch=0)
    assert info.log_append_time == clock.now == info.max_timestamp
    header, records = decode_batch(lg.read(0, 1 << 20).read_bytes())
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in records] == [clock.now] * 3
    assert lg.offset_for_timestamp(clock.now).offset == 0


@pytest.mark.parametrize(("mutate", "error"), [
    (lambda b: b.__setitem__(-1, b[-1] ^ 1), CorruptMessageError),  # CRC
    (lambda b: b.extend(b"\x00" * 5), CorruptMessageError),  # trailing bytes
    (lambda b: b.__setitem__(16, 1), InvalidRecordError),  # magic 1
    (lambda b: b.__setitem__(slice(0, len(b)), b""), InvalidRecordError),  # no batch
])
def test_invalid_produce_appends_nothing(open_log: OpenLog, mutate: Callable, error: type) -> None:
    lg = open_log()
    lg.append_as_leader(batch(1), leader_epoch=0)
    raw = bytearray(batch(2))
    mutate(raw)
    with pytest.raises(error):
        lg.append_as_leader(raw, leader_epoch=0)
    assert lg.log_end_offset == 1 and lg.active_segment.size == len(batch(1))


def test_size_limits(open_log: OpenLog) -> None:
    lg = open_log(config(max_message_bytes=200, segment_bytes=1000))
    with pytest.raises(MessageTooLargeError):
        lg.append_as_leader(batch(1, size=300), leader_epoch=0)
    with pytest.raises(RecordListTooLargeError):
        lg.append_as_leader(b"".join(batch(1, size=100) for _ in range(10)), leader_epoch=0)
    assert lg.log_end_offset == 0


def test_client_rules(open_log: OpenLog, clock: Clock) -> None:
    lg = open_log(config(message_timestamp_difference_max_ms=1000))
    with pytest.raises(InvalidTimestampError):
        lg.append_as_leader(batch(1, ts=clock.now - 5000), leader_epoch=0)
    lg.append_as_leader(batch(1, ts=clock.now - 500), leader_epoch=0)
    with pytest.raises(InvalidRecordError):  # idempotent batch without a sequence
        lg.append_as_leader(batch(1, producer_id=5, producer_epoch=0), leader_epoch=0)
    control = bytearray(batch(1))
    control[22] |= 0x20
    struct.pack_into(">I", control, 17, compute_crc(control, 0, parse_header(control)))
    with pytest.raises(InvalidRecordError):
        lg.append_as_leader(control, leader_epoch=0)
    assert lg.log_end_offset == 1


def test_roll_by_time_and_full_index(open_log: OpenLog, clock: Clock) -> None:
    lg = open_log(config(segment_ms=1000))
    lg.append_as_leader(batch(1, ts=clock.now), leader_epoch=0)
    lg.append_as_leader(batch(1, ts=clock.now + 999), leader_epoch=0)
    assert len(lg.segments) == 1
    lg.append_as_leader(batch(1, ts=clock.now + 1001), leader_epoch=0)  # by message timestamps
    assert [s.base_offset for s in lg.segments] == [0, 2]
    small_index = open_log(config(index_interval_bytes=1, segment_index_bytes=8 * 4), name="idx-0")
    for _ in range(12):
        small_index.append_as_leader(batch(1), leader_epoch=0)
    assert len(small_index.segments) >= 3
    assert all_offsets(small_index) == list(range(12))


def test_follower_append(open_log: OpenLog) -> None:
    leader = open_log(name="lead-0")
    for epoch in (1, 1, 3):
        leader.append_as_leader(batch(2), leader_epoch=epoch)
    fetched = leader.read(0, 1 << 20).read_bytes()
    follower = open_log(name="follow-0")
    info = follower.append_as_follower(fetched + fetched[:30])  # a partial trailing batch
    assert (info.first_offset, info.last_offset, info.valid_bytes) == (0, 5, len(fetched))
    assert follower.read(0, 1 << 20).read_bytes() == fetched  # byte-identical
    assert [(e.epoch, e.start_offset) for e in follower.leader_epoch_cache.entries] == [
        (1, 0), (3, 4)]
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(fetched)
    corrupt = bytearray(leader.read(4, 1 << 20).read_bytes())
    corrupt[-1] ^= 1
    follower.truncate_to(4)
    with pytest.raises(CorruptMessageError):
        follower.append_as_follower(corrupt)
    assert follower.log_end_offset == 4


def test_a_replica_starting_over_inside_a_batch_takes_the_batch_whole(open_log: OpenLog) -> None:
    """A replica reset to the leader's log start, which DeleteRecords had put inside a batch,
    was refused that batch on every fetch (UnexpectedAppendOffsetError) and never caught up;
    as Kafka's Partition does, the empty log starts over at the batch's base offset."""
    leader = open_log(name="lead-0")
    for epoch in (1, 2):
        leader.append_as_leader(batch(4), leader_epoch=epoch)
    leader.update_high_watermark(8)
    leader.maybe_increment_log_start_offset(6)
    fetched = leader.read(6, 1 << 20).read_bytes()  # the batch holding offset 6: offsets 4-7
    follower = open_log(name="follow-0")
    follower.truncate_fully_and_start_at(6)  # the fetcher's reset to the leader's log start
    corrupt = bytearray(fetched)
    corrupt[-1] ^= 1
    with pytest.raises(CorruptMessageError):
        follower.append_as_follower(corrupt)
    assert (follower.log_start_offset, follower.log_end_offset) == (6, 6)  # nothing truncated
    info = follower.append_as_follower(fetched)
    assert (info.first_offset, follower.log_start_offset, follower.log_end_offset) == (4, 4, 8)
    assert follower.read(4, 1 << 20).read_bytes() == fetched
    assert [(e.epoch, e.start_offset) for e in follower.leader_epoch_cache.entries] == [(2, 4)]
    with pytest.raises(UnexpectedAppendOffsetError):  # a log that is not empty still refuses it
        follower.append_as_follower(fetched)


def test_truncate_to(open_log: OpenLog) -> None:
    lg = open_log(config(segment_bytes=400))
    for i in range(20):
        lg.append_as_leader(batch(2, size=50), leader_epoch=i // 5)
    lg.update_high_watermark(40)
    assert len(lg.segments) > 3
    assert not lg.truncate_to(40)
    assert lg.truncate_to(15)  # mid-batch: batch [14, 15] goes entirely
    assert lg.log_end_offset == 14 and lg.high_watermark == 14
    assert all_offsets(lg) == list(range(14))
    assert lg.latest_epoch == 1 and lg.leader_epoch_cache.entries[-1].start_offset == 10
    assert lg.append_as_leader(batch(1), leader_epoch=7).first_offset == 14
    assert not any(p.name.endswith(".log") and int(p.name[:20]) > 14
                   for p in lg.dir.iterdir())
    assert all_offsets(lg) == list(range(15))


def test_truncating_at_the_end_drops_an_empty_last_epoch(open_log: OpenLog) -> None:
    # A leader of epoch 2 that wrote nothing before it was deposed (Kafka's truncateTo does the same).
    lg = open_log()
    lg.append_as_leader(batch(3), leader_epoch=1)
    lg.assign_epoch_start_offset(2, lg.log_end_offset)
    assert lg.latest_epoch == 2
    assert not lg.truncate_to(3)
    assert lg.latest_epoch == 1 and lg.log_end_offset == 3


def test_truncate_fully_and_start_at(open_log: OpenLog) -> None:
    lg = open_log()
    for _ in range(5):
        lg.append_as_leader(batch(1), leader_epoch=1)
    lg.truncate_fully_and_start_at(100)
    assert (lg.log_start_offset, lg.log_end_offset, lg.recovery_point) == (100, 100, 100)
    assert lg.leader_epoch_cache.entries == []
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, 100)
    assert lg.append_as_leader(batch(1), leader_epoch=2).first_offset == 100
    assert [s.base_offset for s in lg.segments] == [100]
    assert all_offsets(lg) == [100]


def test_log_start_offset_and_delete_records(open_log: OpenLog) -> None:
    lg = open_log(config(segment_bytes=300))
    for _ in range(20):
        lg.append_as_leader(batch(1, size=50), leader_epoch=0)
    lg.update_high_watermark(10)
    with pytest.raises(OffsetOutOfRangeError):
        lg.maybe_increment_log_start_offset(11)
    assert lg.maybe_increment_log_start_offset(7)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(6, 100)
    assert all_offsets(lg)[0] == 7
    before = len(lg.segments)
    assert lg.delete_old_segments() > 0  # segments wholly below 7 go
    assert len(lg.segments) < before and lg.segments[0].base_offset <= 7
    assert lg.log_start_offset == 7


def test_flush_and_recovery_point(open_log: OpenLog) -> None:
    lg = open_log(config(flush_messages=5))
    for _ in range(4):
        lg.append_as_leader(batch(1), leader_epoch=0)
    assert lg.recovery_point == 0 and lg.unflushed_messages == 4
    lg.append_as_leader(batch(1), leader_epoch=0)
    assert lg.recovery_point == 5
    lg.append_as_leader(batch(1), leader_epoch=0)
    lg.flush()
    assert lg.recovery_point == 6


def test_flush_if_due(open_log: OpenLog, clock: Clock) -> None:
    lg = open_log(config(flush_ms=1000, segment_bytes=200))
    for _ in range(6):
        lg.append_as_leader(batch(1, size=50), leader_epoch=0)
    assert len(lg.segments) > 1 and lg.recovery_point == 0
    lg.flush_if_due(clock.now)  # rolled segments are flushed at the next tick
    assert lg.recovery_point == lg.active_segment.base_offset
    clock.advance(1000)
    lg.flush_if_due(clock.now)
    assert lg.recovery_point == lg.log_end_offset
