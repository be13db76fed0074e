"""copy_step: a -future log made equal to the current one while the current log grows, is
truncated by a new leader, or loses its start to retention (real logs in temporary dirs)."""

from __future__ import annotations

import time
from pathlib import Path

from odradek.broker.replica_alter_log_dirs import copy_step
from odradek.config import LogConfig
from odradek.log.log import Log
from odradek.protocol.records import SimpleRecord, build_batch

CONFIG = LogConfig(segment_bytes=600, retention_ms=-1, file_delete_delay_ms=0)


def open_log(directory: Path) -> Log:
    return Log.open(directory, CONFIG, topic="t", partition=0)


def append(lg: Log, count: int, epoch: int = 0) -> None:
    for i in range(count):
        lg.append_as_leader(build_batch([SimpleRecord(b"value-%d" % i)], timestamp=time.time_ns() // 1_000_000),
                            leader_epoch=epoch)


def copy_all(current: Log, future: Log) -> None:
    for _ in range(100):
        if copy_step(current, future):
            return
    raise AssertionError(f"{future} did not catch up with {current}")


def contents(lg: Log) -> bytes:
    return b"".join(lg.read_chunks(1 << 20))


def test_the_copy_catches_up_with_a_log_that_keeps_growing(tmp_path: Path) -> None:
    current, future = open_log(tmp_path / "a" / "t-0"), open_log(tmp_path / "b" / "t-0")
    append(current, 30)
    current.update_high_watermark(25)
    steps = 0
    while not copy_step(current, future, max_bytes=200):
        steps += 1
        if steps < 10:
            append(current, 1)  # appends between steps, as on a serving broker
    assert steps >= 10 and future.log_end_offset == current.log_end_offset == 39
    assert contents(future) == contents(current)
    assert future.high_watermark == 25 and len(future.segments) > 1


def test_a_current_log_truncated_by_a_new_leader_is_followed_by_epochs(tmp_path: Path) -> None:
    current, future = open_log(tmp_path / "a" / "t-0"), open_log(tmp_path / "b" / "t-0")
    append(current, 10)
    copy_all(current, future)
    current.truncate_to(6)  # a new leader's log diverged at 6
    append(current, 3, epoch=1)
    copy_all(current, future)
    assert future.log_end_offset == 9 and contents(future) == contents(current)
    assert future.leader_epoch_cache.entries == current.leader_epoch_cache.entries


def test_a_copy_overtaken_by_retention_starts_again_at_the_log_start(tmp_path: Path) -> None:
    current, future = open_log(tmp_path / "a" / "t-0"), open_log(tmp_path / "b" / "t-0")
    append(current, 20)
    copy_step(current, future, max_bytes=1)  # one batch copied
    current.update_high_watermark(20)
    current.maybe_increment_log_start_offset(12)
    current.delete_old_segments()
    assert current.segments[0].base_offset > future.log_end_offset
    copy_all(current, future)
    assert future.log_start_offset == current.log_start_offset == 12  # the batch holding the log start
    assert contents(future) == contents(current)
