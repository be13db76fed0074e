"""Kafka's ``LogManager``: every partition log in every ``log.dirs`` entry.

* Start-up locks each directory (``.lock``), reads its checkpoints, opens every
  ``<topic>-<partition>`` directory (recovering from the recovery point when the
  ``.kafka_cleanshutdown`` marker is missing) and schedules ``*-delete`` directories left
  by a deletion that a restart interrupted. The marker is removed once all logs are open,
  so a crash from then on is seen as unclean.
* :meth:`LogManager.async_delete` stops serving a partition at once by renaming its
  directory to ``<topic>-<partition>.<uuid>-delete``; the files go after
  ``file.delete.delay.ms``.
* :meth:`LogManager.tick` is the broker's periodic call (odradek runs no threads of its
  own): flushes, retention, checkpoints, producer-id expiry, delayed deletes.
* :meth:`LogManager.shutdown` flushes and closes every log, writes the checkpoints and then
  the clean-shutdown marker.

JBOD (several ``log.dirs``): each directory has its own lock, checkpoints, clean-shutdown
marker and ``meta.properties``; a new log goes where :class:`~odradek.log.log_dirs.LogDirs`
places it.  An I/O error in a directory (reported to the :class:`LogDirFailureChannel` by
whatever met it) takes the directory offline: :meth:`LogManager.handle_log_dir_failure` drops
its logs, and a directory that fails at start-up is left offline while the others serve.
AlterReplicaLogDirs copies a log into a ``-future`` log in another directory
(:meth:`get_or_create_future_log`); :meth:`replace_current_with_future_log` swaps it in.
"""

from __future__ import annotations

import fcntl
import itertools
import logging
import os
import shutil
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode

from odradek.common import TopicPartition, now_ms
from odradek.config import KafkaConfig, LogConfig
from odradek.log.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CorruptCheckpointError,
    OffsetCheckpointFile,
    write_atomically,
)
from odradek.log.log import Log
from odradek.log.log_dir_failure_channel import LogDirFailureChannel
from odradek.log.log_dirs import (
    DELETE_DIR_SUFFIX,
    LogDirs,
    delete_dir_name,
    future_dir_name,
    log_dir_name,
    parse_delete_dir_name,
    parse_future_dir_name,
    parse_log_dir_name,
)
from odradek.log.meta_properties import check_and_write_meta_properties
from odradek.log.partition_metadata import topic_id_string, write_topic_ids
from odradek.protocol.errors import KafkaStorageError, for_code

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"

InconsistentTopicIdError = for_code(ErrorCode.inconsistent_topic_id)


class LogDirLockedError(RuntimeError):
    """Another process holds the log directory's ``.lock``."""


@dataclass(frozen=True, slots=True)
class CheckpointWrite:
    """A checkpoint file's contents as of one moment, to write later (see LogManager.tick)."""

    path: Path
    seq: int
    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class LogManagerConfig:
    """The broker settings the log manager acts on (Kafka's names in the comments)."""

    log_dirs: tuple[str, ...]
    retention_check_interval_ms: int = 300_000  # log.retention.check.interval.ms
    recovery_point_checkpoint_interval_ms: int = 60_000  # log.flush.offset.checkpoint.interval.ms
    log_start_offset_checkpoint_interval_ms: int = 60_000  # ...start.offset.checkpoint...
    high_watermark_checkpoint_interval_ms: int = 5_000  # replica.high.watermark.checkpoint...
    producer_id_expiration_ms: int = 86_400_000  # producer.id.expiration.ms
    producer_id_expiration_check_interval_ms: int = 600_000
    file_delete_delay_ms: int = 60_000  # log.segment.delete.delay.ms (partition dirs)

    @classmethod
    def from_kafka_config(cls, config: KafkaConfig) -> LogManagerConfig:
        return cls(
            log_dirs=tuple(config.log_dirs),
            retention_check_interval_ms=config["log.retention.check.interval.ms"],
            recovery_point_checkpoint_interval_ms=config["log.flush.offset.checkpoint.interval.ms"],
            log_start_offset_checkpoint_interval_ms=config[
                "log.flush.start.offset.checkpoint.interval.ms"],
            high_watermark_checkpoint_interval_ms=config[
                "replica.high.watermark.checkpoint.interval.ms"],
            producer_id_expiration_ms=config["producer.id.expiration.ms"],
            file_delete_delay_ms=config.log_config().file_delete_delay_ms,
        )


