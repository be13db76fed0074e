"""What the broker hands the cleaner process and what it hands back (Kafka's ``LogToClean``
and ``CleanerStats``), as plain picklable data.

The broker (its event loop) picks a log and describes the part to clean as a
:class:`CleanJob`: the segment files, the dirty range and the settings that decide what
survives. A cleaner process reads those files, writes the cleaned segments next to them as
``<base>.log.cleaned`` (with ``.index.cleaned``, ``.timeindex.cleaned`` and, when an ABORT
marker of a transaction with data left survives, ``.txnindex.cleaned``), fsyncs them and
returns a :class:`CleanResult`. The broker then checks that the log still has the segments
the job named and swaps the cleaned ones in (``.cleaned`` -> ``.swap`` -> final names).
Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.log.transaction_index import AbortedTxn

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """One segment of the cleanable range as the broker saw it when it made the job.

    Segments below the active one are never appended to, so ``size`` is the whole file; a
    cleaner reads ``[0, size)`` of ``log_path``.
    """

    base_offset: int
    log_path: str
    size: int
    next_offset: int  # one past the segment's last offset (its successor's base offset)
    last_modified_ms: int  # the log file's mtime: carried over to the cleaned segment


@dataclass(frozen=True, slots=True)
class CleanJob:
    """Clean ``segments`` (oldest first, starting at the log's first segment).

    Segments whose ``next_offset <= first_dirty_offset`` form the clean section (cleaned
    before); the rest form the dirty section. Every segment ends at or below
    ``first_uncleanable_offset`` (never the active segment, never data at or above the
    high watermark or within ``min.compaction.lag.ms``).
    """

    topic: str
    partition: int
    directory: str
    segments: tuple[SegmentRef, ...]
    first_dirty_offset: int
    first_uncleanable_offset: int
    now_ms: int
    # Settings (topic-level, already resolved against the broker's defaults)
    delete_retention_ms: int  # delete.retention.ms
    segment_bytes: int  # segment.bytes: the largest group of cleaned segments
    max_index_bytes: int  # segment.index.bytes
    index_interval_bytes: int  # index.interval.bytes
    # Broker-level settings
    max_map_entries: int  # keys the offset map may hold (from log.cleaner.dedupe.buffer.size)
    io_max_bytes_per_second: float  # log.cleaner.io.max.bytes.per.second (inf: no throttle)
    # producer id -> last offset of that producer's last batch in the log: that batch is
    # kept (empty if all its records go) so producer state survives a reload.
    producer_last_offsets: dict[int, int] = field(default_factory=dict)
    # producer id -> epoch, for each producer whose state holds no data batch (only
    # markers since its epoch began): its markers of that epoch are kept, emptied once
    # discardable (Kafka's LastRecord without a lastDataOffset).
    marker_only_producers: dict[int, int] = field(default_factory=dict)
    # The aborted transactions overlapping the job's segments (Log.collect_aborted_transactions
    # from the first segment's base to first_uncleanable_offset): their data is discarded
    # and their ABORT markers go once safe (Kafka's CleanedTransactionMetadata).
    aborted_txns: tuple[AbortedTxn, ...] = ()


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    """One cleaned segment replacing a run of old ones.

    Its files are ``<filename_prefix(base_offset)>.log.cleaned`` (+ both indexes) in the
    job's directory, fsynced. ``replaced`` lists the base offsets of the old segments it
    replaces; the first equals ``base_offset``.
    """

    base_offset: int
    replaced: tuple[int, ...]
    size: int


@dataclass(slots=True)
class CleanerStats:
    """Kafka's ``CleanerStats``: what one cleaning read, wrote and took (counted as it goes,
    as Kafka's is)."""

    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    map_seconds: float = 0.0
    clean_seconds: float = 0.0
    buffer_utilization: float = 0.0
    invalid_messages: int = 0  # records without a key (Kafka drops them when cleaning)
    aborted_batches: int = 0  # batches of aborted transactions discarded
    markers_removed: int = 0  # transaction markers discarded (their transaction is gone)


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What a cleaning produced.

    ``end_offset`` is the new first dirty offset (the ``cleaner-offset-checkpoint`` entry):
    one past the last offset the offset map covered, which is ``first_uncleanable_offset``
    unless the map filled up first. ``tombstone_due_ms`` is the earliest time a tombstone
    (or a transaction marker whose transaction is gone) kept by this cleaning may be
    removed (None when none was kept).
    """

    groups: tuple[CleanedGroup, ...]
    end_offset: int
    stats: CleanerStats
    tombstone_due_ms: int | None = None


__all__ = ["CLEANED_SUFFIX", "SWAP_SUFFIX", "CleanJob", "CleanResult", "CleanedGroup",
           "CleanerStats", "SegmentRef"]
