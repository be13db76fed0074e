"""A client process of the quota tests (tests/integration/test_client_quotas.py): ``produce``
records of ``--value-bytes`` to ``--topic`` as fast as the broker lets it (or, with ``--pace``,
at that many bytes per second), or ``consume`` the topic from the start as fast as it lets it,
for ``--seconds``; then print one JSON object:
when each record was acknowledged or received (system-wide monotonic seconds, comparable across
processes) with its value's bytes, and the longest throttle time librdkafka's statistics saw."""

from __future__ import annotations

import argparse
import json
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer


def _produce(args: argparse.Namespace, common: dict[str, Any], seen: list[tuple[float, int]]) -> None:
    def on_delivery(error: object, message: Any) -> None:
        if error is None:
            seen.append((time.monotonic(), len(message.value())))

    producer = Producer({**common, "acks": 1, "linger.ms": 5, "batch.size": 16384,
                         "queue.buffering.max.kbytes": 1024})
    value = b"v" * args.value_bytes
    started = time.monotonic()
    deadline = started + args.seconds
    sent = 0
    while (now := time.monotonic()) < deadline:
        if args.pace is not None and sent > (now - started) * args.pace:
            producer.poll(0.005)
            continue
        try:
            producer.produce(args.topic, value, on_delivery=on_delivery)
        except BufferError:  # librdkafka's queue is full: the broker is holding us back
            producer.poll(0.005)
            continue
        sent += len(value)
        producer.poll(0)
    producer.flush(60)
    producer.poll(1)  # the last statistics


def _consume(args: argparse.Namespace, common: dict[str, Any], seen: list[tuple[float, int]]) -> None:
    consumer = Consumer({**common, "group.id": f"quota-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([args.topic])
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        for message in consumer.consume(1000, timeout=0.1):
            if message.error() is None:
                seen.append((time.monotonic(), len(message.value())))
    consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("produce", "consume"))
    for flag in ("--bootstrap-servers", "--topic", "--client-id"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--pace", type=float, default=None, help="bytes per second to produce at")
    parser.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args()
    seen: list[tuple[float, int]] = []
    throttle_max_ms = 0

    def on_stats(text: str) -> None:
        nonlocal throttle_max_ms
        for broker in json.loads(text).get("brokers", {}).values():
            throttle_max_ms = max(throttle_max_ms, broker.get("throttle", {}).get("max", 0))

    common = {"bootstrap.servers": args.bootstrap_servers, "client.id": args.client_id,
              "statistics.interval.ms": 500, "stats_cb": on_stats}
    (_produce if args.mode == "produce" else _consume)(args, common, seen)
    print(json.dumps({"seen": seen, "throttle_max_ms": throttle_max_ms}))


if __name__ == "__main__":
    main()
