"""Model-based test: random appends, reads, truncations, retention and (clean or crash)
reopens against a list of the batches that should be in the log, byte for byte.

Catches off-by-ones in segment rolls, sparse index lookups, whole-batch read limits,
truncation across segments and recovery: every appended offset must be readable exactly
once, in order, with the bytes that were appended.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from log_helpers import T0, config

from odradek.log.log import Log
from odradek.protocol.records import SimpleRecord, build_batch, iter_batches
from support.examples import examples


def crash(lg: Log) -> None:
    """Drop a log as a killed process would: descriptors closed, buffered index entries
    never written (reaching into privates on purpose: nothing public loses data; indexes
    hold no descriptor between uses)."""
    for segment in lg.segments:
        for index in (segment.index, segment.time_index):
            index._pending.clear()
        os.close(segment.fd)
        segment.fd = -1


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp())
        self.batches: list[tuple[int, int, bytes]] = []  # (base offset, next offset, bytes)
        self.lg: Log | None = None
        self.epoch = 0

    @initialize(segment_bytes=st.integers(750, 3000), interval=st.integers(1, 600),
                index_entries=st.integers(2, 40))
    def open(self, segment_bytes: int, interval: int, index_entries: int) -> None:
        self.cfg = config(segment_bytes=segment_bytes, index_interval_bytes=interval,
                          segment_index_bytes=12 * index_entries, max_message_bytes=10**6)
        self.reopen(clean=True)

    def reopen(self, clean: bool) -> None:
        kwargs = {}
        if self.lg is not None:
            kwargs = {"log_start_offset": self.lg.log_start_offset,
                      "recovery_point": self.lg.recovery_point}
            if clean:
                self.lg.flush()
                self.lg.close()
            else:
                crash(self.lg)
        self.lg = Log.open(self.tmp / "model-0", self.cfg, topic="model", partition=0,
                           had_clean_shutdown=clean, time_ms=lambda: T0, **kwargs)

    def teardown(self) -> None:
        if self.lg is not None:
            self.lg.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def end(self) -> int:
        return self.batches[-1][1] if self.batches else self.lg.log_end_offset

    @rule(count=st.integers(1, 6), size=st.integers(0, 100), bump_epoch=st.booleans())
    def append(self, count: int, size: int, bump_epoch: bool) -> None:
        self.epoch += bump_epoch
        records = [SimpleRecord(bytes([i % 256]) * size) for i in range(count)]
        info = self.lg.append_as_leader(build_batch(records, timestamp=T0), self.epoch)
        assert info.first_offset == self.lg.log_end_offset - count
        if self.batches:
            assert info.first_offset == self.batches[-1][1]
        expected = build_batch(records, timestamp=T0, base_offset=info.first_offset,
                               partition_leader_epoch=self.epoch)
        self.batches.append((info.first_offset, info.last_offset + 1, expected))

    @precondition(lambda self: self.batches)
    @rule(data=st.data(), max_bytes=st.integers(1, 4000), min_one=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, min_one: bool) -> None:
        start = data.draw(st.integers(self.lg.log_start_offset, self.end))
        got = self.lg.read(start, max_bytes, min_one_message=min_one).read_bytes()
        wanted = [b for b in self.batches if b[1] > start]
        taken = b""
        for i, (_, _, raw) in enumerate(wanted):
            if len(taken) + len(raw) > max_bytes and not (i == 0 and min_one):
                break
            taken += raw
            if i == 0 and len(raw) > max_bytes:
                break  # min_one_message: only the first batch
        # a read stops early only at the end of a segment
        assert taken.startswith(got)
        if len(got) < len(taken):
            headers = [h for _, h in iter_batches(got)]
            next_offset = headers[-1].next_offset if headers else start
            assert any(seg.base_offset == next_offset for seg in self.lg.segments) or not headers
        if wanted and (len(wanted[0][2]) <= max_bytes or min_one):
            assert got, "the first batch fits but nothing was returned"

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.lg.log_start_offset, self.end))
        self.lg.truncate_to(target)
        self.batches = [b for b in self.batches if b[1] <= target]
        assert self.lg.log_end_offset == (self.batches[-1][1] if self.batches else
                                          self.lg.log_end_offset)

    @rule(clean=st.booleans())
    def restart(self, clean: bool) -> None:
        self.reopen(clean)

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def torn_write(self, data: st.DataObject) -> None:
        """Crash with the active segment cut at a random byte, as a lost page cache would
        leave it; recovery must keep exactly the batches that are still whole."""
        active = self.lg.active_segment
        cut = data.draw(st.integers(0, active.size))
        start, path = self.lg.log_start_offset, active.log_path
        crash(self.lg)
        os.truncate(path, cut)
        self.lg = Log.open(self.tmp / "model-0", self.cfg, topic="model", partition=0,
                           had_clean_shutdown=False, log_start_offset=start, recovery_point=0,
                           time_ms=lambda: T0)
        position, kept = 0, []
        for batch in self.batches:
            if batch[0] >= active.base_offset:
                position += len(batch[2])
                if position > cut:
                    break
            kept.append(batch)
        self.batches = kept

    @precondition(lambda self: self.batches)
    @rule(keep_bytes=st.integers(0, 5000))
    def retention(self, keep_bytes: int) -> None:
        self.lg.config = config(**{**{f: getattr(self.cfg, f) for f in (
            "segment_bytes", "index_interval_bytes", "segment_index_bytes",
            "max_message_bytes")}, "retention_bytes": keep_bytes})
        self.lg.update_high_watermark(self.lg.log_end_offset)
        self.lg.delete_old_segments()
        self.lg.config = self.cfg
        start = self.lg.log_start_offset
        self.batches = [b for b in self.batches if b[1] > start]

    @invariant()
    def everything_readable_exactly_once(self) -> None:
        if self.lg is None:
            return
        assert self.lg.log_end_offset == self.end
        offset, seen = self.lg.log_start_offset, b""
        while offset < self.lg.log_end_offset:
            chunk = self.lg.read(offset, 1500).read_bytes()
            assert chunk
            headers = [h for _, h in iter_batches(chunk)]
            offset = headers[-1].next_offset
            seen += chunk
        assert seen == b"".join(raw for _, _, raw in self.batches)


LogModel.TestCase.settings = settings(max_examples=int(os.environ.get("LOG_MODEL_EXAMPLES", examples(60))), stateful_step_count=30, deadline=None)
TestLogModel = LogModel.TestCase
