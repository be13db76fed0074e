"""Kafka's ``LogLoader``: open a partition directory's segments, recovering if needed.

* Leftovers of interrupted operations are removed: ``*.deleted`` segments (retention or
  truncation that had not finished its delayed delete), ``*.cleaned`` segments (a cleaning
  that had not started its swap), ``*.tmp`` checkpoint/snapshot files, and index files
  without a log file.
* ``*.swap`` segments are a cleaning whose swap had begun (see Log.replace_segments). If a
  ``*.cleaned`` file is left, not every cleaned segment had become ``.swap``: all of them
  are discarded and the old segments stay. Otherwise every swap is completed: the segment is
  re-scanned, the live segments it replaces (those whose base offset falls in its range)
  are deleted and it takes its live name.
* Every segment's indexes are sanity-checked; a segment whose indexes do not fit its log
  is rebuilt from the log.
* A segment's ``.txnindex`` follows its log file through every suffix, like the other
  indexes. The base offsets of the re-scanned segments are returned: their ``.txnindex``
  needs the producer state before them, so the log rebuilds it (Kafka's
  ``LogSegment.recover`` with a ``ProducerStateManager``); so are those of completed swaps.
* After an unclean shutdown every segment from the one holding the recovery point onward
  is re-scanned: each batch's bounds, magic, offsets and CRC-32C are checked and the
  indexes rebuilt; the first bad batch truncates its segment and every later segment is
  deleted. Everything before it is served as before.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odradek.log.abstract_index import IndexCorruptError
from odradek.log.cleaner.job import CLEANED_SUFFIX, SWAP_SUFFIX
from odradek.log.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
)
from odradek.log.transaction_index import TXN_INDEX_SUFFIX
from odradek.protocol.errors import CorruptMessageError, InvalidRecordError
from odradek.protocol.records import RecordBatchHeader

log = logging.getLogger(__name__)

_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, ".tmp", CLEANED_SUFFIX)
_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


@dataclass(slots=True)
class LoadResult:
    segments: list[LogSegment]
    recovered: bool  # some segment was re-scanned (so its data must be flushed)
    truncated_bytes: int
    # base offsets of the segments re-scanned (their .txnindex is to be rebuilt)
    recovered_bases: set[int]


def _base_offset(name: str, suffix: str) -> int | None:
    stem = name[:-len(suffix)]
    return int(stem) if name.endswith(suffix) and len(stem) == 20 and stem.isdigit() else None


def load_segments(directory: Path, make_segment: Callable[[int, str], LogSegment], *,
                  recovery_point: int, had_clean_shutdown: bool,
                  on_batch: Callable[[RecordBatchHeader], None]) -> LoadResult:
    """Open (and if needed recover) the segments of ``directory``, oldest first.

    ``on_batch`` sees every batch header a recovery scan accepts (for the leader epoch
    cache). Returns no segments for an empty directory; the caller creates the first one.
    """
    names = os.listdir(directory)
    # A .cleaned file left means the swap had not begun for the whole cleaning: its .swap
    # files go too (see Log.replace_segments).
    begun = not any(name.endswith(CLEANED_SUFFIX) for name in names)
    for name in names:
        if name.endswith(_LEFTOVER_SUFFIXES) or (not begun and name.endswith(SWAP_SUFFIX)):
            os.unlink(directory / name)
    swaps = [] if not begun else sorted(
        base for name in names if (base := _base_offset(name, LOG_SUFFIX + SWAP_SUFFIX)) is not None)
    for name in names:
        for suffix in (s + SWAP_SUFFIX for s in _INDEX_SUFFIXES):
            base = _base_offset(name, suffix)
            if base is not None and begun and base not in swaps:
                os.unlink(directory / name)  # its log file already has its live name
    for i, base in enumerate(swaps):
        _complete_swap(directory, make_segment(base, SWAP_SUFFIX),
                       swaps[i + 1] if i + 1 < len(swaps) else None)
    # A crash inside the rename may have left the swap's .txnindex under either name, so it
    # is rebuilt like a recovered segment's (Kafka recovers a swap segment in full).
    recovered_bases: set[int] = set(swaps)
    names = os.listdir(directory)
    bases: set[int] = set()
    for name in names:
        if (base := _base_offset(name, LOG_SUFFIX)) is not None:
            bases.add(base)
    for name in names:
        for suffix in _INDEX_SUFFIXES:
            base = _base_offset(name, suffix)
            if base is not None and base not in bases:
                os.unlink(directory / name)  # an index without its log is useless
    segments = [make_segment(base, "") for base in sorted(bases)]
    for segment in segments:
        try:
            segment.sanity_check()
        except (IndexCorruptError, CorruptMessageError, InvalidRecordError) as e:
            log.warning("%s: rebuilding indexes (%s)", segment.log_path, e)
            segment.recover()
            recovered_bases.add(segment.base_offset)
    truncated = 0
    if not had_clean_shutdown and segments:
        truncated = _recover(segments, recovery_point, on_batch, recovered_bases)
    recovered_bases.intersection_update(s.base_offset for s in segments)
    return LoadResult(segments, bool(recovered_bases), truncated, recovered_bases)


def _complete_swap(directory: Path, swap: LogSegment, next_swap: int | None) -> None:
    """Finish a swap a crash interrupted: the ``.swap`` segment replaces every live segment
    whose base offset falls in its range, which ends at the next ``.swap`` segment's base
    (groups are swapped in order), or for the last one at its own next offset."""
    swap.recover()
    end = next_swap if next_swap is not None else max(swap.next_offset, swap.base_offset + 1)
    for name in os.listdir(directory):
        base = _base_offset(name, LOG_SUFFIX)
        if base is None or not swap.base_offset <= base < end:
            continue
        for suffix in (LOG_SUFFIX, *_INDEX_SUFFIXES):
            path = directory / f"{name[:-len(LOG_SUFFIX)]}{suffix}"
            if path.exists():
                os.unlink(path)
    swap.change_suffix(SWAP_SUFFIX, "")
    log.info("%s: completed an interrupted swap of cleaned segment %d", directory, swap.base_offset)
    swap.close()


def _recover(segments: list[LogSegment], recovery_point: int,
             on_batch: Callable[[RecordBatchHeader], None], recovered_bases: set[int]) -> int:
    """Re-scan the segments past the recovery point; drop everything after a bad batch."""
    first = 0
    for i, segment in enumerate(segments):
        if segment.base_offset <= recovery_point:
            first = i
    for i in range(first, len(segments)):
        segment = segments[i]
        truncated = segment.recover(on_batch)
        recovered_bases.add(segment.base_offset)
        if truncated:
            log.warning("%s: truncated %d invalid bytes at position %d", segment.log_path,
                        truncated, segment.size)
            for later in segments[i + 1:]:
                log.warning("%s: deleted after an earlier corrupt batch", later.log_path)
                truncated += later.size
                later.delete()
            del segments[i + 1:]
            return truncated
    return 0
