"""LogManager: directory names, start-up and recovery, checkpoints, async delete (also
across a restart), meta.properties, locks and topic ids."""

from __future__ import annotations

import base64
import os
import re
import uuid
from pathlib import Path

import pytest
from log_helpers import Clock, all_offsets, batch, config

from odradek.config import KafkaConfig
from odradek.log.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    InconsistentTopicIdError,
    LogDirLockedError,
    LogManager,
    LogManagerConfig,
    delete_dir_name,
    parse_delete_dir_name,
    parse_log_dir_name,
)
from odradek.log.meta_properties import (
    BrokerMetadata,
    InconsistentBrokerMetadataError,
    check_and_write_meta_properties,
    read_meta_properties,
)
from odradek.log.partition_metadata import read_topic_id
from odradek.protocol.records import iter_batches


def manager(dirs: list[Path], clock: Clock, **kwargs: object) -> LogManager:
    mgr = LogManager(LogManagerConfig(log_dirs=tuple(map(str, dirs)), **kwargs),
                     config(file_delete_delay_ms=60_000), time_ms=clock)
    mgr.startup()
    return mgr


def test_dir_names() -> None:
    assert parse_log_dir_name("orders-0") == ("orders", 0)
    assert parse_log_dir_name("my-topic.v2-17") == ("my-topic.v2", 17)
    assert parse_log_dir_name("a--1") == ("a-", 1)
    for bad in ("orders", "orders-", "-3", "orders-x", ".lock"):
        assert parse_log_dir_name(bad) is None
    name = delete_dir_name("my-topic.v2", 3)
    assert re.fullmatch(r"my-topic\.v2-3\.[0-9a-f]{32}-delete", name)
    assert parse_delete_dir_name(name) == ("my-topic.v2", 3)
    assert parse_log_dir_name(name) is None


def test_restart_clean_and_checkpoints(tmp_path: Path, clock: Clock) -> None:
    mgr = manager([tmp_path], clock)
    lg = mgr.get_or_create_log("t.x-y", 2)
    for _ in range(5):
        lg.append_as_leader(batch(2), leader_epoch=1)
    lg.update_high_watermark(8)
    assert mgr.get_or_create_log("t.x-y", 2) is lg
    mgr.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt.x-y 2 10\n"
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nt.x-y 2 0\n"
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n1\nt.x-y 2 8\n"
    mgr = manager([tmp_path], clock)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # a crash from now on is unclean
    lg = mgr.get_log("t.x-y", 2)
    assert (lg.log_end_offset, lg.high_watermark, lg.recovery_point) == (10, 8, 10)
    assert all_offsets(lg) == list(range(10))
    mgr.shutdown()


def test_unclean_start_recovers_torn_tail(tmp_path: Path, clock: Clock) -> None:
    mgr = manager([tmp_path], clock)
    lg = mgr.get_or_create_log("t", 0)
    for _ in range(5):
        lg.append_as_leader(batch(2), leader_epoch=1)
    mgr.checkpoint_recovery_points()  # recovery point 0: nothing flushed yet
    log_path = lg.active_segment.log_path
    size = lg.active_segment.size
    for fd in mgr._locks.values():  # simulate the process dying: no shutdown, locks released
        os.close(fd)
    mgr._locks.clear()
    with open(log_path, "r+b") as f:
        f.truncate(size - 5)
    mgr = manager([tmp_path], clock)
    lg = mgr.get_log("t", 0)
    assert lg.log_end_offset == 8 and all_offsets(lg) == list(range(8))
    mgr.shutdown()


