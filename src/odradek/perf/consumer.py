"""Consumer performance test, after Kafka's ConsumerPerformance (kafka-consumer-perf-test.sh).

Reads ``messages`` records from every partition of a topic with confluent-kafka, using
``assign()`` (no group membership, no commits) from the earliest offset (or the latest),
in batches through ``consume()``.  Throughput runs from the assignment to the last record
received; bytes are key plus value bytes, as Kafka's tool counts them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field

from odradek.perf.common import (
    MB,
    ClientLogCapture,
    PerfError,
    Rates,
    error_text,
    import_confluent_kafka,
    no_cyclic_gc,
)
from odradek.perf.producer import wait_for_topic

__all__ = ["ConsumerPerfResult", "run_consumer"]

BATCH = 10_000


@dataclass(frozen=True, slots=True)
class ConsumerPerfResult(Rates):
    topic: str
    records: int
    bytes: int
    elapsed_s: float
    first_record_s: float  # from assign() to the first record: connection and first fetch
    client_cpu_s: float
    errors: int = 0
    first_error: str | None = None
    props: dict[str, str] = field(default_factory=dict)

    def summary_line(self) -> str:
        return (f"{self.records} records consumed, {self.records_per_sec:.1f} records/sec "
                f"({self.mb_per_sec:.2f} MB/sec), {self.bytes / MB:.2f} MB in {self.elapsed_s:.2f} s, "
                f"{self.first_record_s * 1000:.0f} ms to first record.")

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"tool": "consumer", **asdict(self)}
        out.update(records_per_sec=self.records_per_sec, mb_per_sec=self.mb_per_sec)
        return out


def run_consumer(bootstrap_servers: str, topic: str, messages: int, *, fetch_size: int = 1024 * 1024,
                 props: Mapping[str, str] | None = None, timeout_s: float = 10.0,
                 from_latest: bool = False,
                 on_client_log: Callable[[str], None] | None = None) -> ConsumerPerfResult:
    """Consume ``messages`` records and measure; raises PerfError when the run cannot start
    or no record arrives for ``timeout_s`` before ``messages`` are read. ``on_client_log``,
    if given, receives each of the client's log lines (debug included) as it arrives."""
    if messages <= 0:
        raise PerfError("--messages must be positive")
    if fetch_size <= 0:
        raise PerfError("--fetch-size must be positive")
    ck = import_confluent_kafka()
    logs = ClientLogCapture(on_client_log)
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap_servers,
        # librdkafka insists on a group id; assign() without commits never joins the group
        "group.id": f"odradek-perf-consumer-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "max.partition.fetch.bytes": fetch_size,
        # librdkafka (2.x) stops fetching for fetch.queue.backoff.ms (default 1 s) whenever
        # its local queue holds queued.min.messages; a reader that drains as fast as this
        # one would spend most of its time in that pause, whatever the broker.
        "fetch.queue.backoff.ms": 1,
        **(props or {}),
    }
    conf["logger"] = logs.logger("consumer")
    try:
        consumer = ck.Consumer(conf)
    except (ck.KafkaException, ValueError, TypeError) as e:
        raise PerfError(f"bad consumer properties: {error_text(e)}") from e
    try:
        # As in Kafka's consumer perf test, the wait covers the first fetch's metadata too.
        partitions = wait_for_topic(consumer, topic, timeout_s, logs)
        start_offset = ck.OFFSET_END if from_latest else ck.OFFSET_BEGINNING
        with no_cyclic_gc():
            cpu0 = time.process_time()
            start = time.perf_counter()
            consumer.assign([ck.TopicPartition(topic, p, start_offset) for p in partitions])
            count = nbytes = errors = 0
            first_error: str | None = None
            first = last = start
            consume = consumer.consume
            while count < messages:
                batch = consume(num_messages=min(BATCH, messages - count), timeout=0.1)
                if not batch:
                    if time.perf_counter() - last > timeout_s:
                        raise PerfError(f"consumed {count} of {messages} records; none arrived for "
                                        f"{timeout_s:.0f} s{logs.hint()}")
                    continue
                for m in batch:
                    err = m.error()
                    if err is None:
                        count += 1
                        nbytes += len(m.value())
                        key = m.key()
                        if key:
                            nbytes += len(key)
                    else:  # librdkafka reports transient fetch trouble in-band and recovers
                        errors += 1
                        if first_error is None:
                            first_error = err.str()
                        if err.fatal():
                            raise PerfError(f"consumer failed: {err.str()}")
                if first == start and count:
                    first = time.perf_counter()
                last = time.perf_counter()
            cpu = time.process_time() - cpu0
    finally:
        consumer.close()
    return ConsumerPerfResult(topic=topic, records=count, bytes=nbytes, elapsed_s=last - start,
                              first_record_s=first - start, client_cpu_s=cpu, errors=errors,
                              first_error=first_error,
                              props={k: str(v) for k, v in (props or {}).items()})