class LogManager:
    """All logs of one broker. Call :meth:`startup` before anything else."""

    def __init__(self, config: LogManagerConfig, default_config: LogConfig, *,
                 topic_config: Callable[[str], LogConfig] | None = None,
                 time_ms: Callable[[], int] = now_ms,
                 failure_channel: LogDirFailureChannel | None = None) -> None:
        self.config = config
        self.default_config = default_config
        self._topic_config = topic_config or (lambda _topic: self.default_config)
        self._time_ms = time_ms
        self.log_dirs = [Path(d).resolve() for d in config.log_dirs]
        self.dirs = LogDirs(self.log_dirs)
        self.failure_channel = failure_channel or LogDirFailureChannel()
        self._logs: dict[TopicPartition, Log] = {}
        # AlterReplicaLogDirs: the copy of a partition's log being made in another directory.
        self._future_logs: dict[TopicPartition, Log] = {}
        self._dir_deletes: list[tuple[int, Path, Log | None]] = []
        # Logs of a failed directory: their descriptors close after file.delete.delay.ms, as
        # a deleted log's do, so a sendfile in flight never reads a reused descriptor.
        self._handler_closes: list[tuple[int, Log]] = []
        # Created logs whose directory entry and partition.metadata are not durable yet
        # (see flush_created_logs).
        self._unflushed: list[Log] = []
        self._locks: dict[Path, int] = {}
        # Checkpoint files are written (with their fsyncs) by the maintenance loop in a worker
        # thread: each write is a snapshot taken on the loop with a sequence number, and a
        # write never replaces a newer snapshot of the same file.
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_seq = itertools.count()
        self._checkpoint_written: dict[Path, int] = {}
        now = time_ms()
        self._next = {
            "retention": now + config.retention_check_interval_ms,
            "recovery": now + config.recovery_point_checkpoint_interval_ms,
            "start": now + config.log_start_offset_checkpoint_interval_ms,
            "hw": now + config.high_watermark_checkpoint_interval_ms,
            "expiry": now + config.producer_id_expiration_check_interval_ms,
        }

    # ------------------------------------------------------------------ directories

    @property
    def live_log_dirs(self) -> list[Path]:
        """The directories in service (the cleaner holds this very list)."""
        return self.dirs.live

    @property
    def offline_log_dirs(self) -> list[Path]:
        return self.dirs.offline

    @property
    def offline_log_directory_count(self) -> int:
        """Kafka's ``OfflineLogDirectoryCount`` gauge."""
        return len(self.dirs.all) - len(self.dirs.live)

    def is_log_dir_online(self, log_dir: Path) -> bool:
        return self.dirs.is_live(log_dir)

    def _fail_dir(self, log_dir: Path, message: str, error: OSError) -> None:
        self.failure_channel.maybe_add_offline_log_dir(log_dir, message, error)

    # ------------------------------------------------------------------ start-up

    def startup(self, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Lock the directories and open every log in them, each with its topic's config from
        ``topic_configs`` (the stored overrides; the default for a topic without).  A
        directory that cannot be created, locked or read is offline from the start (Kafka
        2.8: the broker starts while one directory is healthy); with none healthy the broker
        cannot start."""
        topic_configs = topic_configs or {}
        for log_dir in self.log_dirs:
            try:
                log_dir.mkdir(parents=True, exist_ok=True)
                self._lock(log_dir)
            except OSError as e:
                self._startup_failure(log_dir, "Failed to create or validate data directory", e)
        for log_dir in list(self.live_log_dirs):
            try:
                self._load_dir(log_dir, topic_configs)
            except OSError as e:
                self._startup_failure(log_dir, "Error while loading log dir", e)
        if not self.live_log_dirs:
            raise KafkaStorageError(f"none of the log dirs {', '.join(map(str, self.log_dirs))} "
                                    "can be created or read")
        self._complete_interrupted_moves()
        for log_dir in self.live_log_dirs:
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            try:
                if marker.exists():
                    marker.unlink()
            except OSError as e:
                self._startup_failure(log_dir, "Error while removing the clean-shutdown marker of", e)

    def check_and_write_meta_properties(self, broker_id: int, cluster_id: str | None) -> None:
        """``meta.properties`` in every live directory: one naming another broker or cluster
        stops the start-up (InconsistentBrokerMetadataError); one that cannot be read or
        written takes its directory offline (KAFKA_STORAGE_ERROR if none is left)."""
        for log_dir in list(self.live_log_dirs):
            try:
                check_and_write_meta_properties([log_dir], broker_id, cluster_id)
            except OSError as e:
                self._startup_failure(log_dir, "Error while reading or writing meta.properties in", e)
        if not self.live_log_dirs:
            raise KafkaStorageError(f"none of the log dirs {', '.join(map(str, self.log_dirs))} is usable")

    def _startup_failure(self, log_dir: Path, message: str, error: OSError) -> None:
        self._fail_dir(log_dir, f"{message} {log_dir}", error)
        self.handle_log_dir_failure(log_dir)

    def _lock(self, log_dir: Path) -> None:
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirLockedError(f"failed to acquire lock on {log_dir / LOCK_FILE}: another "
                                    "broker process is using this directory") from None
        self._locks[log_dir] = fd

    def _read_checkpoint(self, path: Path) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(path).read()
        except CorruptCheckpointError as e:
            log.warning("ignoring %s: %s", path, e)
            return {}

    def _load_dir(self, log_dir: Path, topic_configs: Mapping[str, LogConfig]) -> None:
        clean = (log_dir / CLEAN_SHUTDOWN_FILE).exists()
        recovery = self._read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
        starts = self._read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
        hws = self._read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT)
        now = self._time_ms()
        loaded = 0
        for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            if entry.name.endswith(DELETE_DIR_SUFFIX):
                # A deletion a restart interrupted: finish it after the delay.
                self._dir_deletes.append((now + self.config.file_delete_delay_ms,
                                          Path(entry.path), None))
                continue
            future = parse_future_dir_name(entry.name)
            tp = future or parse_log_dir_name(entry.name)
            if tp is None:
                continue
            logs = self._future_logs if future else self._logs
            if tp in logs:
                raise KafkaStorageError(f"duplicate log directories for {entry.name}: "
                                        f"{logs[tp].dir} and {entry.path}")
            try:
                lg = Log.open(
                    Path(entry.path), topic_configs.get(tp.topic) or self._topic_config(tp.topic),
                    topic=tp.topic, partition=tp.partition,
                    log_start_offset=starts.get(tp, 0), recovery_point=recovery.get(tp, 0),
                    high_watermark=hws.get(tp, 0), had_clean_shutdown=clean, time_ms=self._time_ms,
                    producer_id_expiration_ms=self.config.producer_id_expiration_ms,
                    failure_channel=self.failure_channel)
            except KafkaStorageError as e:
                raise OSError(f"cannot load {entry.path}: {e}") from e
            self._add(tp, lg, future=bool(future))
            loaded += 1
        log.info("loaded %d logs from %s (%s shutdown)", loaded, log_dir, "clean" if clean else "unclean")

    def _complete_interrupted_moves(self) -> None:
        """A ``-future`` log whose partition has no current log is a move that was swapped
        half-way when the broker stopped (the old log is renamed for deletion first, and the
        future log had caught up): it becomes the partition's log.  Not while a directory is
        offline, whose unreadable log may be the current one."""
        if self.dirs.offline:
            return
        for tp in [tp for tp in self._future_logs if tp not in self._logs]:
            future = self._future_logs[tp]
            try:
                future.rename_dir(future.dir.parent / log_dir_name(*tp))
            except OSError as e:
                self._startup_failure(future.dir.parent, f"Error while renaming {future.dir} in", e)
                continue
            del self._future_logs[tp]
            self._logs[tp] = future
            log.info("completed the interrupted move of %s to %s", tp, future.dir.parent)

    # ------------------------------------------------------------------ logs

    def _add(self, tp: TopicPartition, lg: Log, *, future: bool = False) -> None:
        (self._future_logs if future else self._logs)[tp] = lg
        self.dirs.log_added(lg.dir.parent)

    def _remove(self, tp: TopicPartition, *, future: bool = False) -> Log | None:
        lg = (self._future_logs if future else self._logs).pop(tp, None)
        if lg is not None:
            self.dirs.log_removed(lg.dir.parent)
        return lg

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def future_log(self, topic: str, partition: int) -> Log | None:
        return self._future_logs.get((topic, partition))

    def future_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._future_logs)

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None,
                          topic_id: str | uuid.UUID | None = None, *, is_new: bool = True) -> Log:
        """The partition's log, created in the least-loaded directory if there is none.

        ``topic_id`` (Kafka's string form or a UUID) is recorded in ``partition.metadata``;
        raises INCONSISTENT_TOPIC_ID if an existing log belongs to another topic id.  A log
        that is not new (``is_new`` False: LeaderAndIsr's isNew) is not created while a
        directory is offline, since it may be there (KAFKA_STORAGE_ERROR, as Kafka).

        Creating a log does no fsync: the new directory entry and ``partition.metadata`` are
        written and made durable by :meth:`flush_created_logs`, in the background and many at
        a time (as Kafka flushes partition.metadata from its scheduler), so a LeaderAndIsr
        for thousands of new partitions does not wait on thousands of fsyncs.
        """
        if topic_id is not None:
            topic_id = topic_id_string(topic_id)
        tp = TopicPartition(topic, partition)
        existing = self._logs.get(tp)
        if existing is not None:
            if topic_id is not None:
                if existing.topic_id is None:
                    existing.topic_id = topic_id
                    self._unflushed.append(existing)
                elif existing.topic_id != topic_id:
                    raise InconsistentTopicIdError(
                        f"log for {topic}-{partition} has topic id {existing.topic_id}, "
                        f"not {topic_id}")
            return existing
        if not is_new and self.dirs.offline:
            raise KafkaStorageError(f"Can not create log for {tp} because log directories "
                                    f"{','.join(map(str, self.dirs.offline))} are offline")
        new_log = self._create(tp, self.dirs.placement(tp), log_dir_name(topic, partition),
                               config or self._topic_config(topic))
        new_log.topic_id = topic_id
        self._add(tp, new_log)
        self.dirs.preferred.pop(tp, None)
        self._unflushed.append(new_log)
        return new_log

    def get_or_create_future_log(self, topic: str, partition: int, log_dir: Path) -> Log:
        """The ``-future`` log AlterReplicaLogDirs copies ``topic-partition`` into, in
        ``log_dir`` (a live directory other than the current log's)."""
        tp = TopicPartition(topic, partition)
        current = self._logs.get(tp)
        if current is None:
            raise KafkaStorageError(f"{tp} has no log here to move")
        if current.dir.parent == log_dir:
            raise ValueError(f"the log of {tp} is in {log_dir} already")
        existing = self._future_logs.get(tp)
        if existing is not None:
            return existing
        future = self._create(tp, [log_dir], future_dir_name(topic, partition), current.config)
        future.topic_id = current.topic_id
        self._add(tp, future, future=True)
        self._unflushed.append(future)
        return future

    def _create(self, tp: TopicPartition, candidates: list[Path], name: str, config: LogConfig) -> Log:
        """Open a new log named ``name`` in the first of ``candidates`` that takes it; a
        directory that fails is reported and the next one tried (Kafka's getOrCreateLog)."""
        for parent in candidates:
            try:
                return Log.open(
                    parent / name, config, topic=tp.topic, partition=tp.partition, time_ms=self._time_ms,
                    producer_id_expiration_ms=self.config.producer_id_expiration_ms, sync_parent=False,
                    failure_channel=self.failure_channel)
            except (OSError, KafkaStorageError) as e:
                if isinstance(e, OSError):
                    self._fail_dir(parent, f"Error while creating log for {tp} in dir {parent}", e)
                last = e
        tried = ", ".join(map(str, candidates)) or "none live"
        raise KafkaStorageError(f"cannot create log for {tp} (tried {tried})") from (last if candidates else None)

    def replace_current_with_future_log(self, topic: str, partition: int) -> Log:
        """AlterReplicaLogDirs' swap, once the future log has caught up (the caller checks,
        without yielding the event loop in between): the current log is renamed for deletion,
        then the future log takes the partition's name and place.  A crash between the two
        renames is completed at the next start-up (the future log is promoted).  Raises
        KAFKA_STORAGE_ERROR (and the current log stays) if a rename fails."""
        tp = TopicPartition(topic, partition)
        source, future = self._logs[tp], self._future_logs[tp]
        future.flush()
        target = source.dir.parent / delete_dir_name(topic, partition)
        try:
            source.rename_dir(target)
        except OSError as e:
            self._fail_dir(source.dir.parent, f"Error while renaming {source.dir} for deletion", e)
            raise KafkaStorageError(f"cannot rename {source.dir}: {e}") from e
        try:
            future.rename_dir(future.dir.parent / log_dir_name(topic, partition))
        except OSError as e:
            source.rename_dir(target.parent / log_dir_name(topic, partition))
            self._fail_dir(future.dir.parent, f"Error while renaming {future.dir}", e)
            raise KafkaStorageError(f"cannot rename {future.dir}: {e}") from e
        self._remove(tp)
        self._remove(tp, future=True)
        self._add(tp, future)
        self._dir_deletes.append((self._time_ms() + source.config.file_delete_delay_ms, target, source))
        self._write_checkpoints(target.parent)
        self._write_checkpoints(future.dir.parent)
        log.info("the log of %s moved from %s to %s", tp, target.parent, future.dir.parent)
        return future

    def remove_future_log(self, topic: str, partition: int) -> None:
        """Abandon a move: the future log goes (renamed for deletion, removed after the delay)."""
        future = self._remove(TopicPartition(topic, partition), future=True)
        if future is not None:
            self._delete_later(future, future.dir.parent / delete_dir_name(topic, partition))

    def take_created_logs(self) -> list[Log]:
        """The logs created (or given a topic id) since the last call: pass them to
        :meth:`flush_created_logs`, which may run in a worker thread."""
        taken, self._unflushed = self._unflushed, []
        return taken

    def flush_created_logs(self, logs: list[Log]) -> None:
        """Write each log's ``partition.metadata`` and make it and the new directories
        durable with two file-system syncs per log directory (one fsync per file and
        directory costs seconds for thousands of partitions and holds up every other file
        creation). A log renamed for deletion meanwhile is skipped (its directory goes anyway)."""
        by_dir: dict[Path, list[Log]] = defaultdict(list)
        for lg in logs:
            by_dir[lg.dir.parent].append(lg)
        for log_dir, in_dir in by_dir.items():
            try:
                write_topic_ids((lg.dir, lg.topic_id) for lg in in_dir if lg.topic_id is not None)
            except OSError as e:  # the topic id is written again at the next LeaderAndIsr after a restart
                self._fail_dir(log_dir, f"Error while writing partition.metadata of {len(in_dir)} new logs "
                                        f"in dir {log_dir}", e)

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Apply a topic config change (AlterConfigs) to the topic's open logs."""
        for logs in (self._logs, self._future_logs):
            for (t, _), lg in logs.items():
                if t == topic:
                    lg.config = config

    def update_default_config(self, default: LogConfig) -> None:
        """New broker defaults for topic configs (a dynamic broker config changed): every
        open log keeps its topic's overrides and takes the rest from ``default``."""
        self.default_config = default
        for lg in (*self._logs.values(), *self._future_logs.values()):
            lg.config = lg.config.rebased(default)

    def async_delete(self, topic: str, partition: int, *, checkpoint: bool = True) -> Path | None:
        """Stop serving the partition now: rename its directory to
        ``<topic>-<partition>.<uuid>-delete`` and remove it after ``file.delete.delay.ms``.
        Descriptors stay open until then so in-flight sendfiles finish. Returns the new path
        (None if the partition has no log here).  Its directory's checkpoints are rewritten,
        so that a recreated topic of the same name does not inherit this one's; a caller
        deleting many (StopReplica) passes ``checkpoint=False`` and calls
        :meth:`checkpoint_dirs` once at the end, as Kafka's ``asyncDelete`` of a set does."""
        lg = self._remove(TopicPartition(topic, partition))
        if lg is None:
            return None
        target = lg.dir.parent / delete_dir_name(topic, partition)
        self._delete_later(lg, target)
        if checkpoint:
            self._write_checkpoints(target.parent)
        return target

    def checkpoint_dirs(self, log_dirs: Iterable[Path]) -> None:
        """Rewrite the checkpoint files of each of ``log_dirs`` (after deletions)."""
        self.write_checkpoints(self.dir_checkpoints(log_dirs))

    def dir_checkpoints(self, log_dirs: Iterable[Path]) -> list[CheckpointWrite]:
        """Snapshots of every checkpoint file of each of ``log_dirs``, taken now, for
        :meth:`write_checkpoints` (which may run in a worker thread)."""
        dirs = sorted(set(log_dirs))
        return (self._snapshots(RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point, dirs)
                + self._snapshots(LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset, dirs)
                + self._snapshots(REPLICATION_OFFSET_CHECKPOINT, lambda lg: lg.high_watermark, dirs))

    def _delete_later(self, lg: Log, target: Path) -> None:
        try:
            lg.rename_dir(target)
        except OSError as e:
            self._fail_dir(lg.dir.parent, f"Error while renaming {lg.dir} for deletion", e)
            raise KafkaStorageError(f"failed to rename {lg.dir} to {target}: {e}") from e
        self._dir_deletes.append((self._time_ms() + lg.config.file_delete_delay_ms, target, lg))

    # ------------------------------------------------------------------ failed directories

    def handle_log_dir_failure(self, log_dir: Path) -> list[TopicPartition]:
        """Stop serving ``log_dir`` (Kafka's LogManager.handleLogDirFailure): it leaves the
        live directories, its logs (current and future) are dropped, their descriptors close
        after the delete delay, and its lock is released.  Returns the partitions whose
        current log was there.  Nothing is written to the directory."""
        if not self.dirs.mark_offline(log_dir):
            return []
        now = self._time_ms()
        offline: list[TopicPartition] = []
        for future in (False, True):
            logs = self._future_logs if future else self._logs
            for tp in [tp for tp, lg in logs.items() if lg.dir.parent == log_dir]:
                lg = logs.pop(tp)
                self._handler_closes.append((now + lg.config.file_delete_delay_ms, lg))
                if not future:
                    offline.append(tp)
        self._unflushed = [lg for lg in self._unflushed if lg.dir.parent != log_dir]
        fd = self._locks.pop(log_dir, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
        log.warning("Logs for partitions %s are offline due to failure on log directory %s",
                    ",".join(map(str, sorted(offline))) or "(none)", log_dir)
        return offline

    # ------------------------------------------------------------------ periodic work

    def tick(self, now_ms: int | None = None) -> None:
        """Do whatever periodic work is due. Cheap when nothing is; call it every ~100 ms."""
        self.write_checkpoints(self.tick_without_checkpoint_writes(now_ms))

    def tick_without_checkpoint_writes(self, now_ms: int | None = None) -> list[CheckpointWrite]:
        """``tick``, except that the checkpoints due are returned as snapshots for
        :meth:`write_checkpoints` (which the broker runs in a worker thread: a checkpoint's
        fsyncs can take long on a busy disk, and must not stall the event loop)."""
        now = self._time_ms() if now_ms is None else now_ms
        retention = self._due("retention", now, self.config.retention_check_interval_ms)
        expiry = self._due("expiry", now, self.config.producer_id_expiration_check_interval_ms)
        for lg in [*self._logs.values(), *self._future_logs.values()]:
            try:
                lg.flush_if_due(now)
                if retention:
                    lg.delete_old_segments(now)
                lg.delete_pending_segments(now)
                if expiry:
                    lg.producer_state.remove_expired_producers(now)
            except OSError as e:
                self._fail_dir(lg.dir.parent, f"Error during periodic maintenance of {lg.name} in dir "
                                              f"{lg.dir.parent}", e)
            except KafkaStorageError as e:  # its directory is reported offline already
                log.error("periodic maintenance of %s failed: %s", lg, e)
        due: list[CheckpointWrite] = []
        if self._due("recovery", now, self.config.recovery_point_checkpoint_interval_ms):
            due += self._snapshots(RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point)
        if self._due("start", now, self.config.log_start_offset_checkpoint_interval_ms):
            due += self._snapshots(LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset)
        if self._due("hw", now, self.config.high_watermark_checkpoint_interval_ms):
            due += self._snapshots(REPLICATION_OFFSET_CHECKPOINT, lambda lg: lg.high_watermark)
        self._delete_due_dirs(now)
        self._close_due_handlers(now)
        return due

    def _due(self, name: str, now: int, interval: int) -> bool:
        if now < self._next[name]:
            return False
        self._next[name] = now + interval
        return True

    def _delete_due_dirs(self, now: int) -> None:
        keep = []
        for due, path, lg in self._dir_deletes:
            if due > now:
                keep.append((due, path, lg))
                continue
            if not self.dirs.is_live(path.parent):
                if lg is not None:
                    self._handler_closes.append((now, lg))
                continue  # the directory failed: left for a restart with it healthy
            try:
                if lg is not None:
                    lg.delete()
                else:
                    shutil.rmtree(path)
                log.info("deleted log directory %s", path)
            except OSError:
                log.exception("failed to delete %s; retrying later", path)
                keep.append((now + self.config.file_delete_delay_ms, path, lg))
        self._dir_deletes = keep

    def _close_due_handlers(self, now: int) -> None:
        if not self._handler_closes:
            return
        keep = []
        for due, lg in self._handler_closes:
            if due > now:
                keep.append((due, lg))
            else:
                lg.close_handlers()
        self._handler_closes = keep

    @property
    def pending_dir_deletes(self) -> list[Path]:
        return [path for _, path, _ in self._dir_deletes]

    # ------------------------------------------------------------------ checkpoints

    def _logs_in(self, log_dir: Path) -> Iterator[tuple[TopicPartition, Log]]:
        """The current and future logs in ``log_dir`` (a directory never holds both of one
        partition, so they share its checkpoint files, as in Kafka)."""
        for logs in (self._logs, self._future_logs):
            yield from ((tp, lg) for tp, lg in logs.items() if lg.dir.parent == log_dir)

    def checkpoint_recovery_points(self) -> None:
        self.write_checkpoints(self._snapshots(RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point))

    def checkpoint_high_watermarks(self) -> None:
        self.write_checkpoints(self._snapshots(REPLICATION_OFFSET_CHECKPOINT, lambda lg: lg.high_watermark))

    def _snapshots(self, name: str, value: Callable[[Log], int], log_dirs: Iterable[Path] | None = None
                   ) -> list[CheckpointWrite]:
        return [CheckpointWrite(log_dir / name, next(self._checkpoint_seq),
                                {tp: value(lg) for tp, lg in self._logs_in(log_dir)})
                for log_dir in (self.live_log_dirs if log_dirs is None else log_dirs)]

    def write_checkpoints(self, writes: Iterable[CheckpointWrite]) -> None:
        """Write checkpoint snapshots (from any thread), skipping any older than what a file
        already holds, or of a directory that failed meanwhile; a write that fails takes
        its directory offline."""
        for w in writes:
            log_dir = w.path.parent
            with self._checkpoint_lock:
                if self._checkpoint_written.get(w.path, -1) > w.seq or self.failure_channel.is_offline(log_dir):
                    continue
                try:
                    OffsetCheckpointFile(w.path).write(w.offsets)
                except OSError as e:
                    self._fail_dir(log_dir, f"Error while writing {w.path}", e)
                    continue
                self._checkpoint_written[w.path] = w.seq

    def _write_checkpoints(self, log_dir: Path) -> None:
        self.write_checkpoints(self.dir_checkpoints([log_dir]))

    # ------------------------------------------------------------------ shutdown

    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints, then mark a clean shutdown (in the
        live directories; a failed one is left as it is)."""
        self.flush_created_logs(self.take_created_logs())
        for lg in (*self._logs.values(), *self._future_logs.values()):
            try:
                lg.flush()
                lg.close()
            except (OSError, KafkaStorageError) as e:
                log.error("could not close %s cleanly: %s", lg, e)
                lg.close_handlers()
        for _, _, lg in self._dir_deletes:
            if lg is not None:
                lg.close()  # the directory itself goes at the next start-up
        for _, lg in self._handler_closes:
            lg.close_handlers()
        for log_dir in list(self.live_log_dirs):
            self._write_checkpoints(log_dir)
            if self.dirs.is_live(log_dir) and not self.failure_channel.is_offline(log_dir):
                try:
                    write_atomically(log_dir / CLEAN_SHUTDOWN_FILE, b"")
                except OSError as e:
                    log.error("could not mark a clean shutdown in %s: %s", log_dir, e)
        self._logs.clear()
        self._future_logs.clear()
        self._dir_deletes.clear()
        self._handler_closes.clear()
        for fd in self._locks.values():
            os.close(fd)  # closing releases the flock
        self._locks.clear()


__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "LogDirLockedError",
    "LogManager",
    "LogManagerConfig",
    "delete_dir_name",
    "log_dir_name",
    "parse_delete_dir_name",
    "parse_log_dir_name",
]
