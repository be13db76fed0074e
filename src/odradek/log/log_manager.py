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
"""

from __future__ import annotations

import fcntl
import itertools
import logging
import os
import re
import shutil
import threading
import uuid
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
from odradek.log.partition_metadata import topic_id_string, write_topic_ids
from odradek.protocol.errors import KafkaStorageError, for_code

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
_DELETE_DIR_RE = re.compile(r"^(?P<name>.+)\.(?P<uid>[0-9a-f]{32})-delete$")

InconsistentTopicIdError = for_code(ErrorCode.inconsistent_topic_id)



def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """``topic-partition`` -> ``(topic, partition)``; topics may hold '-' and '.', so the
    partition is what follows the last '-'. None for anything else."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit() or name.startswith("."):
        return None
    return topic, int(partition)


def delete_dir_name(topic: str, partition: int) -> str:
    """Kafka's ``<topic>-<partition>.<uuid without dashes>-delete``."""
    return f"{log_dir_name(topic, partition)}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"


def parse_delete_dir_name(name: str) -> TopicPartition | None:
    m = _DELETE_DIR_RE.match(name)
    return parse_log_dir_name(m["name"]) if m else None


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
                 time_ms: Callable[[], int] = now_ms) -> None:
        self.config = config
        self.default_config = default_config
        self._topic_config = topic_config or (lambda _topic: self.default_config)
        self._time_ms = time_ms
        self.log_dirs = [Path(d).resolve() for d in config.log_dirs]
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_deletes: list[tuple[int, Path, Log | None]] = []
        # Created logs whose directory entry and partition.metadata are not durable yet
        # (see flush_created_logs).
        self._unflushed: list[Log] = []
        self._locks: list[int] = []
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

    # ------------------------------------------------------------------ start-up

    def startup(self) -> None:
        """Lock the directories and open every log in them."""
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            self._lock(log_dir)
        for log_dir in self.log_dirs:
            self._load_dir(log_dir)
        for log_dir in self.log_dirs:
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            if marker.exists():
                marker.unlink()

    def _lock(self, log_dir: Path) -> None:
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirLockedError(f"failed to acquire lock on {log_dir / LOCK_FILE}: another "
                                    "broker process is using this directory") from None
        self._locks.append(fd)

    def _read_checkpoint(self, path: Path) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(path).read()
        except (CorruptCheckpointError, OSError) as e:
            log.warning("ignoring %s: %s", path, e)
            return {}

    def _load_dir(self, log_dir: Path) -> None:
        clean = (log_dir / CLEAN_SHUTDOWN_FILE).exists()
        recovery = self._read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
        starts = self._read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
        hws = self._read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT)
        now = self._time_ms()
        for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            if entry.name.endswith(DELETE_DIR_SUFFIX):
                # A deletion a restart interrupted: finish it after the delay.
                self._dir_deletes.append((now + self.config.file_delete_delay_ms,
                                          Path(entry.path), None))
                continue
            tp = parse_log_dir_name(entry.name)
            if tp is None:
                continue
            if tp in self._logs:
                raise KafkaStorageError(f"duplicate log directories for {entry.name}: "
                                        f"{self._logs[tp].dir} and {entry.path}")
            self._logs[tp] = Log.open(
                Path(entry.path), self._topic_config(tp[0]), topic=tp[0], partition=tp[1],
                log_start_offset=starts.get(tp, 0), recovery_point=recovery.get(tp, 0),
                high_watermark=hws.get(tp, 0), had_clean_shutdown=clean, time_ms=self._time_ms,
                producer_id_expiration_ms=self.config.producer_id_expiration_ms)
        log.info("loaded %d logs from %s (%s shutdown)", sum(
            1 for lg in self._logs.values() if lg.dir.parent == log_dir), log_dir,
            "clean" if clean else "unclean")

    # ------------------------------------------------------------------ logs

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None,
                          topic_id: str | uuid.UUID | None = None) -> Log:
        """The partition's log, created in the least-loaded directory if there is none.

        ``topic_id`` (Kafka's string form or a UUID) is recorded in ``partition.metadata``;
        raises INCONSISTENT_TOPIC_ID if an existing log belongs to another topic id.

        Creating a log does no fsync: the new directory entry and ``partition.metadata`` are
        written and made durable by :meth:`flush_created_logs`, in the background and many at
        a time (as Kafka flushes partition.metadata from its scheduler), so a LeaderAndIsr
        for thousands of new partitions does not wait on thousands of fsyncs.
        """
        if topic_id is not None:
            topic_id = topic_id_string(topic_id)
        existing = self._logs.get((topic, partition))
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
        if len(self.log_dirs) == 1:
            parent = self.log_dirs[0]  # (counting every open log per new one was quadratic)
        else:
            counts = {d: 0 for d in self.log_dirs}
            for lg in self._logs.values():
                counts[lg.dir.parent] = counts.get(lg.dir.parent, 0) + 1
            parent = min(self.log_dirs, key=lambda d: counts[d])
        try:
            new_log = Log.open(
                parent / log_dir_name(topic, partition), config or self._topic_config(topic),
                topic=topic, partition=partition, time_ms=self._time_ms,
                producer_id_expiration_ms=self.config.producer_id_expiration_ms, sync_parent=False)
        except OSError as e:
            raise KafkaStorageError(f"cannot create log for {topic}-{partition}: {e}") from e
        new_log.topic_id = topic_id
        self._logs[(topic, partition)] = new_log
        self._unflushed.append(new_log)
        return new_log

    def take_created_logs(self) -> list[Log]:
        """The logs created (or given a topic id) since the last call: pass them to
        :meth:`flush_created_logs`, which may run in a worker thread."""
        taken, self._unflushed = self._unflushed, []
        return taken

    @staticmethod
    def flush_created_logs(logs: list[Log]) -> None:
        """Write each log's ``partition.metadata`` and make it and the new directories
        durable with two file-system syncs for the whole batch (one fsync per file and
        directory costs seconds for thousands of partitions and holds up every other file
        creation). A log renamed for deletion meanwhile is skipped (its directory goes anyway)."""
        if not logs:
            return
        try:
            write_topic_ids((lg.dir, lg.topic_id) for lg in logs if lg.topic_id is not None)
        except OSError as e:  # the topic id is written again at the next LeaderAndIsr after a restart
            log.error("could not write partition.metadata for %d new logs: %s", len(logs), e)

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Apply a topic config change (AlterConfigs) to the topic's open logs."""
        for (t, _), lg in self._logs.items():
            if t == topic:
                lg.config = config

    def update_default_config(self, default: LogConfig) -> None:
        """New broker defaults for topic configs (a dynamic broker config changed): every
        open log keeps its topic's overrides and takes the rest from ``default``."""
        self.default_config = default
        for lg in self._logs.values():
            lg.config = lg.config.rebased(default)

    def async_delete(self, topic: str, partition: int) -> Path | None:
        """Stop serving the partition now: rename its directory to
        ``<topic>-<partition>.<uuid>-delete`` and remove it after ``file.delete.delay.ms``.
        Descriptors stay open until then so in-flight sendfiles finish. Returns the new path
        (None if the partition has no log here)."""
        lg = self._logs.pop((topic, partition), None)
        if lg is None:
            return None
        target = lg.dir.parent / delete_dir_name(topic, partition)
        try:
            lg.rename_dir(target)
        except OSError as e:
            raise KafkaStorageError(f"failed to rename {lg.dir} to {target}: {e}") from e
        self._dir_deletes.append((self._time_ms() + lg.config.file_delete_delay_ms, target, lg))
        # A recreated topic of the same name must not inherit this one's checkpoints.
        self._write_checkpoints(target.parent)
        return target

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
        for lg in list(self._logs.values()):
            try:
                lg.flush_if_due(now)
                if retention:
                    lg.delete_old_segments(now)
                lg.delete_pending_segments(now)
                if expiry:
                    lg.producer_state.remove_expired_producers(now)
            except (OSError, KafkaStorageError):
                log.exception("periodic maintenance of %s failed", lg)
        due: list[CheckpointWrite] = []
        if self._due("recovery", now, self.config.recovery_point_checkpoint_interval_ms):
            due += self._snapshots(RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point)
        if self._due("start", now, self.config.log_start_offset_checkpoint_interval_ms):
            due += self._snapshots(LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset)
        if self._due("hw", now, self.config.high_watermark_checkpoint_interval_ms):
            due += self._snapshots(REPLICATION_OFFSET_CHECKPOINT, lambda lg: lg.high_watermark)
        self._delete_due_dirs(now)
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

    @property
    def pending_dir_deletes(self) -> list[Path]:
        return [path for _, path, _ in self._dir_deletes]

    # ------------------------------------------------------------------ checkpoints

    def _logs_in(self, log_dir: Path) -> Iterator[tuple[TopicPartition, Log]]:
        return ((tp, lg) for tp, lg in self._logs.items() if lg.dir.parent == log_dir)

    def checkpoint_recovery_points(self) -> None:
        self.write_checkpoints(self._snapshots(RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point))

    def checkpoint_high_watermarks(self) -> None:
        self.write_checkpoints(self._snapshots(REPLICATION_OFFSET_CHECKPOINT, lambda lg: lg.high_watermark))

    def _snapshots(self, name: str, value: Callable[[Log], int], log_dirs: Iterable[Path] | None = None
                   ) -> list[CheckpointWrite]:
        return [CheckpointWrite(log_dir / name, next(self._checkpoint_seq),
                                {tp: value(lg) for tp, lg in self._logs_in(log_dir)})
                for log_dir in (self.log_dirs if log_dirs is None else log_dirs)]

    def write_checkpoints(self, writes: Iterable[CheckpointWrite]) -> None:
        """Write checkpoint snapshots (from any thread), skipping any older than what a file
        already holds."""
        for w in writes:
            with self._checkpoint_lock:
                if self._checkpoint_written.get(w.path, -1) > w.seq:
                    continue
                OffsetCheckpointFile(w.path).write(w.offsets)
                self._checkpoint_written[w.path] = w.seq

    def _write_checkpoints(self, log_dir: Path) -> None:
        self.write_checkpoints(
            self._snapshots(RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point, [log_dir])
            + self._snapshots(LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset, [log_dir])
            + self._snapshots(REPLICATION_OFFSET_CHECKPOINT, lambda lg: lg.high_watermark, [log_dir]))

    # ------------------------------------------------------------------ shutdown

    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints, then mark a clean shutdown."""
        self.flush_created_logs(self.take_created_logs())
        for lg in self._logs.values():
            lg.flush()
            lg.close()
        for _, _, lg in self._dir_deletes:
            if lg is not None:
                lg.close()  # the directory itself goes at the next start-up
        for log_dir in self.log_dirs:
            self._write_checkpoints(log_dir)
            write_atomically(log_dir / CLEAN_SHUTDOWN_FILE, b"")
        self._logs.clear()
        self._dir_deletes.clear()
        for fd in self._locks:
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
