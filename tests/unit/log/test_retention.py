"""Retention: whole segments by time and by size, bounded by the high watermark, with
Kafka's delayed ``.deleted`` removal."""

from __future__ import annotations

from collections.abc import Callable

from log_helpers import T0, Clock, all_offsets, batch, config

from odradek.log.log import Log

OpenLog = Callable[..., Log]


def fill(lg: Log, count: int, ts_step: int = 0) -> None:
    for i in range(count):
        # Keyed: a compacted log refuses keyless records.
        lg.append_as_leader(batch(1, size=50, ts=T0 + i * ts_step, key=b"k%d" % i), leader_epoch=0)
    lg.update_high_watermark(lg.log_end_offset)


def test_retention_by_time(open_log: OpenLog, clock: Clock) -> None:
    lg = open_log(config(segment_bytes=300, retention_ms=10_000))
    fill(lg, 20, ts_step=1000)  # records at T0 .. T0+19s, ~3 per segment
    sizes_before = len(lg.segments)
    clock.advance(15_000)  # now = T0 + 15s: segments whose newest record is < T0 + 5s go
    deleted = lg.delete_old_segments()
    assert deleted > 0 and len(lg.segments) == sizes_before - deleted
    assert lg.log_start_offset == lg.segments[0].base_offset
    assert lg.segments[0].largest_timestamp >= clock.now - 10_000
    assert all_offsets(lg) == list(range(lg.log_start_offset, 20))
    clock.advance(100_000)
    lg.delete_old_segments()
    # everything expired: a fresh empty active segment remains at the log end
    assert [s.base_offset for s in lg.segments] == [20] and lg.log_start_offset == 20
    assert lg.append_as_leader(batch(1), leader_epoch=0).first_offset == 20


def test_retention_by_size(open_log: OpenLog) -> None:
    lg = open_log(config(segment_bytes=500, retention_bytes=1200))
    fill(lg, 30)
    assert lg.delete_old_segments() > 0
    # Kafka's rule: drop the oldest segment only while the log stays >= retention.bytes
    assert lg.size >= 1200 and lg.size - lg.segments[0].size < 1200
    assert all_offsets(lg) == list(range(lg.log_start_offset, 30))


def test_retention_never_passes_high_watermark(open_log: OpenLog, clock: Clock) -> None:
    lg = open_log(config(segment_bytes=300, retention_ms=1))
    fill(lg, 20)
    lg.update_high_watermark(5)
    clock.advance(10_000)
    lg.delete_old_segments()
    assert lg.segments[0].base_offset <= 5 and lg.log_start_offset <= 5
    assert all(s.base_offset <= 5 for s in lg.segments[:1])
    assert all_offsets(lg)[-1] == 19


def test_deleted_segments_linger_for_the_delete_delay(open_log: OpenLog, clock: Clock) -> None:
    lg = open_log(config(segment_bytes=300, retention_bytes=0, file_delete_delay_ms=60_000))
    fill(lg, 10)
    region = lg.read(0, 1 << 20).regions[0]  # handed to the network layer before deletion
    lg.delete_old_segments()
    names = sorted(p.name for p in lg.dir.iterdir())
    assert "00000000000000000000.log.deleted" in names
    assert "00000000000000000000.index.deleted" in names
    assert region.read()[:8] == (0).to_bytes(8, "big")  # still readable for sendfile
    clock.advance(59_999)
    lg.delete_pending_segments(clock.now)
    assert (lg.dir / "00000000000000000000.log.deleted").exists()
    clock.advance(1)
    lg.delete_pending_segments(clock.now)
    assert not any(p.name.endswith(".deleted") for p in lg.dir.iterdir())


def test_compact_policy_keeps_data(open_log: OpenLog, clock: Clock) -> None:
    lg = open_log(config(segment_bytes=300, retention_ms=1, cleanup_policy=("compact",)))
    fill(lg, 10)
    clock.advance(10_000)
    assert lg.delete_old_segments() == 0
