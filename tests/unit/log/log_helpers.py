"""Helpers for the storage-engine tests: a settable clock, configs, batches, read-all."""

from __future__ import annotations

from dataclasses import replace

from odradek.config import LogConfig
from odradek.log.log import Log
from odradek.protocol.records import SimpleRecord, build_batch, iter_batches

T0 = 1_700_000_000_000


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def config(**overrides: object) -> LogConfig:
    """A LogConfig with test-friendly defaults (no time-based roll or retention)."""
    base = LogConfig(retention_ms=-1, segment_ms=2**62, file_delete_delay_ms=0)
    return replace(base, **overrides)


def batch(count: int = 1, *, size: int = 10, ts: int = T0, key: bytes | None = None,
          **kwargs: object) -> bytes:
    """An uncompressed produce batch of ``count`` records of ``size``-byte values."""
    return build_batch([SimpleRecord(b"v" * size, key)] * count, timestamp=ts, **kwargs)


def all_offsets(lg: Log, start: int | None = None, max_bytes: int = 1 << 20,
                max_offset: int | None = None) -> list[int]:
    """Every offset a reader sees from ``start`` (default: log start), read in chunks."""
    offset = lg.log_start_offset if start is None else start
    seen: list[int] = []
    while True:
        data = lg.read(offset, max_bytes, max_offset=max_offset).read_bytes()
        if not data:
            return seen
        for _, header in iter_batches(data):
            seen.extend(o for o in range(header.base_offset, header.next_offset) if o >= offset)
        offset = seen[-1] + 1
