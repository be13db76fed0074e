"""Kafka's ``RequestChannel`` metrics (``kafka.network:type=RequestMetrics``), sans-IO: the
channel's :class:`~odradek.net.kafka_channel.RequestObserver`, given each request's five
timestamps once its answer is written.

Kafka splits a request's life into queue, local, remote, throttle, response queue and
response send times.  Here a request is received when the read that completed its frame
returned, and dispatched once the requests read before it are (queue time: the wait behind
the other requests of the same read, or of a muted channel's buffer), local time is the
handler's run, remote time the wait of a deferred answer (purgatory, the controller, ZooKeeper), response
queue time the wait behind earlier answers on the same connection, response send time from
the answer's release to the connection's output until the socket took its last byte; total
time runs to that last byte, as Kafka's does.  A fetch is counted under ``Fetch`` and under
``FetchConsumer`` or ``FetchFollower``, as Kafka does.

``ErrorsPerSec``: each request is handed, as it is read, the error counts of its API
(``request.error_counts``), which its handler adds its response's error codes to
(:mod:`odradek.protocol.error_counts`); counted under the API's own name only (a fetch under
``Fetch``), as Kafka's ``updateErrorMetrics`` does.

A request read is tagged with the :class:`RequestTimes` it counts under (a fetch with its
``FetchFollower`` or ``FetchConsumer`` times, which also fold into ``Fetch``'s), found by api
key in :attr:`RequestMetrics.tags`, which the channel reads itself (no call per request but
a fetch's).  The channel hands over the answers written a socket write at a time: most as a
flat list of five values each, which extend their tag's ``quick`` columns by slices, the rest
as requests (eight values appended each to the flat ``pending`` list, which the fold reads as
columns through slices).  Either way no object per request is kept.  The pending
samples are folded into the histograms a batch at a time (every :data:`FOLD_EVERY` requests,
and before a scrape reads them: :meth:`RequestMetrics.snapshot`), which costs the request
path a few times less than six histogram updates per request.  A fold's samples for the
quantiles are every k-th request of the batch, at most :data:`SAMPLES_PER_FOLD`, so the
histograms' reservoirs span the last several folds rather than the tail of the last.
"""

from __future__ import annotations

from collections import Counter
from itertools import repeat
from operator import sub, truediv
from typing import TYPE_CHECKING, Any, Final

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
# Values per pending sample: api version, received, started, handled, ready, sent, written,
# throttle ms.
_WIDTH: Final = 8
# Values per answer in the channel's flat list: tag, api version, received, started, handled.
_ANSWERED: Final = 5
_FOLD_AT: Final = FOLD_EVERY * _WIDTH
# At most this many of a fold's requests are sampled for the quantiles (the histograms keep
# RESERVOIR_SIZE samples: the last sixteen folds' under load, 65,536 requests).
SAMPLES_PER_FOLD: Final = RESERVOIR_SIZE // 16


