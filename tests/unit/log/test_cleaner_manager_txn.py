"""The cleaner and transactions over a real Log: the dirty section stops at the first unstable
offset (Kafka 2.8's cleanableOffsets uses the last stable offset), and a whole cleaning of a
log with an aborted transaction keeps the committed value and the abort's .txnindex entry.

The second part needs transactions wired into Log (append origins, markers, .txnindex per
segment); until then it is skipped."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from log_helpers import T0, Clock, batch, config

from odradek.config import CleanerConfig
from odradek.log.cleaner.cleaner import clean
from odradek.log.cleaner.log_cleaner import LogCleaner
from odradek.log.cleaner.manager import cleanable_offsets
from odradek.log.log import Log
from odradek.log.log_info import AppendOrigin
from odradek.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
from odradek.protocol.records import (
    SimpleRecord,
    build_batch,
    decode_batch,
    iter_batches,
    parse_header,
)

COMPACT = config(cleanup_policy=("compact",), segment_bytes=300, min_cleanable_dirty_ratio=0.01)


def _fill(lg: Log, n: int, prefix: bytes = b"k") -> None:
    for i in range(n):
        lg.append_as_leader(batch(1, key=prefix + b"%d" % i), leader_epoch=0)
    lg.update_high_watermark(lg.log_end_offset)


def test_the_dirty_section_stops_at_the_segment_of_the_first_unstable_offset(
        open_log: Callable[..., Log], clock: Clock) -> None:
    lg = open_log(COMPACT)
    _fill(lg, 30)
    assert len(lg.segments) > 4
    _, before, _ = cleanable_offsets(lg, None, clock())
    assert before == lg.active_segment.base_offset
    segment = lg.segments[2]
    first_unstable = lg.segment_end(segment) - 1  # the segment's last offset
    # A transaction that started there and is still open (what appending it records).
    txn_batch = build_batch([SimpleRecord(b"v", b"t")], base_offset=first_unstable, timestamp=T0,
                            producer_id=9, producer_epoch=0, base_sequence=0,
                            is_transactional=True)
    lg.producer_state.replay([parse_header(txn_batch)], lg.log_end_offset)
    assert lg.producer_state.first_unstable_offset() == first_unstable
    first_dirty, uncleanable, _ = cleanable_offsets(lg, None, clock())
    assert (first_dirty, uncleanable) == (0, segment.base_offset)


def _values(lg: Log, key: bytes) -> list[bytes | None]:
    """The values of ``key`` in the whole log (reads go a segment at a time)."""
    values = []
    offset = lg.log_start_offset
    while True:
        data = lg.read(offset, 1 << 20).read_bytes()
        if not data:
            return values
        for pos, header in iter_batches(data):
            offset = header.next_offset
            if not header.is_control:
                _, records = decode_batch(data[pos:pos + header.size])
                values += [r.value for r in records if r.key == key]


def test_a_cleaning_drops_aborted_data_and_keeps_its_txnindex_entry(
        open_log: Callable[..., Log], tmp_path: Path, clock: Clock) -> None:

    lg = open_log(COMPACT)
    lg.append_as_leader(build_batch([SimpleRecord(b"committed", b"k")], timestamp=T0), leader_epoch=0)
    lg.append_as_leader(build_batch([SimpleRecord(b"aborted", b"k")], timestamp=T0, producer_id=1,
                                    producer_epoch=0, base_sequence=0, is_transactional=True),
                        leader_epoch=0)
    lg.append_as_leader(build_end_txn_marker_batch(ControlRecordType.ABORT, producer_id=1,
                                                   producer_epoch=0, coordinator_epoch=0,
                                                   timestamp=T0),
                        leader_epoch=0, origin=AppendOrigin.COORDINATOR)
    _fill(lg, 12)
    open_txn = lg.log_end_offset
    lg.append_as_leader(build_batch([SimpleRecord(b"open", b"p")], timestamp=T0, producer_id=2,
                                    producer_epoch=0, base_sequence=0, is_transactional=True),
                        leader_epoch=0)
    _fill(lg, 12, prefix=b"m")
    assert lg.first_unstable_offset == open_txn
    assert [(t.producer_id, t.first_offset, t.last_offset)
            for t in lg.collect_aborted_transactions(0, lg.log_end_offset)] == [(1, 1, 2)]

    cleaner = LogCleaner(CleanerConfig(), [tmp_path], lambda: [lg], lambda _t, _p: lg, clock)
    ltc = cleaner.manager.grab_filthiest_log()
    assert ltc is not None
    assert ltc.first_uncleanable_offset == lg.segment_for(open_txn).base_offset
    job, read = cleaner.make_job(ltc)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in job.aborted_txns] == [(1, 1, 2)]
    result = clean(job)
    assert result.stats.aborted_batches == 1
    by_base = {s.base_offset: s for s, _ in read}
    lg.replace_segments([([by_base[b] for b in g.replaced], g.base_offset)
                         for g in result.groups])

    assert _values(lg, b"k") == [b"committed"]  # the aborted value did not shadow it
    assert _values(lg, b"p") == [b"open"]  # past the first unstable offset: untouched
    # The ABORT marker stayed (its data was there in this cleaning), with its entry, now
    # in the cleaned segment's .txnindex.
    assert [(t.producer_id, t.first_offset, t.last_offset)
            for t in lg.collect_aborted_transactions(0, lg.log_end_offset)] == [(1, 1, 2)]
    assert (lg.dir / f"{0:020d}.txnindex").exists()
