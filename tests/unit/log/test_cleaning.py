"""The log cleaner's sans-IO core (odradek.log.cleaner.cleaning): batches in, cleaned
batches out, no files."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.log.cleaner.cleaning import Cleaning, group_segments_by_size
from odradek.log.cleaner.job import CleanJob, CleanResult, SegmentRef
from odradek.log.cleaner.offset_map import OffsetMap
from odradek.log.cleaner.retention import retains_tombstones
from odradek.protocol.errors import CorruptMessageError
from odradek.protocol.records import (
    HEADER_SIZE,
    CompressionType,
    Record,
    RecordBatchHeader,
    SimpleRecord,
    TimestampType,
    build_batch,
    decode_batch,
    encode_batch,
    iter_batches,
    parse_header,
)
from support.examples import examples

T0 = 1_700_000_000_000
DAY = 86_400_000


@dataclass
class Seg:
    """A segment as bytes, with the mtime its SegmentRef carries."""

    batches: list[bytes]
    last_modified_ms: int = T0

    @property
    def data(self) -> bytes:
        return b"".join(self.batches)


def batch(base: int, *records: tuple[bytes | None, bytes | None], ts: int = T0,
          **kwargs: object) -> bytes:
    """A batch at ``base`` of ``(key, value)`` records, timestamps ts, ts + 1, ..."""
    return build_batch([SimpleRecord(value, key, timestamp=ts + i)
                        for i, (key, value) in enumerate(records)],
                       base_offset=base, timestamp=ts, **kwargs)


def control_batch(base: int, producer_id: int = 7) -> bytes:
    """A transaction marker (COMMIT) batch: control and transactional attributes set."""
    plain = build_batch([SimpleRecord(b"\x00\x00\x00\x00\x00\x00", b"\x00\x00\x00\x01")],
                        base_offset=base, timestamp=T0)
    return encode_batch(plain[HEADER_SIZE:], base_offset=base, last_offset_delta=0,
                        records_count=1, attributes=0x30, base_timestamp=T0, max_timestamp=T0,
                        partition_leader_epoch=0, producer_id=producer_id, producer_epoch=0,
                        base_sequence=-1)


def refs(segments: list[Seg], end_offset: int | None = None) -> tuple[SegmentRef, ...]:
    """SegmentRefs for in-memory segments (log_path names the base offset)."""
    out = []
    bases = [parse_header(s.batches[0]).base_offset for s in segments]
    for i, (seg, base) in enumerate(zip(segments, bases, strict=True)):
        if i + 1 < len(segments):
            nxt = bases[i + 1]
        elif end_offset is not None:
            nxt = end_offset
        else:
            nxt = parse_header(seg.batches[-1]).next_offset
        out.append(SegmentRef(base, str(base), len(seg.data), nxt, seg.last_modified_ms))
    return tuple(out)


def make_job(segment_refs: tuple[SegmentRef, ...], **overrides: object) -> CleanJob:
    job = CleanJob(
        topic="t", partition=0, directory="/nowhere", segments=segment_refs,
        first_dirty_offset=segment_refs[0].base_offset,
        first_uncleanable_offset=segment_refs[-1].next_offset, now_ms=T0 + 1000,
        delete_retention_ms=DAY, segment_bytes=1 << 30, max_index_bytes=1 << 20,
        index_interval_bytes=4096, max_map_entries=1000, io_max_bytes_per_second=float("inf"))
    return replace(job, **overrides)


def run(job: CleanJob, data: dict[int, bytes]) -> tuple[CleanResult, dict[int, bytes]]:
    """Drive a Cleaning as the file cleaner does, over whole segments in memory; check the
    BatchInfo it hands back against the bytes. Returns the result and each group's bytes."""
    cleaning = Cleaning(job)
    for ref in cleaning.dirty_segments:
        if cleaning.map(data[ref.base_offset]):
            break
    out: dict[int, bytes] = {}
    for group in cleaning.groups:
        buf = bytearray()
        for ref in group:
            chunk = cleaning.clean(ref, data[ref.base_offset])
            found = [(pos, h.size, h.last_offset, h.max_timestamp)
                     for pos, h in iter_batches(chunk.data)]
            assert chunk.batches == found
            buf += chunk.data
        out[group[0].base_offset] = bytes(buf)
    result = cleaning.result({base: len(d) for base, d in out.items()})
    return result, out


