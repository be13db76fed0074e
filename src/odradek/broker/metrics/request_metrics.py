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
``Fetch``), as Kafka's ``updateErrorMetrics`` does.  A sampled API's answers are taken to
carry one NONE each, and its handler counts only how an answer differs (Produce's: an answer
of several partitions, a partition refused, an acks=0 request that gets none), so a
one-partition answer costs no count (:meth:`RequestTimes.error_counts`).

Every request is counted; a Produce (:data:`SAMPLED_APIS`) is timed one in
:attr:`RequestMetrics.sample_every` of each connection, every other request always (Kafka
times every request; here timing a one-record produce costs the broker well over its share,
docs/DESIGN.md "Metrics", so its times are sampled and its counts are not).  The channel reads
a sampled API's entry in :attr:`RequestMetrics.tags` itself (no call per request), hands the
request its error counts, and times it when its countdown runs out; the other requests come to
:meth:`RequestMetrics.request_received` (a fetch is tagged with its ``FetchFollower`` or
``FetchConsumer`` times, which also fold into ``Fetch``'s).  The requests only counted cost
nothing here but their number: the channel credits each timed request with those read before
it since the last (``counted_before``), and reports the rest as (its times, api version, how many)
(:mod:`odradek.net.kafka_channel`), counted by api version in ``untimed``; before a scrape
(:meth:`RequestMetrics.snapshot`) every channel heard of is asked for the ones it has not
reported yet.  The channel hands over the answers written a socket write at a time: the timed
requests' eight values are appended each to the flat ``pending`` array of int64s, which the
fold reads as columns through slices.  No object per request is kept.  The pending samples are
folded into the histograms a batch at a time (every :data:`FOLD_TIMED` timed requests, and
before a scrape): the count is every request's, the sum the timed requests' scaled to all of
them, and the samples for the quantiles every k-th timed request of the batch, at most
:data:`SAMPLES_PER_FOLD`, so the histograms' reservoirs span the last several folds rather
than the tail of the last.
"""

from __future__ import annotations

import weakref
from array import array
from collections import Counter
from itertools import repeat
from operator import sub, truediv
from typing import TYPE_CHECKING, Any, Final

from odradek.broker.quota.throttling import is_follower_fetch
from odradek.histogram import RESERVOIR_SIZE, Histogram
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.net.kafka_channel import KafkaChannel, Request
    from odradek.protocol.error_counts import ErrorCounts

__all__ = ["RequestMetrics", "RequestTimes", "kafka_request_name"]

_NS_PER_MS: Final = 1e6
_FETCH: Final = int(ApiKey.FETCH)
_NONE: Final = int(ErrorCode.none)


def kafka_request_name(api_key: int) -> str:
    """Kafka's name of an API (``ApiKeys.name``): LIST_OFFSETS -> ListOffsets."""
    try:
        name = ApiKey(api_key).name
    except ValueError:
        return str(api_key)
    return "".join(part.capitalize() for part in name.split("_"))


# One request in this many of a connection is timed (RequestMetrics.sample_every), of the APIs
# that come by the thousand a second (every request of the others is timed).
SAMPLE_EVERY: Final = 256
# Their handlers count only how an answer's error codes differ from one NONE
# (RequestTimes.none_per_answer): Produce's (broker/apis/produce.py).
SAMPLED_APIS: Final = frozenset({int(ApiKey.PRODUCE)})
# Timed requests of one request name folded into its histograms at once (under load: 64
# fetches, or about 16,000 Produce requests).
FOLD_TIMED: Final = 64
# Values per pending sample: api version, received, started, handled, ready, sent, written,
# throttle ms.
_WIDTH: Final = 8
_FOLD_AT: Final = FOLD_TIMED * _WIDTH
# At most this many of a fold's timed requests are sampled for the quantiles (a fold of
# FOLD_TIMED: all of them; the histograms keep RESERVOIR_SIZE samples, the last sixteen
# folds', 1024 timed requests: about 262,000 Produce requests under load).
SAMPLES_PER_FOLD: Final = RESERVOIR_SIZE // 16


class RequestTimes:
    """One request name's counts, time histograms (milliseconds) and response error counts.
    ``pending`` holds, one after another, (api version, received, started, handled, ready,
    sent, written, throttle ms) of each timed request not yet in the histograms (:meth:`fold`);
    ``untimed``, api version -> requests counted and not timed since; ``also``: the times they
    fold into as well (``Fetch``'s, for ``FetchFollower`` and ``FetchConsumer``), and
    ``counted_errors``: where a request tagged with these times counts its errors (``also``'s,
    if any).  ``none_per_answer``: its handler counts only how each answer differs from one
    NONE (a sampled API's, whose one-partition answers come by the thousand a second), so
    ``errors[NONE]`` is that difference; :meth:`error_counts` adds the requests answered."""

    __slots__ = ("_none_shown", "also", "counted_errors", "errors", "local", "none_per_answer", "pending", "queue",
                 "remote", "requests", "response_queue", "response_send", "throttle", "total", "untimed")

    def __init__(self, also: RequestTimes | None = None, none_per_answer: bool = False) -> None:
        self.also = also
        self.none_per_answer = none_per_answer
        self._none_shown = 0
        self.requests: dict[int, int] = {}  # api version -> requests answered
        self.errors: ErrorCounts = {}  # error code -> times a response carried it
        self.counted_errors = self.errors if also is None else also.errors
        self.pending = array("q")  # int64s in one block, not int objects (as histogram.py's samples)
        self.untimed: dict[int, int] = {}
        self.total = Histogram()
        self.queue = Histogram()
        self.local = Histogram()
        self.remote = Histogram()
        self.response_queue = Histogram()
        self.response_send = Histogram()
        self.throttle = Histogram()

    def error_counts(self) -> ErrorCounts:
        """Error code -> times an answer carried it, as of the last fold.  With
        ``none_per_answer`` NONE's count is the requests answered plus the handler's difference,
        and never shown lower than before: a difference is counted as the answer is made, its
        request once the answer is out."""
        if not self.none_per_answer:
            return self.errors
        counts = dict(self.errors)
        self._none_shown = max(self._none_shown, sum(self.requests.values()) + counts.pop(_NONE, 0))
        if self._none_shown:
            counts[_NONE] = self._none_shown
        return counts

    def count(self, version: int, n: int) -> None:
        """``n`` more requests of ``version`` answered and not timed."""
        untimed = self.untimed
        untimed[version] = untimed.get(version, 0) + n

    def fold(self) -> None:
        """Move the pending samples and counts into the counts and histograms (and ``also``'s)."""
        pending, untimed = self.pending, self.untimed
        if not pending and not untimed:
            return
        self.pending = array("q")
        self.untimed = {}
        versions = pending[0::_WIDTH]
        timed = len(versions)
        by_version = Counter(untimed)
        n = timed + sum(untimed.values())
        if timed:
            # One version, mostly: counted in C without going through each.
            by_version.update({versions[0]: timed} if versions.count(versions[0]) == timed else Counter(versions))
            stamps = [pending[i::_WIDTH] for i in range(1, 7)]  # received, started, handled, ready, sent, written
            throttle = pending[7::_WIDTH]
            # Over the timestamp columns, in C: each time's sum from the sums of its two columns,
            # the timed requests' scaled to all.
            timed_ms = timed * _NS_PER_MS
            sums = [sum(column) for column in stamps]
            totals: list[float | None] = [(sums[end] - sums[start]) * n / timed_ms for start, end in _SPANS]
            throttle_total: float | None = sum(throttle) * n / timed
            # Samples of every k-th timed request, for the quantiles.
            step = -(-timed // SAMPLES_PER_FOLD)  # ceil: at most SAMPLES_PER_FOLD samples
            first = (timed - 1) % step  # the last request is always sampled
            sampled = [column[first::step] for column in stamps]
            samples = [_ms_between(sampled[start], sampled[end]) for start, end in _SPANS]
            throttle_samples = throttle[first::step]
        else:  # only counted: their times at each histogram's mean so far
            totals = [None] * len(_SPANS)
            throttle_total = None
            samples = [[] for _ in _SPANS]
            throttle_samples = []
        into = self
        while into is not None:
            requests = into.requests
            for version, count in by_version.items():
                requests[version] = requests.get(version, 0) + count
            histograms = (into.total, into.queue, into.local, into.remote, into.response_queue, into.response_send,
                          into.throttle)
            for histogram, total, values in zip(histograms, (*totals, throttle_total), (*samples, throttle_samples),
                                                strict=True):
                histogram.add_batch(n, _mean_times(histogram, n) if total is None else total, values)
            into = into.also


def _mean_times(histogram: Histogram, n: int) -> float:
    """``n`` samples at the histogram's mean so far (none yet: 0)."""
    return histogram.sum / histogram.count * n if histogram.count else 0.0


# (start, end) timestamp columns of total, queue, local, remote, response queue and response send time.
_SPANS: Final = ((0, 5), (0, 1), (1, 2), (2, 3), (3, 4), (4, 5))


def _ms_between(starts: list[int], ends: list[int]) -> list[float]:
    """Each (end - start) nanoseconds, in milliseconds."""
    return list(map(truediv, map(sub, ends, starts), repeat(_NS_PER_MS)))


class RequestMetrics:
    """Per request name, its :class:`RequestTimes` (made on the first request of that name)."""

    def __init__(self, sample_every: int = SAMPLE_EVERY) -> None:
        self.sample_every = sample_every  # one request in this many of a connection is timed
        self._by_name: dict[str, RequestTimes] = {}
        self._by_key: dict[int, RequestTimes] = {}  # api key (not a fetch's) -> its times
        # api key -> (the times its requests are counted under, where they count errors), read
        # by the channel, which times one in sample_every of them: the SAMPLED_APIS' (the others'
        # requests are all timed, request_received).
        self.tags: dict[int, tuple[RequestTimes, ErrorCounts]] = {}
        # The channels heard of (with their first answer written), asked for what they counted
        # and did not report yet before a snapshot.
        self._channels: weakref.WeakSet[KafkaChannel] = weakref.WeakSet()

    def snapshot(self) -> dict[str, RequestTimes]:
        """Every request name's times, with the requests the channels counted and have not
        reported yet (:meth:`KafkaChannel.take_counted`) and all pending samples folded in."""
        for channel in list(self._channels):
            _credit(channel.take_counted())
        for times in self._by_name.values():
            times.fold()
        return self._by_name

    def request_received(self, request: Request) -> None:
        """A request whose api key is not in :attr:`tags`: one of an API timed every time (a
        fetch, whose times are FetchFollower's or FetchConsumer's, or a rare API), or the first
        of a sampled API (which goes into ``tags``)."""
        api_key = request.header.api_key
        if api_key == _FETCH:
            name = "FetchFollower" if is_follower_fetch(request) else "FetchConsumer"
            times = self._by_name.get(name)
            if times is None:
                times = self._by_name[name] = RequestTimes(also=self._times("Fetch"))
        else:
            times = self._by_key.get(api_key)
            if times is None:
                sampled = api_key in SAMPLED_APIS
                times = self._by_key[api_key] = self._times(kafka_request_name(api_key), none_per_answer=sampled)
                if sampled:
                    self.tags[api_key] = (times, times.counted_errors)
        request.observer_tag = times
        request.error_counts = times.counted_errors

    def requests_written(self, channel: KafkaChannel, requests: list[Request], counted: list[Any],
                         written_ns: int) -> None:
        channels = self._channels
        if channel not in channels:  # a channel is heard of first with its first answer, a timed one
            channels.add(channel)
        for request in requests:
            times = request.observer_tag
            pending = times.pending
            version = request.header.api_version
            pending.extend((version, request.received_ns, request.started_ns, request.handled_ns,
                            request.ready_ns, request.sent_ns, written_ns, request.throttle_ms))
            if request.counted_before:
                times.count(version, request.counted_before)
            if len(pending) >= _FOLD_AT:
                times.fold()
        if counted:
            _credit(counted)

    def _times(self, name: str, none_per_answer: bool = False) -> RequestTimes:
        times = self._by_name.get(name)
        if times is None:
            times = self._by_name[name] = RequestTimes(none_per_answer=none_per_answer)
        return times


def _credit(counted: list[Any]) -> None:
    """Requests counted and not timed, as a channel reports them: (their times, api version,
    how many) one after another."""
    for i in range(0, len(counted), 3):
        times, version, n = counted[i:i + 3]
        times.count(version, n)
