"""clean() over real segment files (odradek.log.cleaner.cleaner): a Log is written, its
inactive segments cleaned into ``.cleaned`` files, which must open as valid segments."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from log_helpers import T0, config

from odradek.log.cleaner.cleaner import Throttler, clean
from odradek.log.cleaner.job import CLEANED_SUFFIX, CleanJob, CleanResult, SegmentRef
from odradek.log.log import Log
from odradek.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from odradek.protocol.errors import CorruptMessageError
from odradek.protocol.records import (
    HEADER_SIZE,
    CompressionType,
    SimpleRecord,
    build_batch,
    decode_batch,
    iter_batches,
)

DAY = 86_400_000
INDEX_INTERVAL = 256


def write_log(open_log: Callable[..., Log], rounds: int = 6, keys: int = 20,
              per_batch: int = 5) -> Log:
    """``rounds`` versions of each key (the last round tombstones keys 0-2), in batches of
    ``per_batch`` (every third gzip), rolled every ~1 KB; then a roll so that every
    written segment is inactive. Segment mtimes are set one minute apart."""
    lg = open_log(config(segment_bytes=1024, index_interval_bytes=INDEX_INTERVAL))
    n = 0
    for version in range(rounds):
        records = [SimpleRecord(None if version == rounds - 1 and k < 3 else
                                b"%d-%d" % (k, version) * 5, b"key-%d" % k,
                                timestamp=T0 + version * 1000 + k)
                   for k in range(keys)]
        for i in range(0, keys, per_batch):
            codec = CompressionType.GZIP if n % 3 == 2 else CompressionType.NONE
            lg.append_as_leader(build_batch(records[i:i + per_batch], timestamp=T0,
                                            compression=codec), leader_epoch=0)
            n += 1
    lg.roll()
    for minute, segment in enumerate(lg.segments[:-1]):
        mtime_ns = (T0 + minute * 60_000) * 1_000_000
        os.utime(segment.log_path, ns=(mtime_ns, mtime_ns))
    return lg


def job_for(lg: Log, **overrides: object) -> CleanJob:
    inactive = lg.segments[:-1]
    refs = tuple(SegmentRef(s.base_offset, str(s.log_path), s.size, nxt.base_offset,
                            os.stat(s.log_path).st_mtime_ns // 1_000_000)
                 for s, nxt in zip(inactive, lg.segments[1:], strict=True))
    settings: dict[str, object] = dict(
        topic=lg.topic, partition=lg.partition, directory=str(lg.dir), segments=refs,
        first_dirty_offset=0, first_uncleanable_offset=lg.active_segment.base_offset,
        now_ms=T0 + DAY, delete_retention_ms=DAY, segment_bytes=2500,
        max_index_bytes=10 * 1024 * 1024, index_interval_bytes=INDEX_INTERVAL,
        max_map_entries=1000, io_max_bytes_per_second=float("inf"))
    settings.update(overrides)
    return CleanJob(**settings)  # type: ignore[arg-type]


def cleaned_files(directory: Path, base: int) -> list[Path]:
    return [directory / f"{base:020d}{suffix}{CLEANED_SUFFIX}"
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)]


def open_cleaned(job: CleanJob, base: int) -> LogSegment:
    return LogSegment(Path(job.directory), base, index_interval_bytes=job.index_interval_bytes,
                      max_index_size=job.max_index_bytes, now_ms=job.now_ms,
                      suffix=CLEANED_SUFFIX)


def latest_by_key(directory: Path, result: CleanResult) -> dict[bytes, tuple[int, bytes | None]]:
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for group in result.groups:
        data = cleaned_files(directory, group.base_offset)[0].read_bytes()
        for pos, header in iter_batches(data):
            for record in decode_batch(data[pos:pos + header.size])[1]:
                assert record.key is not None
                latest[record.key] = (record.offset, record.value)
    return latest


def test_cleaned_segments_are_valid_segments(open_log: Callable[..., Log]) -> None:
    lg = write_log(open_log)
    job = job_for(lg)
    assert len(job.segments) > 3
    result = clean(job)
    lg.close()

    assert result.end_offset == job.first_uncleanable_offset
    assert len(result.groups) > 1  # segment_bytes=2500 groups two or three 1 KB segments
    assert [b for g in result.groups for b in g.replaced] == [s.base_offset for s in job.segments]
    by_base = {s.base_offset: s for s in job.segments}
    for group in result.groups:
        paths = cleaned_files(lg.dir, group.base_offset)
        assert all(p.exists() for p in paths)
        assert paths[0].stat().st_size == group.size
        # the mtime of the last segment it replaces
        assert paths[0].stat().st_mtime_ns // 1_000_000 == \
            by_base[group.replaced[-1]].last_modified_ms
        segment = open_cleaned(job, group.base_offset)
        try:
            segment.sanity_check()
            assert segment.recover() == 0
        finally:
            segment.close()

    # 20 keys, the latest version of each, at the offset it was written at (the last
    # round: offsets 100-119); keys 0-2 are tombstones, kept (their segment was dirty)
    assert latest_by_key(lg.dir, result) == {
        b"key-%d" % k: (100 + k, None if k < 3 else b"%d-5" % k * 5) for k in range(20)}
    stats = result.stats
    assert stats.bytes_read == sum(s.size for s in job.segments)
    assert stats.map_bytes_read == stats.bytes_read
    assert (stats.messages_read, stats.map_messages_read, stats.messages_written) == \
        (120, 120, 20)
    assert stats.bytes_written == sum(g.size for g in result.groups) < stats.bytes_read / 3
    assert stats.map_seconds > 0 and stats.clean_seconds > 0
    assert stats.buffer_utilization == 20 / 1000
    assert stats.invalid_messages == 0
    assert result.tombstone_due_ms == by_base[result.groups[-1].replaced[-1]].last_modified_ms + DAY


def test_the_cleaned_index_finds_every_surviving_offset(open_log: Callable[..., Log]) -> None:
    lg = write_log(open_log, rounds=2, keys=200)  # the second round (200-399) survives
    job = job_for(lg, segment_bytes=1 << 30)
    result = clean(job)
    lg.close()
    (group,) = result.groups
    segment = open_cleaned(job, group.base_offset)
    try:
        assert len(segment.index) > 5  # one entry per 256 bytes written
        for offset in (200, 250, 333, 399):
            found = segment.translate_offset(offset)
            assert found is not None and found[1].base_offset <= offset <= found[1].last_offset
        found = segment.translate_offset(0)  # cleaned away: the next batch
        assert found is not None and found[1].base_offset == 200
        assert segment.translate_offset(job.first_uncleanable_offset) is None
        assert segment.max_timestamp_so_far == T0 + 1000 + 199
    finally:
        segment.close()


def test_an_empty_group_still_gets_its_files(open_log: Callable[..., Log]) -> None:
    # Everything was cleaned before and is now tombstones older than delete.retention.ms
    lg = open_log(config(segment_bytes=1 << 20))
    lg.append_as_leader(build_batch([SimpleRecord(None, b"k%d" % i) for i in range(5)],
                                    timestamp=T0), leader_epoch=0)
    lg.roll()
    os.utime(lg.segments[0].log_path, ns=(T0 * 1_000_000, T0 * 1_000_000))
    job = job_for(lg, first_dirty_offset=5, now_ms=T0 + 10 * DAY)
    stale = cleaned_files(lg.dir, 0)
    stale[0].write_bytes(b"left over by a failed cleaning")
    result = clean(job)
    lg.close()
    assert [(g.base_offset, g.size) for g in result.groups] == [(0, 0)]
    assert all(p.exists() for p in stale)
    assert stale[0].stat().st_size == 0
    assert result.tombstone_due_ms is None
    segment = open_cleaned(job, 0)
    try:
        segment.sanity_check()
        assert segment.recover() == 0
    finally:
        segment.close()


def test_a_failed_cleaning_leaves_no_cleaned_files(open_log: Callable[..., Log]) -> None:
    lg = write_log(open_log)
    # The second segment lies in the clean section (not read while mapping); its first
    # record is made to claim more bytes than its batch has.
    second = lg.segments[1]
    with open(second.log_path, "r+b") as f:
        f.seek(HEADER_SIZE)
        f.write(b"\x7e")
    job = job_for(lg, first_dirty_offset=lg.segments[2].base_offset, segment_bytes=1)
    lg.close()
    with pytest.raises(CorruptMessageError):
        clean(job)
    assert sorted(lg.dir.glob(f"*{CLEANED_SUFFIX}")) == []


def test_io_is_throttled_to_the_configured_rate(open_log: Callable[..., Log]) -> None:
    lg = write_log(open_log)
    now = [0.0]
    slept: list[float] = []

    def clock() -> float:
        now[0] += 0.05  # every look at the clock: 50 ms of work
        return now[0]

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    job = job_for(lg, io_max_bytes_per_second=10_000.0)
    clean(job, clock=clock, sleep=sleep, read_chunk_bytes=1024)
    total = 2 * sum(s.size for s in job.segments)  # read twice (map, clean), written < that
    assert slept
    assert now[0] >= total / 10_000 * 0.9
    slept.clear()
    clean(job_for(lg), clock=clock, sleep=sleep, read_chunk_bytes=1024)
    lg.close()
    assert not slept


def test_throttler_sleeps_off_the_excess() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)

    throttler = Throttler(1000.0, clock=lambda: now[0], sleep=sleep)
    now[0] = 0.2
    throttler.maybe_throttle(800)  # inside the 300 ms check interval: no decision yet
    assert slept == []
    now[0] = 0.5
    throttler.maybe_throttle(400)  # 1200 bytes in 0.5 s at 1000 B/s: 0.7 s too fast
    assert slept == [1.2 - 0.5]
    now[0] = 1.0
    throttler.maybe_throttle(100)  # a slow period: no sleep
    assert len(slept) == 1


def test_a_full_map_leaves_the_rest_for_later(open_log: Callable[..., Log]) -> None:
    lg = write_log(open_log, rounds=3, keys=20)
    job = job_for(lg, max_map_entries=10)
    result = clean(job)
    lg.close()
    # keys 0-9 fill the map at offsets 0-9; key-10 at offset 10 does not fit
    assert result.end_offset == 10
    assert result.groups and all(g.base_offset < 10 for g in result.groups)
    assert result.stats.buffer_utilization == 1.0


def _clean_in_child(job: CleanJob) -> tuple[CleanResult, list[str]]:
    result = clean(job)
    return result, sorted(m for m in sys.modules if m.startswith("odradek.broker"))


def test_clean_runs_in_a_spawned_process(open_log: Callable[..., Log]) -> None:
    lg = write_log(open_log, rounds=2)
    job = job_for(lg)
    lg.close()
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        result, broker_modules = pool.submit(_clean_in_child, job).result(timeout=60)
    assert broker_modules == []
    assert result.end_offset == job.first_uncleanable_offset
    assert result.stats.messages_written == 20
    assert all(cleaned_files(lg.dir, g.base_offset)[0].exists() for g in result.groups)


def test_the_cleaner_imports_nothing_of_the_broker() -> None:
    code = ("import sys, odradek.log.cleaner.cleaner\n"
            "print(sorted(m for m in sys.modules if m.startswith('odradek.broker')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ})
    assert out.stdout.strip() == "[]"
