"""The request metrics' own CPU per request, in-process, with and without them, in one run.

bench/broker_bound.py --metrics --baseline HEAD measures the metrics' cost on a whole broker
under load, where round-to-round noise on this machine (±10-20 % per phase) hides a cost of a
few per cent. This runs only what metrics add to a request's passage, on the real code: a
KafkaChannel reads --per-read one-record Produce request frames at a time (librdkafka
pipelines about 280 of them into one read; a client that waits for each answer, one), with the
RequestMetrics observer: the channel's countdown, the error counts handed to the handler, the
one request in ``sample_every`` timed, the handler's part (apis/produce.py's check that a
one-partition answer, NONE, carries what the metrics take each answer to), the answers
released and reported written once
per read (the histograms' batched folding included), with the broker's garbage-collector
settings. The same loop without an observer is the baseline. The difference is the metrics'
CPU per request; divide it by a broker's CPU per one-record produce request (broker_bound.py's
"CPU us/req", 26-31 us here) for their share. A loaded broker pays several times this
(docs/DESIGN.md, metrics' cost).

    .venv/bin/python bench/metrics_cost.py [--requests 200000] [--rounds 5] [--per-read 1]
"""

from __future__ import annotations

import argparse
import gc
import struct
import time

from odradek.broker.delayed_produce import ProducePartitionResult
from odradek.broker.metrics.request_metrics import RequestMetrics
from odradek.net.kafka_channel import KafkaChannel
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

# A Produce v9 request as far as the channel reads it: the header (client id "bench", no tagged
# fields) and a body of a one-record request's size, which the channel does not parse.
_HEADER = struct.pack(">hhih", ApiKey.PRODUCE, 9, 1, 5) + b"bench" + b"\0"
FRAME = struct.pack(">i", len(_HEADER) + 160) + _HEADER + bytes(160)
WRITTEN = ProducePartitionResult(ErrorCode.none, base_offset=0)  # a one-record produce's one partition


def passage_ns(requests: int, per_read: int, observer: RequestMetrics | None) -> float:
    """Process CPU nanoseconds per request for ``requests`` requests through one channel,
    ``per_read`` frames to a read (a pipelining client's) and their answers written at once."""
    channel = KafkaChannel(observer=observer)
    results, refused, r = {("bench", 0): WRITTEN}, {}, WRITTEN  # what the handler has at hand
    frames = memoryview(FRAME * per_read)
    size = len(frames)
    started = time.process_time_ns()
    for _ in range(requests // per_read):
        channel.get_buffer()[:size] = frames
        channel.buffer_updated(size)
        while (request := channel.next_request()) is not None:
            counts = request.error_counts
            # The produce handler's part (apis/produce.py _encode): an answer as the metrics take it.
            if counts is not None and (refused or len(results) != 1 or r.error):
                raise AssertionError("a one-partition answer, NONE, is counted by the request")
            channel.respond(request, b"answer")
        channel.clear_output()
        if observer is not None:  # the connection's part: its output was written
            channel.answers_written()
    return (time.process_time_ns() - started) / (requests // per_read * per_read)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-read", type=int, default=1,
                        help="frames to a read (librdkafka pipelines one-record produce requests by the hundred)")
    args = parser.parse_args()
    if args.requests < args.per_read or args.per_read < 1 or args.rounds < 1:
        parser.error("--per-read and --rounds must be at least 1, and --requests at least --per-read")
    gc.collect()  # the broker's collector settings (cli/broker.py)
    gc.freeze()
    gc.set_threshold(50_000, 50, 1000)
    without, with_ = [], []
    for _ in range(args.rounds):  # in turns, so that drift hits both
        without.append(passage_ns(args.requests, args.per_read, None))
        with_.append(passage_ns(args.requests, args.per_read, RequestMetrics()))
    # The least of the rounds: on a shared machine, other processes only ever add time.
    off, on = min(without), min(with_)
    print(f"{args.requests:,} requests x {args.rounds} rounds, {args.per_read} to a read, "
          "CPU per request (least of the rounds)")
    print(f"  without metrics  {off / 1000:6.2f} us   rounds: {', '.join(f'{v / 1000:.2f}' for v in without)}")
    print(f"  with metrics     {on / 1000:6.2f} us   rounds: {', '.join(f'{v / 1000:.2f}' for v in with_)}")
    print(f"  metrics' cost    {(on - off) / 1000:6.2f} us per request")


if __name__ == "__main__":
    main()
