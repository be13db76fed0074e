"""The request breakdown reads the broker's own RequestMetrics exposition: two scrapes of two
brokers become each request's count, summed times and errors in between."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from odradek.broker.metrics.kafka_metrics import EventLoopLoad, request_families
from odradek.broker.metrics.request_metrics import RequestMetrics
from odradek.net.kafka_channel import KafkaChannel, Request
from odradek.perf.request_breakdown import breakdown, parse_request_times
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.framing import RequestHeaderInfo

MS = 1_000_000


class _Families:
    def __init__(self, metrics: RequestMetrics) -> None:
        self.metrics = metrics

    def collect(self):  # type: ignore[no-untyped-def]
        return request_families(self.metrics, EventLoopLoad())


def exposition(metrics: RequestMetrics) -> str:
    registry = CollectorRegistry()
    registry.register(_Families(metrics))  # type: ignore[arg-type]
    return generate_latest(registry).decode()


def answer(metrics: RequestMetrics, api_key: ApiKey, received: int, handled: int, ready: int, written: int) -> None:
    request = Request(RequestHeaderInfo(api_key, 3, 1, "c", 2), b"hdr", 3, None)
    metrics.request_received(request)
    request.counted_before = 0  # as the channel sets it for a request it times
    request.received_ns, request.started_ns, request.handled_ns, request.ready_ns, request.sent_ns = (
        received * MS, received * MS, handled * MS, ready * MS, ready * MS)
    metrics.requests_written(KafkaChannel(), [request], [], written * MS)


def test_two_scrapes_of_two_brokers_give_the_requests_and_times_in_between() -> None:
    one, two = RequestMetrics(), RequestMetrics()
    answer(one, ApiKey.END_TXN, 0, 1, 5, 5)  # before the first scrape: not counted
    before = [parse_request_times(exposition(m)) for m in (one, two)]
    answer(one, ApiKey.END_TXN, 10, 12, 20, 21)  # local 2, remote 8, total 11
    answer(two, ApiKey.END_TXN, 30, 31, 34, 34)  # local 1, remote 3, total 4
    answer(two, ApiKey.ADD_PARTITIONS_TO_TXN, 40, 41, 41, 41)
    two.snapshot()["AddPartitionsToTxn"].errors[ErrorCode.concurrent_transactions] = 1
    after = [parse_request_times(exposition(m)) for m in (one, two)]

    got = breakdown(before, after)

    end = got["EndTxn"]
    assert (end.requests, end.total_ms, end.local_ms, end.remote_ms) == (2, 15.0, 3.0, 11.0)
    assert end.mean("remote") == 5.5 and end.errors == {}
    add = got["AddPartitionsToTxn"]
    assert (add.requests, add.total_ms, add.errors) == (1, 1.0, {"CONCURRENT_TRANSACTIONS": 1})
    assert set(got) == {"EndTxn", "AddPartitionsToTxn"}