def clean_segments(segments: list[Seg], **overrides: object
                   ) -> tuple[CleanResult, dict[int, bytes]]:
    segment_refs = refs(segments)
    data = {ref.base_offset: seg.data for ref, seg in zip(segment_refs, segments, strict=True)}
    return run(make_job(segment_refs, **overrides), data)


def decoded(data: bytes) -> list[tuple[RecordBatchHeader, list[Record]]]:
    return [decode_batch(data[pos:pos + h.size]) for pos, h in iter_batches(data)]


def records_of(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for _, recs in decoded(data) for r in recs]


# ---------------------------------------------------------------------- keys


def test_the_latest_record_of_each_key_survives_at_its_offset() -> None:
    seg = Seg([batch(0, (b"a", b"1"), (b"b", b"1"), (b"a", b"2")),
               batch(3, (b"c", b"1"), (b"b", b"2")),
               batch(5, (b"a", b"3"))])
    result, out = clean_segments([seg])
    assert records_of(out[0]) == [(3, b"c", b"1"), (4, b"b", b"2"), (5, b"a", b"3")]
    assert result.end_offset == 6
    assert [(g.base_offset, g.replaced) for g in result.groups] == [(0, (0,))]
    stats = result.stats
    assert (stats.messages_read, stats.messages_written) == (6, 3)
    assert stats.map_messages_read == 6
    assert stats.buffer_utilization == pytest.approx(3 / 1000)
    assert result.tombstone_due_ms is None


