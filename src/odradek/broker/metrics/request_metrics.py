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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from odradek.broker.quota.throttling import is_follower_fetch
from odradek.histogram import Histogram
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


class RequestTimes:
    """One request name's counts, time histograms (milliseconds) and response error counts."""

    __slots__ = ("errors", "local", "remote", "requests", "response_queue", "response_send", "throttle", "total")

    def __init__(self) -> None:
        self.requests: dict[int, int] = {}  # api version -> requests answered
        self.errors: ErrorCounts = {}  # error code -> times a response carried it
        self.total = Histogram()
        self.local = Histogram()
        self.remote = Histogram()
        self.response_queue = Histogram()
        self.response_send = Histogram()
        self.throttle = Histogram()

    def record(self, request: Request, throttle_ms: int) -> None:
        version = request.header.api_version
        self.requests[version] = self.requests.get(version, 0) + 1
        received, handled, ready, sent = request.received_ns, request.handled_ns, request.ready_ns, request.sent_ns
        written = request.written_ns
        self.total.update((written - received) / _NS_PER_MS)
        self.local.update((handled - received) / _NS_PER_MS)
        self.remote.update((ready - handled) / _NS_PER_MS)
        self.response_queue.update((sent - ready) / _NS_PER_MS)
        self.response_send.update((written - sent) / _NS_PER_MS)
        self.throttle.update(throttle_ms)


class RequestMetrics:
    """Per request name, its :class:`RequestTimes` (made on the first request of that name)."""

    def __init__(self) -> None:
        self.by_name: dict[str, RequestTimes] = {}
        self._names: dict[int, str] = {}
        self._errors: dict[int, ErrorCounts] = {}  # api key -> its RequestTimes' errors

    def request_received(self, request: Request) -> None:
        api_key = request.header.api_key
        errors = self._errors.get(api_key)
        if errors is None:
            errors = self._errors[api_key] = self._times(self._name(api_key)).errors
        request.error_counts = errors

    def request_sent(self, channel: KafkaChannel, request: Request) -> None:
        api_key = request.header.api_key
        throttle_ms = getattr(request, "throttle_ms", 0)  # set only on throttled requests
        self._times(self._name(api_key)).record(request, throttle_ms)
        if api_key == _FETCH:
            self._times("FetchFollower" if is_follower_fetch(request) else "FetchConsumer").record(request, throttle_ms)

    def _name(self, api_key: int) -> str:
        name = self._names.get(api_key)
        if name is None:
            name = self._names[api_key] = kafka_request_name(api_key)
        return name

    def _times(self, name: str) -> RequestTimes:
        times = self.by_name.get(name)
        if times is None:
            times = self.by_name[name] = RequestTimes()
        return times