def test_async_delete_renames_then_removes_after_delay(tmp_path: Path, clock: Clock) -> None:
    mgr = manager([tmp_path], clock)
    lg = mgr.get_or_create_log("doomed-topic", 0)
    lg.append_as_leader(batch(3), leader_epoch=0)
    region = lg.read(0, 1 << 20).regions[0]
    renamed = mgr.async_delete("doomed-topic", 0)
    assert re.fullmatch(r"doomed-topic-0\.[0-9a-f]{32}-delete", renamed.name)
    assert not (tmp_path / "doomed-topic-0").exists() and renamed.is_dir()
    assert mgr.get_log("doomed-topic", 0) is None
    assert mgr.async_delete("doomed-topic", 0) is None
    assert "doomed-topic" not in (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert [h.base_offset for _, h in iter_batches(region.read())] == [0]  # in-flight reads
    fresh = mgr.get_or_create_log("doomed-topic", 0)  # the topic may be recreated at once
    assert fresh.log_end_offset == 0
    clock.advance(59_999)
    mgr.tick()
    assert renamed.exists()
    clock.advance(1)
    mgr.tick()
    assert not renamed.exists() and (tmp_path / "doomed-topic-0").exists()
    mgr.shutdown()


def test_many_deletions_rewrite_the_checkpoints_once_at_the_end(tmp_path: Path, clock: Clock) -> None:
    """StopReplica deletes many partitions: each rename leaves the checkpoints as they were
    until checkpoint_dirs rewrites them once (Kafka's asyncDelete of a set)."""
    mgr = manager([tmp_path], clock)
    for p in range(3):
        mgr.get_or_create_log("many", p).append_as_leader(batch(2), leader_epoch=0)
    mgr.get_or_create_log("kept", 0).append_as_leader(batch(1), leader_epoch=0)
    mgr.checkpoint_high_watermarks()
    before = (tmp_path / "replication-offset-checkpoint").read_text()
    assert before.count("many ") == 3
    renamed = [mgr.async_delete("many", p, checkpoint=False) for p in range(3)]
    assert all(r is not None and r.is_dir() for r in renamed)
    assert (tmp_path / "replication-offset-checkpoint").read_text() == before
    mgr.checkpoint_dirs([r.parent for r in renamed if r is not None])
    for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        text = (tmp_path / name).read_text()
        assert "many " not in text and "kept 0 " in text, (name, text)
    mgr.shutdown()


def test_async_delete_completes_after_a_restart(tmp_path: Path, clock: Clock) -> None:
    mgr = manager([tmp_path], clock)
    mgr.get_or_create_log("gone", 1).append_as_leader(batch(1), leader_epoch=0)
    renamed = mgr.async_delete("gone", 1)
    mgr.shutdown()  # before the delay passed
    assert renamed.exists()
    mgr = manager([tmp_path], clock)
    assert mgr.get_log("gone", 1) is None and mgr.pending_dir_deletes == [renamed]
    mgr.tick()
    assert renamed.exists()
    clock.advance(60_000)
    mgr.tick()
    assert not renamed.exists()
    mgr.shutdown()


def test_new_logs_go_to_the_least_loaded_dir(tmp_path: Path, clock: Clock) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    mgr = manager(dirs, clock)
    parents = [mgr.get_or_create_log("t", p).dir.parent for p in range(4)]
    assert sorted(parents) == sorted(dirs * 2)
    mgr.shutdown()
    mgr = manager(dirs, clock)
    assert {lg.partition for lg in mgr.all_logs()} == {0, 1, 2, 3}
    mgr.shutdown()


def test_lock_and_topic_ids(tmp_path: Path, clock: Clock) -> None:
    mgr = manager([tmp_path], clock)
    with pytest.raises(LogDirLockedError):
        manager([tmp_path], clock)
    lg = mgr.get_or_create_log("t", 0, topic_id="7ZwH7P9nQ8mWJ9sX0kJbHw")
    # partition.metadata is written later, for every log created since the last time.
    assert not (lg.dir / "partition.metadata").exists()
    created = mgr.take_created_logs()
    assert created == [lg] and mgr.take_created_logs() == []
    mgr.flush_created_logs(created)
    assert (lg.dir / "partition.metadata").read_text() == (
        "version: 0\ntopic_id: 7ZwH7P9nQ8mWJ9sX0kJbHw\n")
    with pytest.raises(InconsistentTopicIdError):
        mgr.get_or_create_log("t", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
    mgr.shutdown()
    mgr = manager([tmp_path], clock)
    assert mgr.get_log("t", 0).topic_id == "7ZwH7P9nQ8mWJ9sX0kJbHw"
    as_uuid = uuid.UUID(bytes=base64.urlsafe_b64decode("7ZwH7P9nQ8mWJ9sX0kJbHw=="))
    assert mgr.get_or_create_log("t", 0, topic_id=as_uuid) is mgr.get_log("t", 0)
    mgr.shutdown()


def test_tick_runs_retention_and_checkpoints(tmp_path: Path, clock: Clock) -> None:
    mgr = LogManager(LogManagerConfig(log_dirs=(str(tmp_path),), retention_check_interval_ms=1000,
                                      high_watermark_checkpoint_interval_ms=500),
                     config(segment_bytes=300, retention_ms=5000, file_delete_delay_ms=0),
                     time_ms=clock)
    mgr.startup()
    lg = mgr.get_or_create_log("r", 0)
    for _ in range(10):
        lg.append_as_leader(batch(1, size=50, ts=clock.now), leader_epoch=0)
    lg.update_high_watermark(10)
    clock.advance(500)
    mgr.tick()
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n1\nr 0 10\n"
    assert lg.log_start_offset == 0
    clock.advance(6000)
    mgr.tick()
    # every record is older than retention.ms: all data goes, an empty segment at 10 stays
    assert lg.log_start_offset == 10 and [s.base_offset for s in lg.segments] == [10]
    assert not any(p.name.endswith(".deleted") for p in lg.dir.iterdir())
    mgr.shutdown()


def test_meta_properties(tmp_path: Path) -> None:
    check_and_write_meta_properties([tmp_path], 3, None)
    assert read_meta_properties(tmp_path) == BrokerMetadata(3, None)
    check_and_write_meta_properties([tmp_path], 3, "Z3Cy2zWmSmqo5zBlc0H1fQ")
    text = (tmp_path / "meta.properties").read_text()
    assert text.startswith("#\n#") and "version=0\nbroker.id=3\ncluster.id=Z3Cy2zWmSmqo5zBlc0H1fQ\n" in text
    with pytest.raises(InconsistentBrokerMetadataError):
        check_and_write_meta_properties([tmp_path], 4, "Z3Cy2zWmSmqo5zBlc0H1fQ")
    with pytest.raises(InconsistentBrokerMetadataError):
        check_and_write_meta_properties([tmp_path], 3, "another-cluster")
    (tmp_path / "meta.properties").write_text("#\ncluster.id=abc\nversion=0\nbroker.id=0\n")
    assert read_meta_properties(tmp_path) == BrokerMetadata(0, "abc")  # Kafka's own file


def test_meta_properties_that_are_not_utf8_are_refused_with_a_message(tmp_path: Path) -> None:
    """Read as java.util.Properties reads it (ISO-8859-1): not a UnicodeDecodeError, which
    the broker's start-up does not expect (fuzz/log_recovery.py found it)."""
    (tmp_path / "meta.properties").write_bytes(b"version=0\nbroker.id=\xc5\n")
    with pytest.raises(InconsistentBrokerMetadataError, match=r"broker\.id"):
        read_meta_properties(tmp_path)


def test_config_from_server_properties() -> None:
    cfg = KafkaConfig.from_props({
        "broker.id": "1", "zookeeper.connect": "zk:2181", "log.dirs": "/data/a,/data/b",
        "log.segment.delete.delay.ms": "1234", "log.retention.check.interval.ms": "1000"})
    mgr_cfg = LogManagerConfig.from_kafka_config(cfg)
    assert mgr_cfg.log_dirs == ("/data/a", "/data/b")
    assert (mgr_cfg.file_delete_delay_ms, mgr_cfg.retention_check_interval_ms) == (1234, 1000)


def test_topic_ids_of_created_logs_survive_a_clean_shutdown_unflushed(tmp_path: Path, clock: Clock) -> None:
    mgr = manager([tmp_path], clock)
    for p in range(3):
        mgr.get_or_create_log("t", p, topic_id="7ZwH7P9nQ8mWJ9sX0kJbHw")
    mgr.get_or_create_log("gone", 0, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
    assert mgr.async_delete("gone", 0) is not None  # renamed before its metadata was flushed
    mgr.shutdown()  # writes what the background flush had not written yet
    mgr = manager([tmp_path], clock)
    assert {(lg.partition, lg.topic_id) for lg in mgr.all_logs()} == {
        (p, "7ZwH7P9nQ8mWJ9sX0kJbHw") for p in range(3)}
    mgr.shutdown()


def test_new_default_config_reaches_every_log_and_keeps_topic_overrides(tmp_path: Path, clock: Clock) -> None:
    mgr = manager([tmp_path], clock)
    static = KafkaConfig.from_props({"zookeeper.connect": "zk:2181", "log.dirs": str(tmp_path)})
    plain = mgr.get_or_create_log("plain", 0, static.log_config())
    custom = mgr.get_or_create_log("custom", 0, static.log_config({"segment.bytes": "5000"}))
    dynamic = static.with_dynamic({"log.segment.bytes": "7000", "log.cleaner.min.cleanable.ratio": "0.9"}, {})

    mgr.update_default_config(dynamic.log_config())

    assert (plain.config.segment_bytes, plain.config.min_cleanable_dirty_ratio) == (7000, 0.9)
    assert (custom.config.segment_bytes, custom.config.min_cleanable_dirty_ratio) == (5000, 0.9)
    # A log created later without an explicit config takes the new defaults too.
    assert mgr.get_or_create_log("later", 0).config.segment_bytes == 7000
    mgr.shutdown()


def test_checkpoint_snapshots_are_written_later_and_never_over_newer_ones(tmp_path: Path, clock: Clock) -> None:
    """The broker writes due checkpoints in a worker thread: tick_without_checkpoint_writes
    returns snapshots; an older snapshot written after a newer one leaves the newer one."""
    from odradek.log.checkpoints import REPLICATION_OFFSET_CHECKPOINT

    mgr = manager([tmp_path], clock)
    lg = mgr.get_or_create_log("t", 0)
    for _ in range(3):
        lg.append_as_leader(batch(1, ts=clock.now), leader_epoch=0)
    lg.update_high_watermark(1)
    clock.advance(10 * 60_000)
    old = [w for w in mgr.tick_without_checkpoint_writes() if w.path.name == REPLICATION_OFFSET_CHECKPOINT]
    assert old and old[0].offsets[("t", 0)] == 1
    path = old[0].path
    assert not path.exists()  # not written yet
    lg.update_high_watermark(3)
    mgr.checkpoint_high_watermarks()  # a newer snapshot, written at once
    mgr.write_checkpoints(old)  # the old one arrives late: skipped
    assert path.read_text() == "0\n1\nt 0 3\n"


@pytest.mark.parametrize("content", [b"version: 0\ntopic_id: \xc5\n", b"version: 1\ntopic_id: x\n", b"garbage"])
def test_an_unreadable_partition_metadata_is_no_topic_id(tmp_path: Path, content: bytes) -> None:
    """The log opens without a topic id (LeaderAndIsr writes it again), instead of a
    UnicodeDecodeError stopping the broker (fuzz/log_recovery.py found it)."""
    (tmp_path / "partition.metadata").write_bytes(content)
    assert read_topic_id(tmp_path) is None