def test_a_partly_kept_batch_keeps_its_offsets_and_record_bytes() -> None:
    original = batch(10, (b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1"),
                     producer_id=5, producer_epoch=2, base_sequence=40, partition_leader_epoch=3)
    later = batch(14, (b"c", b"2"))
    _, out = clean_segments([Seg([original, later])])
    (header, recs), (_, later_recs) = decoded(out[10])
    before = parse_header(original)
    assert header.base_offset == 10 and header.last_offset == 13  # still covers 10..13
    assert header.records_count == 2
    assert (header.producer_id, header.producer_epoch, header.base_sequence,
            header.partition_leader_epoch) == (5, 2, 40, 3)
    assert header.base_timestamp == before.base_timestamp
    assert header.max_timestamp == T0 + 2  # the latest survivor's (record 12), not T0 + 3
    assert [(r.offset, r.key, r.timestamp) for r in recs] == [(11, b"b", T0 + 1),
                                                              (12, b"a", T0 + 2)]
    # each surviving record's bytes are the original's
    kept = out[10][HEADER_SIZE:header.size]
    assert kept in original
    assert [r.offset for r in later_recs] == [14]


def test_a_wholly_kept_batch_is_copied_byte_for_byte() -> None:
    old = Seg([batch(0, (b"a", b"1"))], last_modified_ms=T0 - 5 * DAY)
    keep = batch(1, (b"b", b"1"), (b"c", None), ts=T0 + 7, is_transactional=True,
                 producer_id=3, producer_epoch=0, base_sequence=0)
    result, out = clean_segments([old, Seg([keep, batch(3, (b"a", b"2"))])],
                                 first_dirty_offset=1)
    assert out[0] == keep + batch(3, (b"a", b"2"))
    assert result.tombstone_due_ms == T0 + DAY  # the tombstone for c was kept


def test_log_append_time_batches_keep_their_max_timestamp() -> None:
    original = batch(0, (b"a", b"1"), (b"b", b"1"), (b"a", b"2"),
                     timestamp_type=TimestampType.LOG_APPEND_TIME)
    header = parse_header(original)
    _, out = clean_segments([Seg([original, batch(3, (b"b", b"2"))])])
    rebuilt, recs = decoded(out[0])[0]
    assert rebuilt.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert rebuilt.max_timestamp == header.max_timestamp
    assert [r.offset for r in recs] == [2]


def test_keyless_records_are_dropped_and_counted() -> None:
    clean = Seg([batch(0, (None, b"x"), (b"a", b"1"))], last_modified_ms=T0 - 5 * DAY)
    dirty = Seg([batch(2, (b"b", b"1"), (None, b"y"), (None, b"z")), batch(5, (None, b"w"))])
    result, out = clean_segments([clean, dirty], first_dirty_offset=2)
    assert records_of(out[0]) == [(1, b"a", b"1"), (2, b"b", b"1")]
    assert result.stats.invalid_messages == 4


def test_control_batches_are_kept_as_they_are() -> None:
    marker = control_batch(2)
    _, out = clean_segments([Seg([batch(0, (b"a", b"1"), (b"a", b"2")), marker])])
    batches = [out[0][pos:pos + h.size] for pos, h in iter_batches(out[0])]
    assert batches[1] == marker
    assert records_of(batches[0]) == [(1, b"a", b"2")]


def test_a_batch_with_no_survivor_is_dropped() -> None:
    _, out = clean_segments([Seg([batch(0, (b"a", b"1"), (b"b", b"1")),
                                  batch(2, (b"a", b"2"), (b"b", b"2"))])])
    assert [h.base_offset for _, h in iter_batches(out[0])] == [2]


# ---------------------------------------------------------------------- tombstones


def test_tombstones_in_the_dirty_section_are_kept() -> None:
    seg = Seg([batch(0, (b"a", b"1"), (b"a", None), (b"b", b"1"))],
              last_modified_ms=T0 - 10 * DAY)
    result, out = clean_segments([seg], now_ms=T0)
    assert records_of(out[0]) == [(1, b"a", None), (2, b"b", b"1")]
    assert result.tombstone_due_ms == T0 - 10 * DAY + DAY


def test_tombstones_in_an_old_clean_segment_are_removed() -> None:
    clean = Seg([batch(0, (b"a", None), (b"b", b"1"))], last_modified_ms=T0 - 2 * DAY)
    dirty = Seg([batch(2, (b"c", b"1"))], last_modified_ms=T0)
    result, out = clean_segments([clean, dirty], first_dirty_offset=2, now_ms=T0)
    assert records_of(out[0]) == [(1, b"b", b"1"), (2, b"c", b"1")]
    assert result.tombstone_due_ms is None


def test_tombstones_in_a_young_clean_segment_are_kept() -> None:
    clean = Seg([batch(0, (b"a", None), (b"b", b"1"))], last_modified_ms=T0 - DAY // 2)
    dirty = Seg([batch(2, (b"c", b"1"))], last_modified_ms=T0 + 5)
    result, out = clean_segments([clean, dirty], first_dirty_offset=2, now_ms=T0)
    assert records_of(out[0]) == [(0, b"a", None), (1, b"b", b"1"), (2, b"c", b"1")]
    # one group: its mtime (the last segment's) is what the next cleaning sees
    assert result.tombstone_due_ms == T0 + 5 + DAY


def test_retains_tombstones_rule() -> None:
    old = SegmentRef(0, "0", 10, 5, T0 - 2 * DAY)
    assert not retains_tombstones(old, 5, T0, DAY)
    assert retains_tombstones(old, 4, T0, DAY)  # still dirty
    assert retains_tombstones(old, 5, T0, 3 * DAY)  # not old enough


def test_tombstone_due_is_the_earliest_group_keeping_one() -> None:
    first = Seg([batch(0, (b"a", None))], last_modified_ms=T0 + 10)
    second = Seg([batch(1, (b"b", None))], last_modified_ms=T0 + 20)
    segs = [first, second]
    result, _ = clean_segments(segs, segment_bytes=len(first.data))  # one group each
    assert len(result.groups) == 2
    assert result.tombstone_due_ms == T0 + 10 + DAY


# ---------------------------------------------------------------------- compression


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.SNAPPY,
                                   CompressionType.LZ4, CompressionType.ZSTD])
