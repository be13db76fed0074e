"""Producer performance test, after Kafka's ProducerPerformance (kafka-producer-perf-test.sh).

Sends ``num_records`` records of ``record_size`` bytes (one payload built up front, random
upper-case letters as Kafka's tool uses) with confluent-kafka, as fast as the client goes or
at a target rate, and measures each record's latency: the time from ``produce()`` to its
delivery callback (librdkafka's ``Message.latency()``, microsecond clock, taken when the
callback's message is built during ``poll()``).
"""

from __future__ import annotations

import random
import string
import time
from array import array
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field

from odradek.perf.common import (
    ClientLogCapture,
    PerfError,
    Rates,
    error_text,
    import_confluent_kafka,
    no_cyclic_gc,
    percentile,
)

__all__ = ["ProducerPerfResult", "make_payload", "run_producer", "wait_for_topic"]

METADATA_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ProducerPerfResult(Rates):
    topic: str
    records: int  # acknowledged
    record_size: int
    errors: int
    elapsed_s: float
    avg_latency_ms: float
    max_latency_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    client_cpu_s: float
    first_error: str | None = None
    props: dict[str, str] = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        return self.records * self.record_size

    def summary_line(self) -> str:
        """Kafka's final line, with latencies to 0.01 ms instead of whole milliseconds."""
        return (f"{self.records} records sent, {self.records_per_sec:.1f} records/sec "
                f"({self.mb_per_sec:.2f} MB/sec), {self.avg_latency_ms:.2f} ms avg latency, "
                f"{self.max_latency_ms:.2f} ms max latency, {self.p50_ms:.2f} ms 50th, "
                f"{self.p95_ms:.2f} ms 95th, {self.p99_ms:.2f} ms 99th, {self.p999_ms:.2f} ms 99.9th.")

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"tool": "producer", **asdict(self)}
        out.update(bytes=self.bytes, records_per_sec=self.records_per_sec, mb_per_sec=self.mb_per_sec)
        return out


def make_payload(record_size: int, seed: int = 0) -> bytes:
    """Random upper-case letters, as Kafka's tool fills its payload."""
    rng = random.Random(seed)
    return "".join(rng.choices(string.ascii_uppercase, k=record_size)).encode()


def wait_for_topic(client: object, topic: str, timeout_s: float, logs: ClientLogCapture) -> list[int]:
    """Wait until ``topic`` has a leader for every partition; returns the partition ids.
    Raises PerfError when the cluster cannot be reached or the topic does not exist."""
    ck = import_confluent_kafka()
    deadline = time.monotonic() + timeout_s
    last = "no metadata"
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _serve_logs(client)
            raise PerfError(f"topic {topic!r} not ready within {timeout_s:.0f} s: {last}{logs.hint()}")
        try:
            md = client.list_topics(topic, timeout=remaining)  # type: ignore[attr-defined]
        except ck.KafkaException as e:
            _serve_logs(client)
            raise PerfError(f"cannot get metadata from the bootstrap servers: "
                            f"{error_text(e)}{logs.hint()}") from e
        tm = md.topics.get(topic)
        if tm is None or tm.error is not None:
            err = tm.error if tm is not None else None
            if err is not None and err.code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise PerfError(f"topic {topic!r} does not exist")
            last = err.str() if err is not None else "topic missing from metadata"
        elif tm.partitions and all(p.leader >= 0 for p in tm.partitions.values()):
            return sorted(tm.partitions)
        else:
            last = "partitions without a leader"
        time.sleep(0.1)


def _serve_logs(client: object) -> None:
    """Deliver queued client log lines to the capture (they arrive through poll)."""
    poll = getattr(client, "poll", None)
    if poll is not None:
        poll(0)


def _produce_when_room(produce: Callable[[str, bytes], None], poll: Callable[[float], int],
                       topic: str, payload: bytes) -> None:
    """Serve delivery callbacks until the client's local queue takes the record (only
    called after a BufferError, so the measured loop itself stays a single call)."""
    while True:
        poll(0.005)
        try:
            produce(topic, payload)
            return
        except BufferError:
            continue


def run_producer(bootstrap_servers: str, topic: str, num_records: int, record_size: int, *,
                 throughput: float = -1, props: Mapping[str, str] | None = None,
                 on_client_log: Callable[[str], None] | None = None) -> ProducerPerfResult:
    """Produce and measure; raises PerfError when the run cannot start. ``on_client_log``,
    if given, receives each of the client's log lines (debug included) as it arrives."""
    if num_records <= 0:
        raise PerfError("--num-records must be positive")
    if record_size <= 0:
        raise PerfError("--record-size must be positive")
    ck = import_confluent_kafka()
    logs = ClientLogCapture(on_client_log)
    latencies = array("d")
    record_latency = latencies.append
    errors = 0
    first_error: str | None = None

    def on_delivery(err: object, msg: object) -> None:
        nonlocal errors, first_error
        if err is None:
            record_latency(msg.latency())  # type: ignore[attr-defined]
        else:
            errors += 1
            if first_error is None:
                first_error = str(err)

    conf: dict[str, object] = {"bootstrap.servers": bootstrap_servers, **(props or {})}
    conf.update({"on_delivery": on_delivery, "logger": logs.logger("producer")})
    try:
        producer = ck.Producer(conf)
    except (ck.KafkaException, ValueError, TypeError) as e:
        raise PerfError(f"bad producer properties: {error_text(e)}") from e
    wait_for_topic(producer, topic, METADATA_TIMEOUT_S, logs)

    payload = make_payload(record_size)
    produce, poll = producer.produce, producer.poll
    with no_cyclic_gc():
        cpu0 = time.process_time()
        start = time.perf_counter()
        if throughput is None or throughput <= 0:
            for _ in range(num_records):
                try:
                    produce(topic, payload)
                except BufferError:  # local queue full
                    _produce_when_room(produce, poll, topic, payload)
                poll(0)
        else:
            interval = 1.0 / throughput
            check_every = max(1, int(throughput // 1000))  # look at the clock about every ms
            for i in range(num_records):
                if i % check_every == 0:
                    while (ahead := start + i * interval - time.perf_counter()) > 0:
                        poll(ahead)
                try:
                    produce(topic, payload)
                except BufferError:
                    _produce_when_room(produce, poll, topic, payload)
                poll(0)
        timeout_s = float(conf.get("message.timeout.ms", 300000)) / 1000 + 5  # type: ignore[arg-type]
        if producer.flush(timeout_s) > 0:
            raise PerfError(f"{len(producer)} records still undelivered after {timeout_s:.0f} s{logs.hint()}")
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu0

    ordered = sorted(latencies)
    ms = 1000.0
    return ProducerPerfResult(
        topic=topic, records=len(latencies), record_size=record_size, errors=errors,
        elapsed_s=elapsed,
        avg_latency_ms=(sum(latencies) / len(latencies) * ms) if latencies else 0.0,
        max_latency_ms=(ordered[-1] * ms) if ordered else 0.0,
        p50_ms=percentile(ordered, 0.5) * ms, p95_ms=percentile(ordered, 0.95) * ms,
        p99_ms=percentile(ordered, 0.99) * ms, p999_ms=percentile(ordered, 0.999) * ms,
        client_cpu_s=cpu, first_error=first_error,
        props={k: str(v) for k, v in (props or {}).items()},
    )
