"""Kafka's ``RequestChannel`` metrics (``kafka.network:type=RequestMetrics``), sans-IO: the
channel's :class:`~odradek.net.kafka_channel.RequestObserver`, given each request's five
timestamps once its answer is written.

Kafka splits a request's life into queue, local, remote, throttle, response queue and
response send times.  Here a request is dispatched as soon as its frame is read (no handler
queue: ``RequestQueueTimeMs`` is zero by construction), local time is the handler's run,
remote time the wait of a deferred answer (purgatory, the controller, ZooKeeper), response
queue time the wait behind earlier answers on the same connection, response send time from
the answer's release to the connection's output until the socket took its last byte; total
time runs to that last byte, as Kafka's does.  A fetch is counted under ``Fetch`` and under
``FetchConsumer`` or ``FetchFollower``, as Kafka does.

``ErrorsPerSec``: each request is handed, as it is read, the error counts of its API
(``request.error_counts``), which its handler adds its response's error codes to
(:mod:`odradek.protocol.error_counts`); counted under the API's own name only (a fetch under
``Fetch``), as Kafka's ``updateErrorMetrics`` does.

A written request costs one tuple in its name's pending list; the pending samples are folded
into the histograms a batch at a time (every :data:`FOLD_EVERY` requests, and before a
scrape reads them: :meth:`RequestMetrics.snapshot`), which costs the request path a few
times less than six histogram updates per request.
"""

from __future__ import annotations

from collections import Counter
from itertools import repeat
from operator import sub, truediv
from typing import TYPE_CHECKING, Final

from odradek.broker.quota.throttling import is_follower_fetch
from odradek.histogram import RESERVOIR_SIZE, Histogram
from odradek.protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from odradek.net.kafka_channel import KafkaChannel, Request
    from odradek.protocol.error_counts import ErrorCounts

__all__ = ["RequestMetrics", "RequestTimes", "kafka_request_name"]

_NS_PER_MS: Final = 1e6
_FETCH: Final = int(ApiKey.FETCH)


def kafka_request_name(api_key: int) -> str:
    """Kafka's name of an API (``ApiKeys.name``): LIST_OFFSETS -> ListOffsets."""
    try:
        name = ApiKey(api_key).name
    except ValueError:
        return str(api_key)
    return "".join(part.capitalize() for part in name.split("_"))


# Pending samples of one request name folded into its histograms at this many.
FOLD_EVERY: Final = 4096


class RequestTimes:
    """One request name's counts, time histograms (milliseconds) and response error counts.
    ``pending`` holds (api version, received, handled, ready, sent, written, throttle ms) of
    requests not yet in the histograms (:meth:`fold`)."""

    __slots__ = ("errors", "local", "pending", "remote", "requests", "response_queue", "response_send", "throttle",
                 "total")

    def __init__(self) -> None:
        self.requests: dict[int, int] = {}  # api version -> requests answered
        self.errors: ErrorCounts = {}  # error code -> times a response carried it
        self.pending: list[tuple[int, int, int, int, int, int, int]] = []
        self.total = Histogram()
        self.local = Histogram()
        self.remote = Histogram()
        self.response_queue = Histogram()
        self.response_send = Histogram()
        self.throttle = Histogram()

    def add(self, sample: tuple[int, int, int, int, int, int, int]) -> None:
        pending = self.pending
        pending.append(sample)
        if len(pending) >= FOLD_EVERY:
            self.fold()

    def fold(self) -> None:
        """Move the pending samples into the counts and histograms."""
        pending = self.pending
        if not pending:
            return
        self.pending = []
        versions, *stamps, throttle = zip(*pending, strict=True)
        requests = self.requests
        for version, count in Counter(versions).items():
            requests[version] = requests.get(version, 0) + count
        # Over the timestamp columns (received, handled, ready, sent, written), in C: each
        # time's sum from the sums of its two columns, and its samples only for the last
        # RESERVOIR_SIZE requests, which is all a histogram keeps.
        sums = [sum(column) for column in stamps]
        tail = -RESERVOIR_SIZE
        recent = [column[tail:] for column in stamps]
        n = len(pending)
        for histogram, start, end in ((self.total, 0, 4), (self.local, 0, 1), (self.remote, 1, 2),
                                      (self.response_queue, 2, 3), (self.response_send, 3, 4)):
            histogram.add_batch(n, (sums[end] - sums[start]) / _NS_PER_MS, _ms_between(recent[start], recent[end]))
        self.throttle.add_batch(n, float(sum(throttle)), list(throttle[tail:]))


def _ms_between(starts: tuple[int, ...], ends: tuple[int, ...]) -> list[float]:
    """Each (end - start) nanoseconds, in milliseconds."""
    return list(map(truediv, map(sub, ends, starts), repeat(_NS_PER_MS)))


class RequestMetrics:
    """Per request name, its :class:`RequestTimes` (made on the first request of that name)."""

    def __init__(self) -> None:
        self._by_name: dict[str, RequestTimes] = {}
        self._by_key: dict[int, RequestTimes] = {}  # api key -> its own name's times

    def snapshot(self) -> dict[str, RequestTimes]:
        """Every request name's times, with all pending samples folded in."""
        for times in self._by_name.values():
            times.fold()
        return self._by_name

    def request_received(self, request: Request) -> None:
        api_key = request.header.api_key
        times = self._by_key.get(api_key)
        if times is None:
            times = self._by_key[api_key] = self._times(kafka_request_name(api_key))
        request.error_counts = times.errors

    def requests_written(self, channel: KafkaChannel, requests: list[Request], written_ns: int) -> None:
        by_key = self._by_key
        for request in requests:
            header = request.header
            api_key = header.api_key
            sample = (header.api_version, request.received_ns, request.handled_ns, request.ready_ns, request.sent_ns,
                      written_ns, request.throttle_ms)
            times = by_key.get(api_key)
            if times is None:
                times = by_key[api_key] = self._times(kafka_request_name(api_key))
            pending = times.pending  # RequestTimes.add, inlined: this runs for every request
            pending.append(sample)
            if len(pending) >= FOLD_EVERY:
                times.fold()
            if api_key == _FETCH:
                self._times("FetchFollower" if is_follower_fetch(request) else "FetchConsumer").add(sample)

    def _times(self, name: str) -> RequestTimes:
        times = self._by_name.get(name)
        if times is None:
            times = self._by_name[name] = RequestTimes()
        return times
