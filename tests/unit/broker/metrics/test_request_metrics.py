"""RequestMetrics: each written request's timestamps become Kafka's RequestMetrics times,
under Kafka's request names (a fetch also under FetchConsumer or FetchFollower), and the
requests only counted add to the counts, their times taken as the timed ones'; a request read
is handed its API's error counts.  With a real KafkaChannel: what it counted and has not
reported is in the next snapshot."""

from __future__ import annotations

import struct

from odradek.broker.metrics.request_metrics import (
    FOLD_TIMED,
    SAMPLES_PER_FOLD,
    RequestMetrics,
    kafka_request_name,
)
from odradek.net.kafka_channel import KafkaChannel, Request
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.framing import RequestHeaderInfo

MS = 1_000_000


def request_of(api_key: ApiKey, version: int = 9, body: bytes = b"") -> Request:
    return Request(RequestHeaderInfo(api_key, version, 1, "c", 2), b"hdr" + body, 3, None)


def received(metrics: RequestMetrics, request: Request) -> Request:
    """What the channel does as it reads a request: tag it from ``metrics.tags``, or ask."""
    tagged = metrics.tags.get(request.header.api_key)
    if tagged is None:
        metrics.request_received(request)
    else:
        request.observer_tag, request.error_counts = tagged
    request.counted_before = 0
    return request


def sent(metrics: RequestMetrics, api_key: ApiKey, version: int, received_ms: int, handled_ms: int, ready_ms: int,
         sent_ms: int, body: bytes = b"", started_ms: int | None = None) -> Request:
    """A request timed on itself (answered later than its handler returned)."""
    request = received(metrics, request_of(api_key, version, body))
    request.received_ns, request.handled_ns = received_ms * MS, handled_ms * MS
    request.started_ns = (received_ms if started_ms is None else started_ms) * MS
    request.ready_ns, request.sent_ns = ready_ms * MS, sent_ms * MS
    return request


def written(metrics: RequestMetrics, written_ms: int, *requests: Request, counted: list[object] | None = None) -> None:
    metrics.requests_written(KafkaChannel(), list(requests), counted or [], written_ms * MS)


def test_times_are_split_into_queue_local_remote_response_queue_and_response_send() -> None:
    metrics = RequestMetrics()
    written(metrics, 115, sent(metrics, ApiKey.PRODUCE, 9, 100, 102, 110, 111))
    written(metrics, 201, sent(metrics, ApiKey.PRODUCE, 9, 200, 201, 201, 201))
    written(metrics, 301, sent(metrics, ApiKey.PRODUCE, 7, 296, 301, 301, 301, started_ms=300))
    times = metrics.snapshot()["Produce"]
    assert times.requests == {9: 2, 7: 1}
    # Total time runs from the read to the answer's last byte written.
    assert (times.total.count, times.total.sum) == (3, 15 + 1 + 5)
    assert (times.queue.sum, times.local.sum, times.remote.sum, times.response_queue.sum) == (4, 2 + 1 + 1, 8, 1)
    assert (times.response_send.count, times.response_send.sum) == (3, 4)
    assert times.throttle.sum == 0


def test_requests_counted_add_to_the_counts_and_the_timed_ones_times_are_scaled_to_all() -> None:
    metrics = RequestMetrics()
    # Timed: a produce of 10 ms (2 queued, 3 local, 5 sending) and a metadata of 4 ms.
    written(metrics, 110, sent(metrics, ApiKey.PRODUCE, 9, 100, 105, 105, 105, started_ms=102),
            sent(metrics, ApiKey.METADATA, 12, 106, 108, 108, 108))
    # Counted: three more produce requests of one write (as the channel reports them: their
    # times, api version, how many), then two of two versions.
    produce = metrics.tags[ApiKey.PRODUCE][0]
    written(metrics, 120, counted=[produce, 9, 3])
    written(metrics, 130, counted=[produce, 8, 1, produce, 9, 1])
    snapshot = metrics.snapshot()
    p, m = snapshot["Produce"], snapshot["Metadata"]
    assert p.requests == {9: 5, 8: 1} and m.requests == {12: 1}
    assert (p.total.count, p.total.sum, p.queue.sum, p.local.sum, p.response_send.sum) == (6, 60, 12, 18, 30)
    assert (m.total.count, m.total.sum) == (1, 4)
    assert list(p.total._samples) == [10.0] and list(m.total._samples) == [4.0]  # only the timed are samples
    # Only counted since the last fold: their times at the mean so far, no new samples.
    written(metrics, 140, counted=[produce, 9, 5])
    p = metrics.snapshot()["Produce"]
    assert (p.total.count, p.total.sum, p.requests) == (11, 110, {9: 10, 8: 1})
    assert list(p.total._samples) == [10.0]
    # A timed request stands for itself and the requests counted before it.
    timed = sent(metrics, ApiKey.PRODUCE, 9, 200, 201, 201, 201)
    timed.counted_before = 3
    written(metrics, 202, timed)
    p = metrics.snapshot()["Produce"]
    assert (p.total.count, p.requests, list(p.total._samples)) == (15, {9: 14, 8: 1}, [10.0, 2.0])