def test_compressed_batches_are_rebuilt_with_their_codec(codec: CompressionType) -> None:
    original = batch(0, (b"a", b"1" * 50), (b"b", b"2" * 50), (b"a", b"3" * 50),
                     (b"c", None), compression=codec, producer_id=9, producer_epoch=1,
                     base_sequence=0)
    _, out = clean_segments([Seg([original, batch(4, (b"b", b"9"))])])
    (header, recs), (_, later) = decoded(out[0])
    assert header.compression is codec
    assert (header.base_offset, header.last_offset, header.records_count) == (0, 3, 2)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 1, 0)
    assert [(r.offset, r.key, r.value) for r in recs] == [(2, b"a", b"3" * 50), (3, b"c", None)]
    assert [r.offset for r in later] == [4]


def test_a_batch_whose_records_cannot_be_read_is_reported_corrupt() -> None:
    bogus = encode_batch(b"not gzip at all", base_offset=0, last_offset_delta=1,
                         records_count=2, attributes=int(CompressionType.GZIP),
                         base_timestamp=T0, max_timestamp=T0, partition_leader_epoch=0,
                         producer_id=-1, producer_epoch=-1, base_sequence=-1)
    truncated = bytearray(batch(2, (b"a", b"1"), (b"b", b"2")))
    truncated[HEADER_SIZE] = 0x7E  # the first record claims 63 bytes
    truncated = bytearray(encode_batch(bytes(truncated[HEADER_SIZE:]), base_offset=2,
                                       last_offset_delta=1, records_count=2, attributes=0,
                                       base_timestamp=T0, max_timestamp=T0,
                                       partition_leader_epoch=0, producer_id=-1,
                                       producer_epoch=-1, base_sequence=-1))
    for bad in (bogus, bytes(truncated)):
        seg = Seg([bad])
        with pytest.raises(CorruptMessageError):
            Cleaning(make_job(refs([seg]))).map(seg.data)  # dirty: mapping reads it
        cleaning = Cleaning(make_job(refs([seg]), first_dirty_offset=4,
                                     first_uncleanable_offset=4))
        with pytest.raises(CorruptMessageError):
            cleaning.clean(refs([seg])[0], seg.data)  # clean section: filtering reads it


# ---------------------------------------------------------------------- producers


def test_an_idempotent_producers_last_batch_is_kept_empty() -> None:
    first = batch(0, (b"a", b"1"), (b"b", b"1"), producer_id=7, producer_epoch=3,
                  base_sequence=0, partition_leader_epoch=2, compression=CompressionType.GZIP)
    second = batch(2, (b"a", b"2"), (b"b", b"2"), producer_id=8, producer_epoch=0,
                   base_sequence=0)
    last_of_8 = batch(4, (b"c", b"1"), producer_id=8, producer_epoch=0, base_sequence=2)
    later = batch(5, (b"a", b"3"), (b"b", b"3"), (b"c", b"2"))
    _, out = clean_segments([Seg([first, second, last_of_8, later])],
                            producer_last_offsets={7: 1, 8: 4})
    kept = decoded(out[0])
    header, recs = kept[0]
    assert recs == []
    assert header.records_count == 0 and header.size == HEADER_SIZE
    assert (header.base_offset, header.last_offset) == (0, 1)
    assert (header.producer_id, header.producer_epoch, header.base_sequence,
            header.partition_leader_epoch) == (7, 3, 0, 2)
    assert header.compression is CompressionType.NONE  # Kafka's writeEmptyHeader
    assert header.max_timestamp == parse_header(first).max_timestamp
    assert [h.base_offset for h, _ in kept] == [0, 4, 5]  # producer 8's older batch went
    assert kept[1][0].records_count == 0


