"""What a producer sees when a leader dies (bench/vs_kafka.py): an idempotent acks=all producer
sends at a steady rate round robin over a topic's partitions, one broker is SIGKILLed, and the
longest time between two acknowledgements in a row on a partition is its outage.  The broker's
loss is noticed when its ZooKeeper session expires, so the gap holds
``zookeeper.session.timeout.ms`` plus the controller's leader election plus the client's
discovery of the new leader."""

from __future__ import annotations

import time
from typing import Any

from odradek.local.checker import Ack, longest_ack_gaps
from odradek.local.cluster import LocalCluster
from odradek.perf.common import PerfError, import_confluent_kafka
from odradek.perf.controller_scale import leaders

__all__ = ["producer_gap"]


def producer_gap(cluster: LocalCluster, topic: str, partitions: int, victim: int, *, rate: float = 1000,
                 before_s: float = 3.0, after_s: float = 2.0, timeout_s: float = 120) -> dict[str, Any]:
    """Send ``rate`` records/s to ``topic``; after ``before_s``, SIGKILL broker ``victim``;
    go on until every partition has been acknowledged again since the kill, and ``after_s``
    more.  The longest gap between acknowledgements, on any partition and on those the victim
    led, and the longest a record waited for its acknowledgement (a gap is shorter than the
    outage when acknowledgements lag behind the sends: the ones from before the kill then
    still arrive during it)."""
    ck = import_confluent_kafka()
    led = {p for p, leader in leaders(cluster.zk_client(), topic, partitions).items() if leader == victim}
    acks: list[Ack] = []
    acked_since_kill: set[int] = set()
    sent_at: list[float] = []
    longest_wait = 0.0
    failed = 0
    killed_at: float | None = None

    def on_delivery(err: object, msg: Any) -> None:
        nonlocal failed, longest_wait
        if err is not None:
            failed += 1
            return
        now = time.monotonic()
        value = msg.value().decode()
        longest_wait = max(longest_wait, now - sent_at[int(value)])
        acks.append(Ack(value, msg.partition(), msg.offset(), now))
        if killed_at is not None and now > killed_at:
            acked_since_kill.add(msg.partition())

    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 0, "on_delivery": on_delivery, "log_level": 0})
    interval = 1.0 / rate
    start = time.monotonic()
    until: float | None = None
    sent = 0
    while until is None or time.monotonic() < until:
        now = time.monotonic()
        if now - start > timeout_s:
            raise PerfError(f"{topic}: partitions not acknowledged again {timeout_s:.0f} s after the kill")
        if killed_at is None and now - start >= before_s:
            cluster.kill_broker(victim)
            killed_at = time.monotonic()
        if until is None and len(acked_since_kill) == partitions:
            until = time.monotonic() + after_s
        ahead = start + sent * interval - now
        if ahead > 0.001:
            p.poll(ahead)
            continue
        try:
            p.produce(topic, str(sent).encode(), partition=sent % partitions)
            sent_at.append(time.monotonic())
            sent += 1
        except BufferError:
            pass
        p.poll(0)
    if p.flush(60):
        raise PerfError(f"{topic}: records left unsent")
    gaps = longest_ack_gaps(acks)
    return {"victim": victim, "led_partitions": len(led), "sent": sent, "acknowledged": len(acks), "failed": failed,
            "longest_gap_s": max(gaps.values(), default=0.0),
            "longest_gap_led_s": max((gaps.get(p, 0.0) for p in led), default=0.0), "longest_wait_s": longest_wait}
