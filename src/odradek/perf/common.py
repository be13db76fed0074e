"""What the producer and consumer perf tools share: property parsing, client log capture,
unit conventions and the error type the CLI turns into one line."""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

__all__ = [
    "MB",
    "ClientLogCapture",
    "PerfError",
    "Rates",
    "count_records",
    "error_text",
    "import_confluent_kafka",
    "no_cyclic_gc",
    "parse_props",
    "percentile",
]

# Kafka's perf tools divide by 1024 * 1024 and call it MB; so do we, so figures compare.
MB = 1024.0 * 1024.0


class Rates:
    """records/s and MB/s of a perf run's result (``records``, ``bytes``, ``elapsed_s``)."""

    __slots__ = ()
    records: int
    bytes: int
    elapsed_s: float

    @property
    def records_per_sec(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mb_per_sec(self) -> float:
        return self.bytes / MB / self.elapsed_s if self.elapsed_s > 0 else 0.0


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Keep Python's cycle collector out of a measured loop. The loops allocate a message
    object per record and free it by reference counting; the collector, triggered by the
    allocation count alone, found nothing to free and took a quarter of the consumer's CPU
    (perf, 2M records), so the tool measured itself more than the broker."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        gc.unfreeze()


class PerfError(Exception):
    """A perf run that cannot start or did not finish; the message is one line for the user."""


def import_confluent_kafka():  # type: ignore[no-untyped-def]
    """The confluent_kafka module, or a PerfError naming the extra that installs it."""
    try:
        import confluent_kafka
    except ImportError as e:  # pragma: no cover - depends on the install
        raise PerfError("the perf tools need confluent-kafka: pip install 'odradek[spark]'") from e
    return confluent_kafka


def count_records(messages: Iterable[Any], at_end: set[int]) -> int:
    """How many of ``messages`` (a consumer's ``consume()`` batch) are records; the partitions
    whose end one of them reports (``enable.partition.eof``) are added to ``at_end``, and
    other errors are skipped."""
    eof = import_confluent_kafka().KafkaError._PARTITION_EOF
    count = 0
    for m in messages:
        error = m.error()
        if error is None:
            count += 1
        elif error.code() == eof:
            at_end.add(m.partition())
    return count


def error_text(e: BaseException) -> str:
    """A client exception as its message alone (a KafkaException wraps a KafkaError)."""
    inner = e.args[0] if e.args else None
    return inner.str() if hasattr(inner, "str") else str(e)


def parse_props(items: Iterable[str]) -> dict[str, str]:
    """``["k=v", "a=b c=d"]`` -> ``{"k": "v", "a": "b", "c": "d"}`` (Kafka's
    ``--producer-props`` takes space-separated pairs; either form works here)."""
    props: dict[str, str] = {}
    for item in items:
        for pair in item.split():
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise PerfError(f"property {pair!r} is not of the form key=value")
            props[key.strip()] = value.strip()
    return props


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Kafka's ProducerPerformance percentile: the value at index ``int(n * fraction)``."""
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * fraction))]


class ClientLogCapture(logging.Handler):
    """Receives librdkafka's log lines (the ``logger`` client property).  They are kept,
    not printed, so a failure is reported as one line that quotes the last of them; with
    ``echo``, every line (down to debug) is also handed to it as it arrives."""

    def __init__(self, echo: Callable[[str], None] | None = None) -> None:
        super().__init__(logging.DEBUG)
        self.last: str | None = None
        self.echo = echo

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()
        if self.echo is not None:
            self.echo(self.last)

    def logger(self, name: str) -> logging.Logger:
        log = logging.getLogger(f"odradek.perf.client.{name}")
        log.handlers[:] = [self]
        log.propagate = False
        log.setLevel(logging.DEBUG if self.echo is not None else logging.WARNING)
        return log

    def hint(self) -> str:
        return f" (last client log: {self.last})" if self.last else ""