def test_an_empty_batch_stays_while_it_is_the_producers_last() -> None:
    empty = encode_batch(b"", base_offset=0, last_offset_delta=1, records_count=0,
                         attributes=0, base_timestamp=T0, max_timestamp=T0,
                         partition_leader_epoch=0, producer_id=4, producer_epoch=0,
                         base_sequence=0)
    rest = batch(2, (b"a", b"1"))
    _, out = clean_segments([Seg([empty, rest])], producer_last_offsets={4: 1})
    assert out[0] == empty + rest
    _, out = clean_segments([Seg([empty, rest])], producer_last_offsets={4: 9})
    assert out[0] == rest


# ---------------------------------------------------------------------- grouping


def test_grouping_by_size() -> None:
    segs = [SegmentRef(i * 10, str(i), size, i * 10 + 10, T0)
            for i, size in enumerate([40, 50, 20, 100, 10, 10])]
    groups = group_segments_by_size(segs, 100)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10], [20], [30], [40, 50]]
    assert [[s.base_offset for s in g] for g in group_segments_by_size(segs, 20)] == \
        [[0], [10], [20], [30], [40, 50]]


def test_a_group_spans_at_most_32_bit_relative_offsets() -> None:
    segs = [SegmentRef(0, "0", 1, 2**31, T0), SegmentRef(2**31, "1", 1, 2**31 + 5, T0)]
    assert len(group_segments_by_size(segs, 1 << 30)) == 2
    segs = [SegmentRef(0, "0", 1, 2**31 - 1, T0), SegmentRef(2**31 - 1, "1", 1, 2**31, T0)]
    assert len(group_segments_by_size(segs, 1 << 30)) == 1


def test_groups_become_cleaned_segments_named_by_their_first_base() -> None:
    segs = [Seg([batch(0, (b"a", b"1"), (b"b", b"1"))], last_modified_ms=T0 + 1),
            Seg([batch(2, (b"a", b"2"))], last_modified_ms=T0 + 2),
            Seg([batch(3, (b"b", b"2"))], last_modified_ms=T0 + 3)]
    size = len(segs[0].data) + len(segs[1].data)
    result, out = clean_segments(segs, segment_bytes=size)
    assert [(g.base_offset, g.replaced, g.size) for g in result.groups] == \
        [(0, (0, 2), len(out[0])), (3, (3,), len(out[3]))]
    assert records_of(out[0]) == [(2, b"a", b"2")]
    assert records_of(out[3]) == [(3, b"b", b"2")]


# ---------------------------------------------------------------------- the offset map


def test_offset_map_updates_keys_when_full_but_takes_no_new_one() -> None:
    offset_map = OffsetMap(2)
    assert offset_map.put(b"a", 0) and offset_map.put(b"b", 1)
    assert offset_map.put(b"a", 2)
    assert not offset_map.put(b"c", 3)
    assert (offset_map.get(b"a"), offset_map.get(b"c"), offset_map.latest_offset) == (2, -1, 2)
    assert offset_map.utilization == 1.0


def test_a_full_map_ends_the_cleaning_after_the_last_mapped_offset() -> None:
    first = Seg([batch(0, (b"a", b"1"), (b"b", b"1")), batch(2, (b"a", b"2"), (b"c", b"1"))])
    second = Seg([batch(4, (b"a", b"3"), (b"c", None))])
    third = Seg([batch(6, (b"d", b"1"))])
    result, out = clean_segments([first, second, third], max_map_entries=2)
    assert result.end_offset == 3  # c at 3 did not fit: a(2) was the last mapped
    assert [g.replaced for g in result.groups] == [(0,)]  # later segments wait
    assert records_of(out[0]) == [(1, b"b", b"1"), (2, b"a", b"2"), (3, b"c", b"1")]
    assert result.stats.buffer_utilization == 1.0


def test_map_full_at_the_first_dirty_record_makes_no_progress() -> None:
    result, _ = clean_segments([Seg([batch(0, (b"a", b"1"))])], max_map_entries=0)
    assert result.end_offset == 0
    assert result.groups == ()


