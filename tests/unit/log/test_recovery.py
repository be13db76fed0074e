"""Recovery: clean reopen, torn tails, CRC corruption, missing indexes, and a process
SIGKILLed in the middle of appending."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from log_helpers import T0, all_offsets, batch, config

from odradek.log.log import Log
from odradek.protocol.records import iter_batches

OpenLog = Callable[..., Log]


def populate(lg: Log, count: int = 40) -> None:
    for i in range(count):
        lg.append_as_leader(batch(1 + i % 3, size=40, ts=T0 + i), leader_epoch=i // 10)


def test_clean_reopen_serves_the_same_bytes(open_log: OpenLog) -> None:
    cfg = config(segment_bytes=1000)
    lg = open_log(cfg)
    populate(lg)
    expected = [lg.read(o, 1 << 20).read_bytes() for o in (0, 17, 55)]
    end, epochs = lg.log_end_offset, lg.leader_epoch_cache.entries
    lg.flush()
    lg.close()
    again = open_log(cfg, recovery_point=end)
    assert again.log_end_offset == end
    assert again.leader_epoch_cache.entries == epochs
    assert [again.read(o, 1 << 20).read_bytes() for o in (0, 17, 55)] == expected
    assert again.append_as_leader(batch(1), leader_epoch=9).first_offset == end


def test_torn_tail_is_truncated_to_the_last_complete_batch(open_log: OpenLog) -> None:
    cfg = config(segment_bytes=1000)
    lg = open_log(cfg)
    populate(lg)
    active = lg.active_segment
    data = active.read_bytes(0, active.size)
    batches = list(iter_batches(data))
    last_pos, last = batches[-1]
    lg.close()
    with open(active.log_path, "r+b") as f:
        f.truncate(last_pos + last.size - 7)  # the last batch was half written
    again = open_log(cfg, had_clean_shutdown=False, recovery_point=0)
    assert again.log_end_offset == last.base_offset
    assert all_offsets(again) == list(range(last.base_offset))
    assert again.recovery_point == last.base_offset
    assert again.append_as_leader(batch(1), leader_epoch=5).first_offset == last.base_offset


def test_corrupt_byte_truncates_there_and_drops_later_segments(open_log: OpenLog) -> None:
    cfg = config(segment_bytes=1000)
    lg = open_log(cfg)
    populate(lg, 60)
    victim = lg.segments[2]
    positions = list(iter_batches(victim.read_bytes(0, victim.size)))
    pos, header = positions[3]
    later = [s.log_path for s in lg.segments[3:]]
    lg.close()
    with open(victim.log_path, "r+b") as f:
        f.seek(pos + header.size - 1)
        value = f.read(1)[0]
        f.seek(pos + header.size - 1)
        f.write(bytes([value ^ 0x55]))
    again = open_log(cfg, had_clean_shutdown=False, recovery_point=0)
    assert again.log_end_offset == header.base_offset
    assert all_offsets(again) == list(range(header.base_offset))
    assert not any(p.exists() for p in later)
    assert again.latest_epoch is not None
    assert all(e.start_offset < header.base_offset for e in again.leader_epoch_cache.entries)


def test_recovery_starts_at_the_recovery_point(open_log: OpenLog) -> None:
    cfg = config(segment_bytes=1000)
    lg = open_log(cfg)
    populate(lg, 60)
    first = lg.segments[0]
    lg.close()
    with open(first.log_path, "r+b") as f:  # corrupt data below the recovery point
        f.seek(100)
        f.write(b"\xff" * 4)
    # segments at or past the recovery point are checked; the first is trusted as flushed
    again = open_log(cfg, had_clean_shutdown=False, recovery_point=lg.segments[2].base_offset)
    assert again.log_end_offset == lg.log_end_offset


def test_missing_or_corrupt_index_is_rebuilt_on_clean_start(open_log: OpenLog) -> None:
    cfg = config(segment_bytes=1000, index_interval_bytes=50)
    lg = open_log(cfg)
    populate(lg)
    expected = all_offsets(lg, max_bytes=100)
    lg.close()
    os.unlink(lg.segments[0].index.path)
    lg.segments[1].index.path.write_bytes(b"\x00\x00\x00\x05\x7f\x00\x00\x00")  # past the log
    again = open_log(cfg, recovery_point=lg.log_end_offset)
    assert all_offsets(again, max_bytes=100) == expected
    assert len(again.segments[0].index) > 0



def test_an_index_entry_before_the_file_start_is_rebuilt_on_clean_start(open_log: OpenLog) -> None:
    """A negative position passed Kafka's check: reads then failed with EINVAL and took the
    log directory offline (fuzz/log_recovery.py found it)."""
    cfg = config(segment_bytes=1000, index_interval_bytes=50)
    lg = open_log(cfg)
    populate(lg)
    expected = all_offsets(lg, max_bytes=100)
    lg.close()
    lg.segments[0].index.path.write_bytes(b"\x00\x00\x00\x05\xff\xff\xff\x00")  # position -256
    again = open_log(cfg, recovery_point=lg.log_end_offset)
    assert all_offsets(again, max_bytes=100) == expected


def test_time_index_entry_past_the_log_end_is_rebuilt_on_clean_start(open_log: OpenLog) -> None:
    """Else the next time entry (an append's, or the one written at close) raised ValueError,
    and the broker's shutdown with it (fuzz/log_recovery.py found it)."""
    cfg = config(segment_bytes=100_000)
    lg = open_log(cfg)
    populate(lg, count=5)
    end = lg.log_end_offset
    lg.close()
    path = lg.segments[0].time_index.path
    path.write_bytes(path.read_bytes()[:-4] + (1000).to_bytes(4, "big"))  # relative offset 1000
    again = open_log(cfg, recovery_point=end)
    assert again.segments[0].time_index.last_entry().offset < end
    again.append_as_leader(batch(1, ts=T0 + 100), leader_epoch=1)
    again.close()


def test_an_index_of_the_wrong_size_is_rebuilt_on_clean_start(open_log: OpenLog) -> None:
    """Kafka's check: an index that is not whole entries lies about the rest too. (Before,
    the torn entry was dropped when the index was first read and the rest trusted.)"""
    cfg = config(segment_bytes=1000, index_interval_bytes=50)
    lg = open_log(cfg)
    populate(lg)
    expected = all_offsets(lg, max_bytes=100)
    lg.close()
    index, time_index = lg.segments[0].index.path, lg.segments[1].time_index.path
    index.write_bytes(index.read_bytes()[:-3])
    time_index.write_bytes(time_index.read_bytes() + b"\x01\x02\x03\x04\x05")
    again = open_log(cfg, recovery_point=lg.log_end_offset)
    assert index.stat().st_size % 8 == 0 and time_index.stat().st_size % 12 == 0
    assert len(again.segments[0].index) == index.stat().st_size // 8 > 0
    assert all_offsets(again, max_bytes=100) == expected


def test_zeroed_indexes_are_rebuilt_on_clean_start(open_log: OpenLog) -> None:
    """A zeroed index (a preallocated one after power loss, or a disk that lies) passes
    Kafka's check. Its offset index only slowed lookups down, but its time index dated the
    segment to 1970: ListOffsets by timestamp passed over it and retention would delete it.
    The last two entries must increase, and the last timestamp is not below the first batch's."""
    cfg = config(segment_bytes=1000, index_interval_bytes=50)
    lg = open_log(cfg)
    populate(lg)
    lg.close()
    first, second, third = lg.segments[:3]
    first.time_index.path.write_bytes(bytes(12 * 16))
    second.time_index.path.write_bytes(bytes(12))  # one entry: the first batch check
    third.index.path.write_bytes(bytes(8 * 16))
    again = open_log(cfg, recovery_point=lg.log_end_offset)
    assert [again.offset_for_timestamp(s.first_batch_timestamp).offset for s in (first, second)] == [
        first.base_offset, second.base_offset]
    assert min(s.largest_timestamp for s in again.segments) >= T0
    entries = again.segments[2].index
    assert list(entries.keys) == sorted(set(entries.keys)) and entries.last_entry().position > 0


def test_sigkill_during_appends_recovers_to_complete_batches(tmp_path: Path) -> None:
    """A writer appending as fast as it can is SIGKILLed; the reopened log holds a
    contiguous run of intact batches, the acknowledged ones among them."""
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from odradek.config import LogConfig
        from odradek.log.log import Log
        from odradek.protocol.records import SimpleRecord, build_batch
        lg = Log.open(Path({str(tmp_path / "kill-0")!r}),
                      LogConfig(segment_bytes=64 * 1024, retention_ms=-1),
                      topic="kill", partition=0)
        payload = build_batch([SimpleRecord(b"x" * 100)] * 50)
        i = 0
        while True:
            info = lg.append_as_leader(payload, leader_epoch=0)
            i += 1
            if i % 50 == 0:
                sys.stdout.write(f"{{info.last_offset}}\\n")
                sys.stdout.flush()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    acked = -1
    deadline = time.monotonic() + 10
    while acked < 20_000 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        acked = int(line)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert acked >= 0, "the writer never got going"
    lg = Log.open(tmp_path / "kill-0", config(segment_bytes=64 * 1024), topic="kill",
                  partition=0, had_clean_shutdown=False)
    assert lg.log_end_offset > acked
    assert lg.log_end_offset % 50 == 0  # whole batches only
    offsets = all_offsets(lg)
    assert offsets == list(range(lg.log_end_offset))