def produce_frame(correlation_id: int, version: int = 9) -> bytes:
    """A Produce request's frame as far as the channel reads it (the header; a body it does not parse)."""
    header = struct.pack(">hhih", ApiKey.PRODUCE, version, correlation_id, 1) + b"c" + bytes(3)  # tagged fields...
    return struct.pack(">i", len(header)) + header


def test_what_a_channel_counted_and_has_not_reported_is_in_the_next_snapshot() -> None:
    metrics = RequestMetrics(sample_every=4)
    channel = KafkaChannel(observer=metrics)
    frames = b"".join(produce_frame(i) for i in range(1, 7))
    channel.get_buffer()[:len(frames)] = frames
    channel.buffer_updated(len(frames))
    while (request := channel.next_request()) is not None:  # 1 timed (the first), 2 to 4 counted, 5 timed
        channel.respond(request, b"answer")
    channel.answers_written()
    assert metrics.snapshot()["Produce"].requests == {9: 6}  # 5 with the three before it; 6 asked for
    channel.abandon()
    assert metrics.snapshot()["Produce"].requests == {9: 6}  # the close reports nothing twice


def test_samples_are_folded_in_batches_and_before_a_snapshot() -> None:
    metrics = RequestMetrics()
    written(metrics, 3, sent(metrics, ApiKey.PRODUCE, 9, 0, 1, 2, 2))
    times = metrics.snapshot()["Produce"]
    assert times.total.count == 1 and not times.pending
    written(metrics, 3, *[sent(metrics, ApiKey.PRODUCE, 9, 0, 1, 2, 2) for _ in range(FOLD_TIMED + 4)])
    assert times.total.count == 1 + FOLD_TIMED and len(times.pending) == 4 * 8  # a batch folded as it filled
    assert metrics.snapshot()["Produce"] is times and not times.pending
    assert times.requests == {9: FOLD_TIMED + 5}
    assert (times.total.count, times.total.sum, times.response_send.sum) == (FOLD_TIMED + 5, 3 * (FOLD_TIMED + 5),
                                                                            FOLD_TIMED + 5)


def test_each_request_read_gets_its_apis_error_counts_and_a_fetch_counts_under_fetch_only() -> None:
    metrics = RequestMetrics()
    first = received(metrics, request_of(ApiKey.PRODUCE))
    assert ApiKey.PRODUCE in metrics.tags  # the next is tagged by the channel, without a call
    metadata = received(metrics, request_of(ApiKey.METADATA, 12))
    assert ApiKey.METADATA not in metrics.tags  # not sampled: every one is timed
    assert metadata.observer_tag is received(metrics, request_of(ApiKey.METADATA, 12)).observer_tag
    second = received(metrics, request_of(ApiKey.PRODUCE))
    assert first.error_counts is second.error_counts is metrics.snapshot()["Produce"].errors
    first.error_counts[0] = 2  # type: ignore[index]  # what a handler does
    fetch = received(metrics, request_of(ApiKey.FETCH, 12, body=(-1).to_bytes(4, "big", signed=True)))
    assert ApiKey.FETCH not in metrics.tags  # follower or consumer: decided per request
    assert fetch.error_counts is metrics.snapshot()["Fetch"].errors
    fetch.error_counts[3] = 1  # type: ignore[index]
    snapshot = metrics.snapshot()
    assert snapshot["Produce"].errors == {0: 2} and snapshot["Fetch"].errors == {3: 1}
    assert snapshot["FetchConsumer"].errors == {}


