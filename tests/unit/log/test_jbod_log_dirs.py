"""Several log.dirs (JBOD): directory names, placement, a directory failing for real (a log
file that is /dev/full, so every write meets ENOSPC; a log.dirs entry that is a file), the
failure channel, and -future logs with their swap, also across a restart."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from log_helpers import Clock, all_offsets, batch, config

from odradek.common import TopicPartition
from odradek.log.log import Log
from odradek.log.log_dir_failure_channel import LogDirFailureChannel
from odradek.log.log_dirs import (
    LogDirs,
    delete_dir_name,
    future_dir_name,
    parse_delete_dir_name,
    parse_future_dir_name,
)
from odradek.log.log_manager import CLEAN_SHUTDOWN_FILE, LogManager, LogManagerConfig
from odradek.protocol.errors import KafkaStorageError

FIRST_SEGMENT = "00000000000000000000.log"


def manager(dirs: list[Path], clock: Clock) -> LogManager:
    mgr = LogManager(LogManagerConfig(log_dirs=tuple(map(str, dirs)), file_delete_delay_ms=1000),
                     config(file_delete_delay_ms=1000), time_ms=clock)
    mgr.startup()
    return mgr


def full_disk_log(log_dir: Path, topic: str, partition: int) -> None:
    """A partition directory whose first segment is /dev/full: writes fail with ENOSPC."""
    (log_dir / f"{topic}-{partition}").mkdir(parents=True)
    os.symlink("/dev/full", log_dir / f"{topic}-{partition}" / FIRST_SEGMENT)


def test_future_and_delete_names_round_trip() -> None:
    future = future_dir_name("my-topic.v2", 7)
    assert re.fullmatch(r"my-topic\.v2-7\.[0-9a-f]{32}-future", future)
    assert parse_future_dir_name(future) == ("my-topic.v2", 7)
    assert parse_delete_dir_name(future) is None
    assert parse_future_dir_name(delete_dir_name("t", 0)) is None


def test_placement_counts_logs_prefers_what_alter_asked_and_skips_offline_dirs() -> None:
    a, b, c = Path("/a"), Path("/b"), Path("/c")
    dirs = LogDirs([a, b, c])
    assert dirs.placement(TopicPartition("t", 0)) == [a, b, c]  # a tie: configuration order
    dirs.log_added(a)
    dirs.log_added(a)
    dirs.log_added(c)
    assert dirs.placement(TopicPartition("t", 0)) == [b, c, a]
    dirs.preferred[TopicPartition("t", 0)] = a
    assert dirs.placement(TopicPartition("t", 0)) == [a]
    assert dirs.mark_offline(a) and not dirs.mark_offline(a)
    assert dirs.placement(TopicPartition("t", 0)) == [b, c]  # the preferred dir failed
    assert dirs.offline == [a] and dirs.live == [b, c]
    dirs.log_removed(c)
    assert dirs.placement(TopicPartition("u", 0)) == [b, c]


def test_an_io_error_reports_the_dir_once_and_raises_storage_errors(tmp_path: Path, clock: Clock) -> None:
    channel = LogDirFailureChannel()
    heard: list[Path] = []
    channel.listener = heard.append
    full_disk_log(tmp_path, "t", 0)
    lg = Log.open(tmp_path / "t-0", config(), topic="t", partition=0, time_ms=clock, failure_channel=channel)
    for _ in range(2):
        with pytest.raises(KafkaStorageError, match="No space left on device"):
            lg.append_as_leader(batch(2), leader_epoch=0)
    assert heard == [tmp_path]  # once, however many errors
    assert channel.is_offline(tmp_path) and lg.log_end_offset == 0


def test_a_failed_dir_goes_offline_and_the_other_keeps_serving(tmp_path: Path, clock: Clock) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    full_disk_log(d1, "t", 0)
    mgr = manager([d1, d2], clock)
    failing = mgr.get_log("t", 0)
    healthy = mgr.get_or_create_log("t", 1)
    assert (failing.dir.parent, healthy.dir.parent) == (d1, d2)
    with pytest.raises(KafkaStorageError):
        failing.append_as_leader(batch(1), leader_epoch=0)
    assert mgr.failure_channel.is_offline(d1) and mgr.offline_log_directory_count == 0  # not yet handled
    assert mgr.handle_log_dir_failure(d1) == [("t", 0)]
    assert mgr.handle_log_dir_failure(d1) == []
    assert mgr.offline_log_dirs == [d1] and mgr.live_log_dirs == [d2] and mgr.offline_log_directory_count == 1
    assert mgr.get_log("t", 0) is None
    healthy.append_as_leader(batch(3), leader_epoch=0)
    assert all_offsets(healthy) == [0, 1, 2]
    assert mgr.get_or_create_log("t", 2).dir.parent == d2  # new partitions go to the live dir
    with pytest.raises(KafkaStorageError, match="are offline"):
        mgr.get_or_create_log("t", 3, is_new=False)  # its log may be in the failed dir (Kafka's rule)
    clock.advance(10_000)
    mgr.tick()
    assert not (d1 / "replication-offset-checkpoint").exists()  # nothing written to the failed dir
    assert (d2 / "replication-offset-checkpoint").exists()
    mgr.shutdown()
    assert (d2 / CLEAN_SHUTDOWN_FILE).exists() and not (d1 / CLEAN_SHUTDOWN_FILE).exists()


def test_a_dir_that_fails_at_start_up_is_offline_from_the_start(tmp_path: Path, clock: Clock) -> None:
    not_a_dir, d2 = tmp_path / "file", tmp_path / "d2"
    not_a_dir.write_text("")
    mgr = manager([not_a_dir, d2], clock)
    assert mgr.offline_log_dirs == [not_a_dir] and mgr.failure_channel.is_offline(not_a_dir)
    assert mgr.get_or_create_log("t", 0).dir.parent == d2
    mgr.shutdown()
    with pytest.raises(KafkaStorageError, match="none of the log dirs"):
        manager([not_a_dir], clock)


def test_a_future_log_is_copied_into_then_swapped_in(tmp_path: Path, clock: Clock) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    mgr = manager([d1, d2], clock)
    current = mgr.get_or_create_log("t", 0, topic_id="7ZwH7P9nQ8mWJ9sX0kJbHw")
    assert current.dir.parent == d1
    current.append_as_leader(batch(4), leader_epoch=0)
    future = mgr.get_or_create_future_log("t", 0, d2)
    assert mgr.get_or_create_future_log("t", 0, d2) is future
    assert parse_future_dir_name(future.dir.name) == ("t", 0) and future.dir.parent == d2
    future.append_as_follower(current.read(0, 1 << 20).read_bytes())
    moved = mgr.replace_current_with_future_log("t", 0)
    assert moved is future and mgr.get_log("t", 0) is future and mgr.future_log("t", 0) is None
    assert moved.dir == d2 / "t-0" and moved.topic_id == "7ZwH7P9nQ8mWJ9sX0kJbHw"
    assert all_offsets(moved) == [0, 1, 2, 3]
    assert [p.name for p in d1.iterdir() if parse_delete_dir_name(p.name)]  # the old log, renamed
    assert mgr.get_or_create_log("t", 1).dir.parent == d1  # d2 holds one log now
    mgr.shutdown()


def test_a_restart_keeps_a_move_or_completes_one_swapped_half_way(tmp_path: Path, clock: Clock) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    mgr = manager([d1, d2], clock)
    current = mgr.get_or_create_log("t", 0)
    current.append_as_leader(batch(2), leader_epoch=0)
    mgr.get_or_create_future_log("t", 0, d2).append_as_follower(current.read(0, 1 << 20).read_bytes())
    mgr.shutdown()
    mgr = manager([d1, d2], clock)  # a move in progress stays one
    assert mgr.get_log("t", 0).dir.parent == d1 and mgr.future_log("t", 0).dir.parent == d2
    mgr.shutdown()
    # The broker stopped between the swap's two renames: the old log is renamed away already.
    (d1 / "t-0").rename(d1 / delete_dir_name("t", 0))
    mgr = manager([d1, d2], clock)
    moved = mgr.get_log("t", 0)
    assert moved.dir == d2 / "t-0" and mgr.future_log("t", 0) is None and all_offsets(moved) == [0, 1]
    mgr.shutdown()
