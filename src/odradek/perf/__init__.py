"""Producer and consumer performance tools (Kafka's kafka-*-perf-test), used by ``odradek
perf`` and the side-by-side benchmarks under bench/."""

from odradek.perf.common import PerfError, parse_props
from odradek.perf.consumer import ConsumerPerfResult, run_consumer
from odradek.perf.producer import ProducerPerfResult, run_producer

__all__ = ["ConsumerPerfResult", "PerfError", "ProducerPerfResult", "parse_props", "run_consumer",
           "run_producer"]
