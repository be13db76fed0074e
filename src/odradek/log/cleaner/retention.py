"""What survives a cleaning, as pure functions of a batch's facts: Kafka's
``shouldDiscardBatch`` / ``checkBatchRetention`` for a whole batch and ``shouldRetainRecord``
for its records. :class:`~odradek.log.cleaner.cleaning.Cleaning` gathers the facts (the
transactions it walks, the offset map, the producers' last batches) and copies what these
keep.

A batch is judged whole first (:func:`check_batch_retention`). A transaction marker is kept
as it is until :func:`should_discard_batch` lets it go; a batch of an aborted transaction
loses all its records; a batch whose records all go disappears, unless it is its producer's
last, which the producer state rebuilt from the log needs: that one stays, emptied (Kafka's
``BatchRetention.RETAIN_EMPTY``). Any other batch with records has them judged one by one
(:func:`records_to_retain`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from itertools import compress, count, repeat
from operator import ge

from odradek.log.cleaner.job import SegmentRef

__all__ = ["BatchRetention", "check_batch_retention", "records_to_retain", "retains_tombstones",
           "should_discard_batch", "when_no_record_survives"]


class BatchRetention(Enum):
    """What becomes of a whole batch."""

    KEEP = "keep"  # copied byte for byte, its records unread
    DELETE = "delete"  # dropped with all its records
    RETAIN_EMPTY = "retain_empty"  # kept without its records (the same header, no codec)
    FILTER = "filter"  # its records are judged one by one (records_to_retain)


def retains_tombstones(segment: SegmentRef, first_dirty_offset: int, now_ms: int,
                       delete_retention_ms: int) -> bool:
    """Whether ``segment``'s tombstones (and markers of finished transactions) survive this
    cleaning: Kafka's ``retainDeletesAndTxnMarkers``.

    A tombstone goes once it has been through a cleaning (its segment lies in the clean
    section) and ``delete.retention.ms`` has passed since that segment was last written,
    so a consumer that read up to it has had that long to see the delete.
    """
    cleaned_before = segment.next_offset <= first_dirty_offset
    return not (cleaned_before and now_ms - segment.last_modified_ms > delete_retention_ms)


def should_discard_batch(is_control: bool, discardable: bool, retain_deletes: bool) -> bool:
    """Kafka's ``shouldDiscardBatch``: whether every record of the batch goes.

    ``discardable`` is what the transaction walk said of it (a data batch of an aborted
    transaction; a marker whose transaction has no batch left). Aborted data goes at
    once; a marker only where deletes are no longer retained (``retain_deletes``).
    """
    return discardable and not (is_control and retain_deletes)


def check_batch_retention(is_control: bool, records_count: int, discard: bool,
                          last_of_producer: bool) -> BatchRetention:
    """Kafka's ``checkBatchRetention``: the fate of a batch before its records are read.

    ``discard`` is :func:`should_discard_batch`'s answer; ``last_of_producer`` whether the
    batch holds its producer's last sequence or current-epoch marker (Kafka's
    ``isBatchLastRecordOfProducer``). A marker not discarded keeps its record.
    """
    if not discard:
        if is_control:
            return BatchRetention.KEEP
        if records_count:
            return BatchRetention.FILTER
    return when_no_record_survives(records_count, last_of_producer)


def when_no_record_survives(records_count: int, last_of_producer: bool) -> BatchRetention:
    """A batch none of whose records survives goes (Kafka's ``DELETE_EMPTY``), unless it is
    its producer's last: then it stays, emptied (an empty batch stays as it is)."""
    if not last_of_producer:
        return BatchRetention.DELETE
    return BatchRetention.RETAIN_EMPTY if records_count else BatchRetention.KEEP


def records_to_retain(keys: list[bytes], offsets: list[int], tombstones: list[int],
                      latest_offsets: Mapping[bytes, int], retain_deletes: bool) -> list[int]:
    """Kafka's ``shouldRetainRecord`` over one batch's keyed records (as
    :func:`~odradek.log.cleaner.record_scanner.scan_records` lists them): the indexes of
    those that stay.

    A record stays iff no later offset holds its key (``latest_offsets``: the offset map)
    and it has a value or deletes are retained. Keyless records never stay.
    """
    # The loop runs in C (map, compress): the clean phase of a shuffled log spends its time here.
    kept = list(compress(count(), map(ge, offsets, map(latest_offsets.get, keys, repeat(-1)))))
    if not retain_deletes and tombstones:
        dead = set(tombstones)
        kept = [i for i in kept if offsets[i] not in dead]
    return kept