def test_records_below_the_first_dirty_offset_are_not_mapped() -> None:
    # offset 0 (a) lies in the clean part of the segment holding the first dirty offset
    seg = Seg([batch(0, (b"a", b"1"), (b"a", b"2"), (b"b", b"1"))],
              last_modified_ms=T0 - 5 * DAY)
    result, out = clean_segments([seg], first_dirty_offset=1)
    assert records_of(out[0]) == [(1, b"a", b"2"), (2, b"b", b"1")]
    assert result.stats.buffer_utilization == pytest.approx(2 / 1000)


# ---------------------------------------------------------------------- property


def _latest(log: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes, bytes]:
    latest: dict[bytes, bytes | None] = {}
    for _, key, value in log:
        if key is not None:
            latest[key] = value
    return {k: v for k, v in latest.items() if v is not None}


record_st = st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", b"e", None]),
                      st.one_of(st.none(), st.binary(min_size=0, max_size=4)))
batch_st = st.tuples(st.lists(record_st, min_size=1, max_size=5),
                     st.sampled_from([CompressionType.NONE, CompressionType.NONE,
                                      CompressionType.GZIP, CompressionType.LZ4]))
log_st = st.lists(st.lists(batch_st, min_size=1, max_size=3), min_size=1, max_size=5)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=log_st, split=st.integers(0, 5), capacity=st.integers(1, 6),
       segment_bytes=st.integers(100, 2000), retention=st.integers(0, 10),
       ages=st.lists(st.integers(0, 10), min_size=5, max_size=5))
def test_cleaning_keeps_the_latest_value_of_every_key(
        log: list[list[tuple[list[tuple[bytes | None, bytes | None]], CompressionType]]],
        split: int, capacity: int, segment_bytes: int, retention: int,
        ages: list[int]) -> None:
    # Build the log's segments: offsets consecutive, timestamps rising, mtimes by `ages`.
    offset = 0
    segments: list[Seg] = []
    for i, batches in enumerate(log):
        built = []
        for records, codec in batches:
            built.append(batch(offset, *records, ts=T0 + offset, compression=codec))
            offset += len(records)
        segments.append(Seg(built, last_modified_ms=T0 + ages[i]))
    end = offset
    original = [r for seg in segments for r in records_of(seg.data)]
    by_offset = {r.offset: r for seg in segments for _, recs in decoded(seg.data) for r in recs}

    def check(current: list[tuple[SegmentRef, bytes]]) -> None:
        data = b"".join(d for _, d in current)
        last = -1
        for header, recs in decoded(data):
            assert header.base_offset > last
            for r in recs:
                assert r == by_offset[r.offset]  # offset, key, value, timestamp, headers
                assert r.offset > last
                last = r.offset
            last = header.last_offset
        assert _latest(records_of(data)) == _latest(original)

    # First cleaning: the first `split` segments (all dirty); then the whole log, whose
    # front is now the cleaned groups, with time moved on so old tombstones may go.
    current = [(ref, seg.data) for ref, seg in zip(refs(segments), segments, strict=True)]
    first_dirty = 0
    for upto, now in ((max(1, min(split, len(current))), T0 + 5), (None, T0 + 10)):
        todo = current[:upto] if upto is not None else current
        uncleanable = todo[-1][0].next_offset if upto is not None else end
        job = make_job(tuple(r for r, _ in todo), first_dirty_offset=first_dirty,
                       first_uncleanable_offset=uncleanable, now_ms=now,
                       delete_retention_ms=retention, max_map_entries=capacity,
                       segment_bytes=segment_bytes)
        result, out = run(job, {r.base_offset: d for r, d in todo})
        assert first_dirty <= result.end_offset <= uncleanable
        replaced = {b for g in result.groups for b in g.replaced}
        by_base = {r.base_offset: r for r, _ in current}
        cleaned = [(SegmentRef(g.base_offset, str(g.base_offset), g.size,
                               by_base[g.replaced[-1]].next_offset,
                               by_base[g.replaced[-1]].last_modified_ms), out[g.base_offset])
                   for g in result.groups]
        current = cleaned + [(r, d) for r, d in current if r.base_offset not in replaced]
        current.sort(key=lambda rd: rd[0].base_offset)
        check(current)
        first_dirty = result.end_offset