class RequestTimes:
    """One request name's counts, time histograms (milliseconds) and response error counts.
    ``pending`` holds, one after another, (api version, received, started, handled, ready,
    sent, written, throttle ms) of each request timed on itself and not yet in the histograms
    (:meth:`fold`); ``quick``, the columns (api version, received, started, handled, written)
    of the answers released as their handlers returned (ready and sent when handled, not
    throttled); ``also``: the times they fold into as well (``Fetch``'s, for ``FetchFollower``
    and ``FetchConsumer``), and ``counted_errors``: where a request tagged with these times
    counts its errors (``also``'s, if any)."""

    __slots__ = ("also", "counted_errors", "errors", "local", "pending", "queue", "quick", "remote", "requests",
                 "response_queue", "response_send", "throttle", "total")

    def __init__(self, also: RequestTimes | None = None) -> None:
        self.also = also
        self.requests: dict[int, int] = {}  # api version -> requests answered
        self.errors: ErrorCounts = {}  # error code -> times a response carried it
        self.counted_errors = self.errors if also is None else also.errors
        self.pending: list[int] = []
        self.quick: tuple[list[int], ...] = ([], [], [], [], [])
        self.total = Histogram()
        self.queue = Histogram()
        self.local = Histogram()
        self.remote = Histogram()
        self.response_queue = Histogram()
        self.response_send = Histogram()
        self.throttle = Histogram()

    @property
    def unfolded(self) -> int:
        """Requests written and not yet folded in."""
        return len(self.pending) // _WIDTH + len(self.quick[0])

    def add_answered(self, answered: list[Any], written_ns: int) -> None:
        """Answers of this kind released as their handlers returned (the channel's flat list
        of five values each), written by ``written_ns``: their columns extended by slices."""
        versions, received, started, handled, written = self.quick
        versions += answered[1::_ANSWERED]
        received += answered[2::_ANSWERED]
        started += answered[3::_ANSWERED]
        handled += answered[4::_ANSWERED]
        written += [written_ns] * (len(answered) // _ANSWERED)
        if len(versions) >= FOLD_EVERY:
            self.fold()

    def fold(self) -> None:
        """Move the pending samples into the counts and histograms (and ``also``'s)."""
        pending, (versions, received, started, handled, written) = self.pending, self.quick
        if not pending and not versions:
            return
        if pending:
            self.pending = []
            versions = pending[0::_WIDTH] + versions
            received, started = pending[1::_WIDTH] + received, pending[2::_WIDTH] + started
            ready, sent = pending[4::_WIDTH] + handled, pending[5::_WIDTH] + handled
            handled, written = pending[3::_WIDTH] + handled, pending[6::_WIDTH] + written
            throttle = pending[7::_WIDTH]
            # Over the timestamp columns, in C: each time's sum from the sums of its two columns.
            sums = [sum(column) for column in (received, started, handled, ready, sent, written)]
        else:  # answers released as handled only: ready and sent are the handled column
            ready = sent = handled
            throttle = []
            handled_sum = sum(handled)
            sums = [sum(received), sum(started), handled_sum, handled_sum, handled_sum, sum(written)]
        self.quick = ([], [], [], [], [])
        stamps = (received, started, handled, ready, sent, written)
        n = len(versions)
        # One version, mostly: counted in C without a Counter.
        by_version = {versions[0]: n} if versions.count(versions[0]) == n else Counter(versions)
        # Samples of every k-th request, for the quantiles.
        step = -(-n // SAMPLES_PER_FOLD)  # ceil: at most SAMPLES_PER_FOLD samples
        first = (n - 1) % step  # the last request is always sampled
        sampled = [column[first::step] for column in stamps]
        times = [(sums[end] - sums[start]) / _NS_PER_MS for start, end in _SPANS]
        samples = [_ms_between(sampled[start], sampled[end]) for start, end in _SPANS]
        throttle_samples = (throttle + [0] * (n - len(throttle)))[first::step] if throttle else [0] * len(sampled[0])
        throttle_sum = float(sum(throttle))
        into = self
        while into is not None:
            requests = into.requests
            for version, count in by_version.items():
                requests[version] = requests.get(version, 0) + count
            for histogram, total, values in zip((into.total, into.queue, into.local, into.remote, into.response_queue,
                                                 into.response_send), times, samples, strict=True):
                histogram.add_batch(n, total, values)
            into.throttle.add_batch(n, throttle_sum, throttle_samples)
            into = into.also


# (start, end) timestamp columns of total, queue, local, remote, response queue and response send time.
_SPANS: Final = ((0, 5), (0, 1), (1, 2), (2, 3), (3, 4), (4, 5))


def _ms_between(starts: list[int], ends: list[int]) -> list[float]:
    """Each (end - start) nanoseconds, in milliseconds."""
    return list(map(truediv, map(sub, ends, starts), repeat(_NS_PER_MS)))


class RequestMetrics:
    """Per request name, its :class:`RequestTimes` (made on the first request of that name)."""

    def __init__(self) -> None:
        self._by_name: dict[str, RequestTimes] = {}
        # api key -> (the times its requests are tagged with, where they count errors), read by
        # the channel; a fetch's are chosen per request (request_received).
        self.tags: dict[int, tuple[RequestTimes, ErrorCounts]] = {}

    def snapshot(self) -> dict[str, RequestTimes]:
        """Every request name's times, with all pending samples folded in."""
        for times in self._by_name.values():
            times.fold()
        return self._by_name

    def request_received(self, request: Request) -> None:
        """A request whose api key is not in :attr:`tags`: a fetch, or a key not seen before."""
        api_key = request.header.api_key
        if api_key == _FETCH:  # every fetch comes here: one lookup once its name has times
            name = "FetchFollower" if is_follower_fetch(request) else "FetchConsumer"
            times = self._by_name.get(name)
            if times is None:
                times = self._by_name[name] = RequestTimes(also=self._times("Fetch"))
        else:
            times = self._times(kafka_request_name(api_key))
            self.tags[api_key] = (times, times.counted_errors)
        request.observer_tag = times
        request.error_counts = times.counted_errors

    def requests_written(self, channel: KafkaChannel, requests: list[Request], answered: list[Any],
                         written_ns: int) -> None:
        for request in requests:
            times = request.observer_tag
            pending = times.pending
            pending += (request.header.api_version, request.received_ns, request.started_ns, request.handled_ns,
                        request.ready_ns, request.sent_ns, written_ns, request.throttle_ms)
            if len(pending) >= _FOLD_AT:
                times.fold()
        if not answered:
            return
        if len(answered) == _ANSWERED:  # one answer (a client that does not pipeline)
            times = answered[0]
            versions, received, started, handled, written = times.quick
            versions.append(answered[1])
            received.append(answered[2])
            started.append(answered[3])
            handled.append(answered[4])
            written.append(written_ns)
            if len(versions) >= FOLD_EVERY:
                times.fold()
            return
        tags = answered[0::_ANSWERED]
        if tags.count(tags[0]) == len(tags):  # one kind of request, mostly
            tags[0].add_answered(answered, written_ns)
        else:
            by_tag: dict[RequestTimes, list[Any]] = {}
            for i in range(0, len(answered), _ANSWERED):
                by_tag.setdefault(answered[i], []).extend(answered[i:i + _ANSWERED])
            for times, flat in by_tag.items():
                times.add_answered(flat, written_ns)

    def _times(self, name: str) -> RequestTimes:
        times = self._by_name.get(name)
        if times is None:
            times = self._by_name[name] = RequestTimes()
        return times