def test_a_produce_answer_counts_one_none_and_its_handler_only_what_differs() -> None:
    metrics = RequestMetrics()
    first = sent(metrics, ApiKey.PRODUCE, 9, 100, 101, 101, 101)
    written(metrics, 102, first, counted=[first.observer_tag, 9, 4])  # five answers, one NONE each
    produce = metrics.snapshot()["Produce"]
    assert produce.error_counts() == {0: 5} and produce.errors == {}
    # What Produce's handler counts: an answer of three partitions, two NONE and one
    # NOT_LEADER_OR_FOLLOWER, is one NONE more than one; an acks=0 request one less.
    counts = first.error_counts
    assert counts is not None
    counts[0] = 1 - 1
    counts[6] = 1
    written(metrics, 2, counted=[first.observer_tag, 9, 2])
    assert metrics.snapshot()["Produce"].error_counts() == {0: 7, 6: 1}
    # A difference counted before its request is (an answer not out yet) shows no fall.
    counts[0] -= 1
    assert metrics.snapshot()["Produce"].error_counts() == {0: 7, 6: 1}
    written(metrics, 3, counted=[first.observer_tag, 9, 1])
    assert metrics.snapshot()["Produce"].error_counts() == {0: 7, 6: 1}
    written(metrics, 4, counted=[first.observer_tag, 9, 1])
    assert metrics.snapshot()["Produce"].error_counts() == {0: 8, 6: 1}
    # APIs that are not sampled count every code their answers carry.
    written(metrics, 5, sent(metrics, ApiKey.METADATA, 12, 1, 2, 2, 2))
    assert metrics.snapshot()["Metadata"].error_counts() == {}


def test_a_folds_quantile_samples_are_spread_over_its_requests_and_end_with_the_last() -> None:
    metrics = RequestMetrics()
    n = 4 * SAMPLES_PER_FOLD
    # Request i takes i ms from its arrival to its answer's last byte; all pending at once, as
    # a FOLD_TIMED above SAMPLES_PER_FOLD would leave them.
    times = received(metrics, request_of(ApiKey.PRODUCE)).observer_tag
    for i in range(n):
        times.pending.extend((9, (n - i) * MS, (n - i) * MS, (n - i) * MS, (n - i) * MS, (n - i) * MS, n * MS, 0))
    total = metrics.snapshot()["Produce"].total
    assert (total.count, total.sum) == (n, sum(range(n)))
    samples = sorted(total._samples)
    assert len(samples) == SAMPLES_PER_FOLD and samples[-1] == n - 1
    assert samples == [float(i) for i in range(3, n, 4)]  # every 4th, the last included


def test_a_throttled_request_reports_its_throttle_time() -> None:
    metrics = RequestMetrics()
    request = sent(metrics, ApiKey.FETCH, 12, 0, 1, 1, 1, body=(-1).to_bytes(4, "big", signed=True))
    request.throttle_ms = 250
    written(metrics, 1, request)
    assert metrics.snapshot()["Fetch"].throttle.sum == 250
    assert metrics.snapshot()["FetchConsumer"].throttle.sum == 250


def test_a_fetch_counts_as_fetch_and_as_follower_or_consumer() -> None:
    metrics = RequestMetrics()
    written(metrics, 2, sent(metrics, ApiKey.FETCH, 12, 0, 1, 2, 2, body=(2).to_bytes(4, "big")),
            sent(metrics, ApiKey.FETCH, 12, 0, 1, 2, 2, body=(-1).to_bytes(4, "big", signed=True)))
    assert metrics.snapshot()["Fetch"].total.count == 2
    assert metrics.snapshot()["FetchFollower"].total.count == 1
    assert metrics.snapshot()["FetchConsumer"].total.count == 1


def test_kafka_request_names() -> None:
    assert kafka_request_name(ApiKey.LIST_OFFSETS) == "ListOffsets"
    assert kafka_request_name(ApiKey.LEADER_AND_ISR) == "LeaderAndIsr"
    assert kafka_request_name(ApiKey.OFFSET_FOR_LEADER_EPOCH) == "OffsetForLeaderEpoch"
    assert kafka_request_name(9999) == "9999"
