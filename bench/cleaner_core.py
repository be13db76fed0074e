"""Micro-benchmark of the log cleaner's core: ``odradek.log.cleaner.cleaner.clean`` over a
synthetic compacted log on disk, in this process (no broker).

The log is what a producer with large batches makes: uncompressed batches of
``--batch-records`` records, 100-byte values, keys cycling over ``--keys`` distinct keys,
rolled into segments of ``--segment-mb``. The whole log is dirty (a first cleaning), and
the offset map may hold as many keys as Kafka's default 128 MiB dedupe buffer would.

    PYTHONPATH=src python bench/cleaner_core.py --mb 200
    PYTHONPATH=src python bench/cleaner_core.py --mb 200 --profile   # cProfile, top 15
    PYTHONPATH=src python bench/cleaner_core.py --mb 200 --shuffle --batch-records 130
    PYTHONPATH=src python bench/cleaner_core.py --mb 200 --compare 3   # compiled scanner ÷ Python

``--compare N`` cleans the same log N times with each record scanner, in turns: the compiled
one (odradek.log.cleaner.native, built by the set-up) and the Python one.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import statistics
import tempfile
import time
from pathlib import Path

from odradek.log.cleaner import record_scanner
from odradek.log.cleaner.cleaner import clean
from odradek.log.cleaner.job import CleanJob, SegmentRef
from odradek.log.segment import LOG_SUFFIX, filename_prefix
from odradek.perf.harness import unwind_on_sigterm
from odradek.protocol.records import encode_batch
from odradek.protocol.varint import encode_varlong

T0 = 1_700_000_000_000
DEDUPE_BUFFER_BYTES = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
MAP_ENTRY_BYTES = 24  # Kafka's SkimpyOffsetMap: a 16-byte MD5 and an 8-byte offset
LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor


def build_log(directory: Path, total_bytes: int, keys: int, value_bytes: int,
              batch_records: int, segment_bytes: int, shuffle: bool
              ) -> tuple[list[SegmentRef], int, int]:
    """Write the log; returns its segments, its end offset and its record count."""
    rng = random.Random(42)
    value = b"v" * value_bytes
    # Each record is: length, attributes 0, timestamp delta 0, offset delta, key, value, no headers
    tails = [encode_varlong(len(k)) + k + encode_varlong(value_bytes) + value + b"\x00"
             for k in (b"key-%08d" % i for i in range(keys))]
    deltas = [encode_varlong(i) for i in range(batch_records)]
    segments: list[SegmentRef] = []
    offset = 0
    written = 0
    key = 0
    out = None
    path = directory
    seg_base = seg_size = 0
    while written < total_bytes:
        if out is None or seg_size >= segment_bytes:
            if out is not None:
                out.close()
                segments.append(SegmentRef(seg_base, str(path), seg_size, offset, T0))
            seg_base, seg_size = offset, 0
            path = directory / f"{filename_prefix(offset)}{LOG_SUFFIX}"
            out = open(path, "wb")  # noqa: SIM115 (closed at each roll)
        parts = []
        for i in range(batch_records):
            rec = b"\x00\x00" + deltas[i] + tails[key]
            parts.append(encode_varlong(len(rec)))
            parts.append(rec)
            key = rng.randrange(keys) if shuffle else (key + 1) % keys
        batch = encode_batch(b"".join(parts), base_offset=offset,
                             last_offset_delta=batch_records - 1, records_count=batch_records,
                             attributes=0, base_timestamp=T0, max_timestamp=T0,
                             partition_leader_epoch=0, producer_id=-1, producer_epoch=-1,
                             base_sequence=-1)
        out.write(batch)
        seg_size += len(batch)
        written += len(batch)
        offset += batch_records
    assert out is not None
    out.close()
    segments.append(SegmentRef(seg_base, str(path), seg_size, offset, T0))
    for s in segments:
        os.utime(s.log_path, ns=(T0 * 1_000_000, T0 * 1_000_000))
    return segments, offset, offset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200, help="log size in MB (default 200)")
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--batch-records", type=int, default=1000)
    parser.add_argument("--segment-mb", type=int, default=100)
    parser.add_argument("--shuffle", action="store_true",
                        help="keys in random order rather than cycling: the latest records "
                             "spread over more batches, which are parsed and rebuilt")
    parser.add_argument("--profile", action="store_true", help="run under cProfile")
    parser.add_argument("--dir", help="where to build the log (default: a temporary directory)")
    parser.add_argument("--compare", type=int, default=0, metavar="N",
                        help="N rounds each of the compiled and the Python record scanner, in turns")
    args = parser.parse_args()
    compiled = record_scanner._NATIVE  # what --compare turns off and on again
    if args.compare and not record_scanner.uses_compiled_scanner():
        parser.error("the compiled record scanner is not built (sh scripts/bootstrap builds it)")

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        directory = Path(tmp)
        started = time.monotonic()
        segments, end, records = build_log(directory, args.mb * 1_000_000, args.keys,
                                           args.value_bytes, args.batch_records,
                                           args.segment_mb * 1_000_000, args.shuffle)
        size = sum(s.size for s in segments)
        print(f"built {size / 1e6:.0f} MB, {records:,} records, {len(segments)} segments "
              f"in {time.monotonic() - started:.1f} s")
        job = CleanJob(
            topic="bench", partition=0, directory=str(directory), segments=tuple(segments),
            first_dirty_offset=0, first_uncleanable_offset=end, now_ms=T0 + 1000,
            delete_retention_ms=86_400_000, segment_bytes=1024 * 1024 * 1024,
            max_index_bytes=10 * 1024 * 1024, index_interval_bytes=4096,
            max_map_entries=int(DEDUPE_BUFFER_BYTES / MAP_ENTRY_BYTES * LOAD_FACTOR),
            io_max_bytes_per_second=float("inf"))
        if not args.compare:
            print(f"record scanner: {'compiled' if record_scanner.uses_compiled_scanner() else 'Python'}")
            clean_once(job, size, records, args.profile)
            return
        before = set(directory.iterdir())
        rates: dict[str, list[float]] = {"compiled": [], "Python": []}
        for _ in range(args.compare):
            for name, scanner in (("compiled", compiled), ("Python", None)):
                record_scanner._NATIVE = scanner
                print(f"record scanner: {name}")
                rates[name].append(clean_once(job, size, records, False))
                for made in set(directory.iterdir()) - before:  # what the cleaning wrote
                    made.unlink()
        record_scanner._NATIVE = compiled
        medians = {name: statistics.median(values) for name, values in rates.items()}
        print(f"MB/s, median of {args.compare}: compiled {medians['compiled']:.1f}, Python {medians['Python']:.1f}; "
              f"compiled ÷ Python {medians['compiled'] / medians['Python']:.2f}")


def clean_once(job: CleanJob, size: int, records: int, profile: bool) -> float:
    """Clean the log once; returns MB/s."""
    profiler = cProfile.Profile() if profile else None
    started = time.monotonic()
    if profiler:
        profiler.enable()
    result = clean(job)
    if profiler:
        profiler.disable()
    seconds = time.monotonic() - started
    s = result.stats
    print(f"cleaned in {seconds:.2f} s (map {s.map_seconds:.2f} s, clean "
          f"{s.clean_seconds:.2f} s): {size / 1e6 / seconds:.1f} MB/s, "
          f"{records / seconds:,.0f} records/s")
    print(f"written {s.bytes_written / 1e6:.1f} MB, {s.messages_written:,} records in "
          f"{len(result.groups)} segment(s); map {s.buffer_utilization:.1%} full")
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    return size / 1e6 / seconds


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
