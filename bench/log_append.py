"""Micro-benchmark of the storage engine's hot path (no network).

Appends N produce batches of ~16 KiB (100-byte records) as the leader would (header and
CRC-32C checks, offset rewrite, write), then reads them back the way a fetch does (index
lookup, whole-batch region, pread of the region). Prints MB/s and batches/s for both, plus
the same for idempotent batches (producer-state checks on every append).

    .venv/bin/python bench/log_append.py [--batches 20000] [--dir /tmp/x] [--fsync]
"""

from __future__ import annotations

import argparse
import shutil
import struct
import tempfile
import time
from pathlib import Path

import crc32c

from odradek.config import LogConfig
from odradek.log.log import Log
from odradek.perf.harness import unwind_on_sigterm
from odradek.protocol.records import SimpleRecord, build_batch

RECORD_SIZE = 100
BATCH_BYTES = 16 * 1024


def make_batch(producer_id: int = -1, sequence: int = -1) -> bytes:
    per_record = len(build_batch([SimpleRecord(b"x" * RECORD_SIZE)] * 2)) - len(
        build_batch([SimpleRecord(b"x" * RECORD_SIZE)]))
    count = (BATCH_BYTES - 61) // per_record
    return build_batch([SimpleRecord(b"x" * RECORD_SIZE)] * count, timestamp=int(time.time() * 1000),
                       producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                       base_sequence=sequence)


def run(directory: Path, batches: int, idempotent: bool, fsync: bool) -> None:
    cfg = LogConfig(retention_ms=-1, flush_messages=1 if fsync else 2**63 - 1)
    lg = Log.open(directory, cfg, topic="bench", partition=0)
    template = make_batch(1 if idempotent else -1, 0)
    records_per_batch = int.from_bytes(template[57:61], "big")
    size = len(template)
    append_s = append_cpu = 0.0
    for i in range(batches):
        payload = template
        if idempotent:  # consecutive sequences; patched outside the timed call
            patched = bytearray(template)
            struct.pack_into(">i", patched, 53, i * records_per_batch)
            struct.pack_into(">I", patched, 17, crc32c.crc32c(memoryview(patched)[21:]))
            payload = bytes(patched)
        start, cpu = time.perf_counter(), time.process_time()
        lg.append_as_leader(payload, leader_epoch=0)
        append_s += time.perf_counter() - start
        append_cpu += time.process_time() - cpu
    lg.update_high_watermark(lg.log_end_offset)

    start, cpu = time.perf_counter(), time.process_time()
    offset, total, reads = 0, 0, 0
    while offset < lg.log_end_offset:
        info = lg.read(offset, 1024 * 1024, max_offset=lg.high_watermark)  # a 1 MiB fetch
        data = info.read_bytes()
        total += len(data)
        reads += 1
        offset = int.from_bytes(data[-size:-size + 8], "big") + records_per_batch
    read_s, read_cpu = time.perf_counter() - start, time.process_time() - cpu
    mb = batches * size / 1e6
    kind = "idempotent" if idempotent else "plain"
    print(f"{kind:>10} append: {batches} batches x {size} B ({records_per_batch} records) "
          f"in {append_s:.3f} s = {mb / append_s:8.1f} MB/s, {batches / append_s:9.0f} batches/s, "
          f"{batches * records_per_batch / append_s / 1e6:.2f} M records/s, "
          f"CPU {append_cpu / batches * 1e6:.1f} us/batch")
    print(f"{kind:>10}   read: {reads} fetches of <= 1 MiB in {read_s:.3f} s = "
          f"{total / 1e6 / read_s:8.1f} MB/s, {batches / read_s:9.0f} batches/s, "
          f"CPU {read_cpu / reads * 1e6:.0f} us/fetch")
    assert total == batches * size
    lg.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20_000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--fsync", action="store_true", help="flush.messages=1 (fsync per append)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        run(root / "bench-0", args.batches, idempotent=False, fsync=args.fsync)
        run(root / "bench-1", args.batches, idempotent=True, fsync=args.fsync)
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
