"""The storage engine: Kafka's on-disk log format, written and read as bytes.

``LogManager`` (all partitions of a broker) -> ``Log`` (one partition) -> ``LogSegment``
(``<base offset>.log`` + ``.index`` + ``.timeindex``). See each module's docstring.
"""

from odradek.log.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Log
from odradek.log.log_info import FetchDataInfo, FileRegion, LogAppendInfo, TimestampAndOffset
from odradek.log.log_manager import LogManager, LogManagerConfig

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "FetchDataInfo",
    "FileRegion",
    "Log",
    "LogAppendInfo",
    "LogManager",
    "LogManagerConfig",
    "TimestampAndOffset",
]
