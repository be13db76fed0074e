"""DescribeLogDirs' answer (Kafka's ReplicaManager.describeLogDirs): each configured log
directory with its error (KAFKA_STORAGE_ERROR when offline), the size of each replica in it,
the lag of each, and (v4, KIP-827) the volume's total and usable bytes."""

from __future__ import annotations

import os
from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.partition import Partition
    from odradek.log.log import Log
    from odradek.log.log_manager import LogManager

__all__ = ["INVALID_OFFSET_LAG", "LogDirDescription", "ReplicaInfo", "describe_log_dirs"]

INVALID_OFFSET_LAG = -1  # DescribeLogDirsResponse.INVALID_OFFSET_LAG: the replica is not online here


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    topic_partition: TopicPartition
    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    path: str
    error: ErrorCode
    replicas: tuple[ReplicaInfo, ...] = ()
    total_bytes: int = -1
    usable_bytes: int = -1


def describe_log_dirs(log_manager: LogManager, partitions: Mapping[TopicPartition, Partition],
                      wanted: Set[TopicPartition] | None) -> list[LogDirDescription]:
    """Every configured directory, in configuration order, with the replicas of ``wanted``
    (None: all) it holds.  A directory is named by its absolute path as configured."""
    current = {TopicPartition(lg.topic, lg.partition): lg for lg in log_manager.all_logs()}
    logs = [(tp, lg, False) for tp, lg in current.items()] + [
        (tp, lg, True) for tp, lg in log_manager.future_logs().items()]
    described = []
    for configured, log_dir in zip(log_manager.config.log_dirs, log_manager.log_dirs, strict=True):
        path = os.path.abspath(configured)
        if not log_manager.is_log_dir_online(log_dir):
            described.append(LogDirDescription(path, ErrorCode.kafka_storage_error))
            continue
        replicas = tuple(
            ReplicaInfo(tp, lg.size, _offset_lag(partitions.get(tp), current.get(tp), lg, is_future), is_future)
            for tp, lg, is_future in sorted(logs, key=lambda e: (e[0], e[2]))
            if lg.dir.parent == log_dir and (wanted is None or tp in wanted))
        try:
            stat = os.statvfs(log_dir)
        except OSError:
            described.append(LogDirDescription(path, ErrorCode.none, replicas))
            continue
        described.append(LogDirDescription(path, ErrorCode.none, replicas, stat.f_blocks * stat.f_frsize,
                                           stat.f_bavail * stat.f_frsize))
    return described


def _offset_lag(partition: Partition | None, current: Log | None, lg: Log, is_future: bool) -> int:
    """Kafka's getLogEndOffsetLag: a future log's distance to the current log's end; a current
    log's to its high watermark (0 once caught up); -1 for a replica not served here."""
    if partition is None or partition.log is None or current is None:
        return INVALID_OFFSET_LAG
    if is_future:
        return current.log_end_offset - lg.log_end_offset
    return max(current.high_watermark - lg.log_end_offset, 0)
