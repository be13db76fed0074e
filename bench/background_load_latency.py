"""What a background process costs the broker's clients on this machine, whatever it is.

One broker; a producer in its own process sends 1,000 records/s (acks=1, linger.ms=0) for
--seconds per phase, and every delivery latency is kept. Each phase runs one kind of
background process at nice 10 (the log cleaner's priority) that touches no broker and no
broker file:

    none        nothing
    loop        a pure-Python busy loop
    alloc       allocating and freeing 4 MiB buffers
    pread       reading a 400 MiB file (from the page cache) in 4 MiB preads, as the cleaner reads segments
    preadinto   the same into one reused buffer
    mmap        the same through a memory map

The phases run one after another in one invocation, so their p50/p99 compare side by side.
bench/log_compaction.py measures the cleaner itself against idle and the busy loop.

    .venv/bin/python bench/background_load_latency.py [--seconds 8] [MODE ...]
"""

from __future__ import annotations

import argparse
import mmap
import multiprocessing as mp
import os
import shutil
import tempfile
import time
from pathlib import Path

from odradek.local.cluster import LocalCluster
from odradek.perf.compaction import latencies, latency_stats
from odradek.perf.harness import create_topic_zk, unwind_on_sigterm

LATENCY_TOPIC = "latency"
MODES = ("none", "loop", "alloc", "pread", "preadinto", "mmap")
CHUNK = 4 << 20


def background(stop: mp.Event, mode: str, path: str) -> None:  # type: ignore[valid-type]
    os.nice(10)
    if mode == "loop":
        x = 0
        while not stop.is_set():
            for i in range(100_000):
                x += i
        return
    if mode == "alloc":
        while not stop.is_set():
            for _ in range(100):
                bytes(CHUNK)
        return
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    buf = bytearray(CHUNK)
    view = mmap.mmap(fd, size, prot=mmap.PROT_READ) if mode == "mmap" else None
    while not stop.is_set():
        for off in range(0, size, CHUNK):
            if mode == "pread":
                os.pread(fd, CHUNK, off)
            elif mode == "preadinto":
                os.preadv(fd, [buf], off)
            else:
                assert view is not None
                view[off:off + CHUNK]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("modes", nargs="*", metavar="MODE", help=f"any of {', '.join(MODES)} (default: all)")
    args = ap.parse_args()
    bad = [m for m in args.modes if m not in MODES]
    if bad:
        ap.error(f"unknown mode {bad[0]!r}; choose from {', '.join(MODES)}")
    modes = args.modes or list(MODES)
    work = Path(tempfile.mkdtemp(prefix="odradek-bench-background-"))
    data = work / "background.bin"
    with data.open("wb") as f:
        f.write(os.urandom(1 << 20) * 400)
    cluster = LocalCluster(work / "cluster", 1, overrides={"offsets.topic.replication.factor": "1"})
    ctx = mp.get_context("spawn")
    try:
        cluster.start()
        create_topic_zk(cluster.zookeeper_connect, LATENCY_TOPIC, 1, 1)
        for mode in modes:
            out, stop, bg_stop = ctx.Queue(), ctx.Event(), ctx.Event()
            bg = None
            if mode != "none":
                bg = ctx.Process(target=background, args=(bg_stop, mode, str(data)))
                bg.start()
                time.sleep(1)
            producer = ctx.Process(target=latencies, args=(cluster.bootstrap_servers, LATENCY_TOPIC, 1000.0, args.seconds, stop, out))
            producer.start()
            result = out.get(timeout=args.seconds + 120)
            producer.join()
            bg_stop.set()
            if bg is not None:
                bg.join()
            s = latency_stats(result["samples"])
            print(f"{mode:10s} p50 {s['p50_ms']:.2f} ms  p99 {s['p99_ms']:.2f} ms  max {s['max_ms']:.1f} ms", flush=True)
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
