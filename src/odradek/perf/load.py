"""Load from several confluent-kafka client processes at once, so that no single Python client
loop sets the pace, with the broker's CPU over the phase (bench/broker_bound.py,
bench/vs_kafka.py).

Producers send 100-byte records as fast as they go for a number of seconds, or paced at a
given rate (records a second each); consumers read a
topic from its start, either for a number of seconds (every consumer every partition) or to
its end (the partitions shared out among them).  Requests are counted by the clients
themselves (librdkafka's statistics: requests sent per broker and type, and a producer's
retried requests), CPU from /proc
(perf/sysstat.py)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from odradek.perf.common import count_records
from odradek.perf.sysstat import UsageWindow

__all__ = ["RECORD_SIZE", "run_clients"]

RECORD_SIZE = 100


def _requests(stats: dict[str, Any], kind: str) -> int:
    """Requests of ``kind`` (Produce, Fetch) this client sent to every broker (librdkafka stats)."""
    return sum(b.get("req", {}).get(kind, 0) for b in stats.get("brokers", {}).values() if b.get("nodeid", -1) >= 0)


def _producer(bootstrap: str, topic: str, settings: Mapping[str, object], seconds: float,
              out: mp.Queue, rate: float | None = None) -> None:  # type: ignore[type-arg]
    import confluent_kafka as ck

    last: dict[str, Any] = {}
    p = ck.Producer({"bootstrap.servers": bootstrap, "compression.type": "none", "log_level": 0,
                     "statistics.interval.ms": 500, "stats_cb": lambda s: last.update(json.loads(s)), **settings})
    value = b"x" * RECORD_SIZE
    delivered = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1

    started = time.monotonic()
    end = started + seconds
    produce, poll = p.produce, p.poll
    sent = 0
    while (now := time.monotonic()) < end:
        if rate is not None and sent >= (now - started) * rate:
            time.sleep(0.001)  # paced: ahead of the rate, so the records owed come in bursts of a millisecond's
            poll(0)
            continue
        try:
            produce(topic, value, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            poll(0.001)
        poll(0)
    p.flush(60)
    ended = time.monotonic()
    time.sleep(0.6)  # one more statistics report, after the last request
    p.poll(0)
    retries = sum(b.get("txretries", 0) for b in last.get("brokers", {}).values() if b.get("nodeid", -1) >= 0)
    out.put({"records": delivered, "requests": _requests(last, "Produce"), "retries": retries, "started": started,
             "ended": ended})


def _consumer(bootstrap: str, topic: str, settings: Mapping[str, object], seconds: float,
              partitions: Sequence[int] | None, out: mp.Queue) -> None:  # type: ignore[type-arg]
    """Read ``partitions`` of ``topic`` from the start: to their end (or ``seconds`` at most)
    when given, else every partition for ``seconds``."""
    import confluent_kafka as ck

    last: dict[str, Any] = {}
    to_end = partitions is not None
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"load-{os.getpid()}", "enable.auto.commit": False,
                     "log_level": 0, "statistics.interval.ms": 500, "stats_cb": lambda s: last.update(json.loads(s)),
                     "auto.offset.reset": "earliest", "enable.partition.eof": to_end, **settings})
    if partitions is None:
        partitions = list(c.list_topics(topic, timeout=30).topics[topic].partitions)
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in partitions])
    count = 0
    at_end: set[int] = set()
    started = time.monotonic()
    end = started + seconds
    while time.monotonic() < end and not (to_end and len(at_end) == len(partitions)):
        count += count_records(c.consume(1000, 0.1), at_end)
    ended = time.monotonic()
    time.sleep(0.6)
    c.poll(0)
    out.put({"records": count, "requests": _requests(last, "Fetch"), "started": started, "ended": ended,
             "at_end": len(at_end) == len(partitions)})
    c.close()


def run_clients(bootstrap: str, groups: Mapping[str, Sequence[int]], topic: str, clients: int, seconds: float,
                producer: Mapping[str, object] | None = None, consumer: Mapping[str, object] | None = None,
                partitions: int | None = None, rate: float | None = None) -> dict[str, Any]:
    """``clients`` processes against one broker or cluster: producers with ``producer``
    settings (as fast as they go, or ``rate`` records a second in all, shared out among
    them), or else consumers with ``consumer`` settings (for ``seconds``, or to the end of
    the topic's ``partitions`` when given, shared out among them); the CPU of the brokers
    (``groups["brokers"]``) and of everything else over the phase.

    ``records_per_s`` is over the whole phase (process start-up included, as the CPU is);
    ``active_s`` is the time from the first client's start of work to the last one's end (a
    producer's includes its final flush), and ``*_per_active_s`` are over that."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    if producer is not None:
        each = rate / clients if rate is not None else None
        procs = [ctx.Process(target=_producer, args=(bootstrap, topic, producer, seconds, out, each))
                 for _ in range(clients)]
    else:
        shares = [list(range(partitions))[i::clients] for i in range(clients)] if partitions else [None] * clients
        procs = [ctx.Process(target=_consumer, args=(bootstrap, topic, consumer or {}, seconds, share, out))
                 for share in shares if share != []]
    window = UsageWindow(groups)
    for proc in procs:
        proc.start()
    try:
        results = [out.get(timeout=seconds + 120) for _ in procs]
    except BaseException:
        # Stopped (SIGTERM through unwind_on_sigterm, Ctrl-C) or a client that never reported:
        # the others would run on, and Python's exit waits for them (a producer's last flush
        # to a broker already stopped waits a minute).
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.join(10)
        raise
    usage = window.stop()
    for proc in procs:
        proc.join(30)
    records = sum(r["records"] for r in results)
    requests = sum(r["requests"] for r in results)
    retries = sum(r.get("retries", 0) for r in results)
    elapsed, cpu = usage.seconds, usage.cpu_s["brokers"]
    active = max(r["ended"] for r in results) - min(r["started"] for r in results)
    return {"records": records, "requests": requests, "retries": retries, "seconds": elapsed, "active_s": active, "broker_cpu_s": cpu,
            "records_per_s": records / elapsed, "requests_per_s": requests / elapsed,
            "records_per_active_s": records / active if active else 0.0,
            "requests_per_active_s": requests / active if active else 0.0,
            "requests_per_cpu_s": requests / cpu if cpu else 0.0, "cpu_us_per_request": cpu * 1e6 / requests
            if requests else 0.0, "records_per_cpu_s": records / cpu if cpu else 0.0,
            "read_to_end": all(r.get("at_end", True) for r in results), "usage": usage.as_dict()}
