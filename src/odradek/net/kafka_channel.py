"""One client connection's Kafka protocol, sans-IO: Kafka's ``KafkaChannel`` (with the request
checks of its ``Processor`` and ``SaslServerAuthenticator``), shaped like h11's ``Connection``.

Bytes in, requests out: the event loop reads into :meth:`KafkaChannel.get_buffer` (through the
TLS layer on SSL listeners) and reports :meth:`~KafkaChannel.buffer_updated`; each
:meth:`~KafkaChannel.next_request` is the next complete request to dispatch, until it returns
None.  A frame that breaks the protocol (a size outside ``0..socket.request.max.bytes``, a
header that does not parse, an api key or version with no schema and no answer) or the SASL
gate (below) makes the channel :attr:`~KafkaChannel.closing`.

Responses in, output out, in request order: a handler's answer goes in with
:meth:`~KafkaChannel.respond`, or later with :meth:`~KafkaChannel.complete` after
:meth:`~KafkaChannel.defer`; answers are released in the order their requests came, as
:attr:`~KafkaChannel.output`: buffers, and file regions to ``sendfile`` (fetched record
batches).  A region is read into the output instead when it is small (one ``writev`` beats a
``sendfile`` and a write) or the channel may not ``sendfile`` (TLS must encrypt every byte).

Authentication is data: a SASL listener's channel holds a
:class:`~odradek.security.sasl.SaslAuthenticator`.  Until it is authenticated only ApiVersions,
SaslHandshake and SaslAuthenticate (or bare tokens after SaslHandshake v0) get through, frames
are capped at ``sasl.server.max.receive.size``, and a refused client gets its answer and then
the close; an authenticated session that expires (KIP-368) closes at its next request other
than a re-authentication.  :attr:`~KafkaChannel.principal` is who authorization decides on.

Request timing and throttling (Kafka's ``RequestChannel`` metrics and KIP-219 quotas) hook in
here: with a :class:`RequestObserver`, every request is counted and handed its API's
``error_counts`` dict as it is read.  A request of an API in the observer's ``tags`` is timed
one in ``sample_every`` of the connection (the connection's first is), any other is handed to
the observer (``request_received``) and timed: received (the read that completed its frame),
started, handled, response ready, released to the output, written.  The observer hears of the
answers once the I/O side says they are written to the socket
(:meth:`~KafkaChannel.answers_written`), or the connection is gone (:meth:`~KafkaChannel.abandon`:
the answers released by then, as Kafka's ``processDisconnected`` counts its in-flight ones).
A request only counted costs its countdown and the check that it goes on the run: the
channel keeps the run of tagged requests of one API and version being read, and credits each
timed request with the ones its run counted since the last (``counted_before``): they were
read before it, so their answers went out before its own.  What a run counted since its last
timed request is credited when a request of another API or version begins a new run, when the
observer asks (:meth:`~KafkaChannel.take_counted`, before a scrape) and at the close, less
those not answered yet.  :meth:`~KafkaChannel.mute` stops requests being read until a given time, as
Kafka mutes a throttled channel after sending its response.  Without an observer nothing is
timed or counted.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameBuffer,
    InvalidFrameSizeError,
    ProtocolError,
    RequestHeaderInfo,
    UnsupportedRequestError,
    decode_request_header,
)
from odradek.security.acls import ANONYMOUS, KafkaPrincipal
from odradek.security.sasl import SaslAuthenticationError, SaslAuthenticator

log = logging.getLogger(__name__)

_now: Final = time.monotonic_ns  # the request timestamps' clock

__all__ = [
    "MAX_IN_FLIGHT_PER_CONNECTION",
    "CloseConnection",
    "FileChunk",
    "KafkaChannel",
    "Request",
    "RequestObserver",
    "Response",
    "UnsupportedHandler",
    "read_file_region",
]

_SIZE = struct.Struct(">i")
_API_VERSIONS: Final = ApiKey.API_VERSIONS  # bound once: compared per request on SASL listeners

# File regions (fetched record batches) up to this size are read and written with the rest of
# their response in one socket write; larger ones are sent with sendfile.
INLINE_FILE_BYTES: Final = 64 * 1024

# Stop reading from a connection with this many responses outstanding (Kafka's clients
# pipeline at most max.in.flight.requests.per.connection, 5 by default, so this only bites
# a misbehaving peer).
MAX_IN_FLIGHT_PER_CONNECTION: Final = 100


@dataclass(frozen=True, slots=True)
class FileChunk:
    """A region of a file to send as part of a response (fetch data, sent without decoding)."""

    fd: int
    position: int
    size: int


ResponseChunk = bytes | bytearray | memoryview | FileChunk
Response = bytes | Sequence[ResponseChunk] | None
_BUFFERS: Final = (bytes, bytearray, memoryview)


class CloseConnection(Exception):
    """Raised by a handler that cannot answer truthfully: the connection is closed (the
    client reconnects, possibly elsewhere) instead of sending a misleading response."""


@dataclass(slots=True)
class Request:
    """One request as a handler sees it: the header, the whole frame (the body starts at
    ``body_offset``) and the connection it came on (its listener, peer and principal)."""

    header: RequestHeaderInfo
    frame: bytes | bytearray
    body_offset: int
    connection: Any  # the asyncio Connection (net/server.py), which handlers may close
    # Where the handler counts its response's error codes (Kafka's ErrorsPerSec): set by a
    # RequestObserver, None without one (one attribute check for a handler).
    error_counts: dict[int, int] | None = field(default=None, repr=False, compare=False)
    # Set only when used (no cost per request otherwise): the answer while it waits behind
    # earlier ones, what a deferred request awaits, and the timestamps a RequestObserver reads
    # of a request it times (time.monotonic_ns(): frame complete, handler started, handler
    # returned, answer known, answer released to the output; the time it was written to the
    # socket is given to the observer with it).
    response: Response = field(init=False, repr=False, compare=False)
    awaiting: object = field(init=False, repr=False, compare=False)
    received_ns: int = field(init=False, repr=False, compare=False)
    started_ns: int = field(init=False, repr=False, compare=False)
    handled_ns: int = field(init=False, repr=False, compare=False)
    ready_ns: int = field(init=False, repr=False, compare=False)
    sent_ns: int = field(init=False, repr=False, compare=False)
    # What the observer files a timed request under; None: not timed (only counted), or no observer.
    observer_tag: Any = field(default=None, init=False, repr=False, compare=False)
    # Of a timed request: the requests only counted that it stands for besides itself (those
    # of its run read since the run's last timed request; see the module docstring).
    counted_before: int = field(init=False, repr=False, compare=False)
    throttle_ms: int = field(default=0, init=False, repr=False, compare=False)  # set when a quota throttled it

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version


class RequestObserver(Protocol):
    """Hears of every request as it is read and once its answer is written, with its
    timestamps: where request metrics plug in."""

    # api key -> (tag, error counts) for requests of that key the observer need not hear of as
    # they are read: the channel sets their ``error_counts`` itself, and the ``observer_tag``
    # of those it times.
    tags: dict[int, tuple[Any, dict[int, int]]]
    # One request in this many of a connection is timed (the rest are counted).
    sample_every: int

    def request_received(self, request: Request) -> None:
        """Before dispatch, for a request whose api key is not in :attr:`tags`: sets its
        ``observer_tag`` (what its answer is reported under) and may set its ``error_counts``;
        it is timed."""

    def requests_written(self, channel: KafkaChannel, requests: list[Request], counted: list[Any],
                         written_ns: int) -> None:
        """These answers were all written to the socket by ``written_ns``: ``requests``, timed,
        with their five timestamps and ``counted_before`` set, and requests only counted, as
        (observer tag, api version, how many) one after another in ``counted``."""


UnsupportedHandler = Callable[[UnsupportedRequestError], Response]


def _refuse_unsupported(_error: UnsupportedRequestError) -> Response:
    return None


class KafkaChannel:
    """One connection's protocol state (see the module docstring)."""

    def __init__(self, *, connection: Any = None, max_request_bytes: int = DEFAULT_MAX_FRAME_SIZE,
                 authenticator: SaslAuthenticator | None = None, sendfile: bool = True,
                 on_unsupported: UnsupportedHandler = _refuse_unsupported,
                 observer: RequestObserver | None = None) -> None:
        self.connection = connection  # what requests carry as their ``connection``
        self.max_request_bytes = max_request_bytes
        self.authenticator = authenticator
        self.sendfile = sendfile  # False on TLS: file regions are read into the output
        self.on_unsupported = on_unsupported  # an answer to an unknown api key/version, or None: close
        self.observer = observer
        self._observer_tags = {} if observer is None else observer.tags  # the observer's dict, kept up by it
        self._sample_every = 1 if observer is None else observer.sample_every
        self._countdown = 1  # requests to read until the next one timed (the first is)
        # The run of tagged requests being read: their api key, version and tags entry, and
        # the countdown when the run or its last timed request began: the run has counted
        # ``_run_from - _countdown`` requests since, not yet credited.
        self._run_key = -1
        self._run_version = -1
        self._run_tag: Any = None
        self._run_from = 1
        self.peer = "?"  # host:port, for the log
        self.client_host = ""
        # Who is on the other end (authorization decides on it): ANONYMOUS until TLS or SASL
        # says otherwise.
        self.principal: KafkaPrincipal = ANONYMOUS
        self.frames = FrameBuffer(max_request_bytes)
        # Requests not yet answered, in order, with answers that wait behind them (a Request
        # whose ``awaiting`` is None, or a bare Response the channel made itself).
        self._queue: deque[Request | Response] = deque()
        self.output: list[Any] = []  # buffers and file regions to send, in order (then clear_output())
        self.output_has_regions = False  # whether ``output`` holds a file region (else: all buffers)
        self.closing = False  # the connection should close once ``output`` is sent
        self.muted_until_ns: int | None = None
        # With an observer: answers that went to ``output`` and are not yet known to be written
        # (answers_written()): the requests timed, and the runs' credits of requests only
        # counted, as (observer tag, api version, how many) one after another.
        self.released: list[Request] = []
        self.counted: list[Any] = []
        self._read_ns = 0  # when the frames now buffered were read (completed)

    # -- bytes in

    def get_buffer(self) -> memoryview:
        """Where the next plaintext bytes should be read to."""
        return self.frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` bytes were read into the last :meth:`get_buffer`."""
        self.frames.buffer_updated(nbytes)
        if self.observer is not None:  # the frames it completes were received now
            self._read_ns = _now()

    def next_request(self) -> Request | None:
        """The next complete request to dispatch, or None: no complete frame is buffered, the
        channel is muted, or it is closing.  Answer it (:meth:`respond` or :meth:`defer`)
        before asking for the next: frames the channel answers itself (bare SASL tokens,
        unsupported versions) take their place in the order then, and are not returned."""
        frames = self.frames
        auth = self.authenticator
        while not self.closing and self.muted_until_ns is None:
            if auth is not None:
                frames.max_frame_size = self._max_frame_size(auth)
            try:
                frame = frames.next_frame()
            except InvalidFrameSizeError as e:
                key = "socket.request.max.bytes" if auth is None or auth.authenticated \
                    else "sasl.server.max.receive.size"
                log.warning("Closing connection from %s: request size %d is outside 0..%d (%s)",
                            self.peer, e.size, e.max_size, key)
                self.closing = True
                return None
            if frame is None:
                break
            request = self._request(frame, auth)
            if request is not None:
                observer = self.observer
                if observer is not None:
                    header = request.header
                    if header.api_key == self._run_key and header.api_version == self._run_version:
                        tagged = self._run_tag  # the run goes on
                    else:
                        tagged = self._observer_tags.get(header.api_key)
                        if tagged is not None:
                            self._begin_run(tagged, header.api_key, header.api_version)
                    if tagged is None:  # a fetch, or the first of its kind: timed
                        observer.request_received(request)
                        request.counted_before = 0
                    else:
                        countdown = self._countdown - 1
                        if countdown:  # counted only: by the countdown
                            self._countdown = countdown
                            request.error_counts = tagged[1]
                            return request
                        request.counted_before = self._run_from - 1
                        self._countdown = self._run_from = self._sample_every
                        request.observer_tag, request.error_counts = tagged
                    request.received_ns = self._read_ns
                    request.started_ns = _now()
                return request
        return None

    def _begin_run(self, tag: Any, api_key: int, version: int) -> None:
        """A tagged request of another API or version than the run's: the run's requests
        counted since its last timed one are credited with the answers released next."""
        uncredited = self._run_from - self._countdown
        if uncredited:
            self.counted += (self._run_tag[0], self._run_version, uncredited)
        self._run_key, self._run_version, self._run_tag = api_key, version, tag
        self._run_from = self._countdown

    def unanswered(self, request: Request) -> None:
        """The handler of ``request``, the last one read, failed at once (the connection
        closes): it is never answered, so not counted; a timed one still credits the requests
        it stood for, which were answered before it."""
        if request.error_counts is None:  # no observer
            return
        if request.observer_tag is not None:
            if request.counted_before:
                self.counted += (request.observer_tag, request.header.api_version, request.counted_before)
        elif self._run_from > self._countdown:  # the run's last: not one of those counted since its timed one
            self._run_from -= 1

    def take_counted(self, closing: bool = False) -> list[Any]:
        """The requests counted, not yet credited, whose answers are released: the credits
        :meth:`answers_written` has not reported yet and the run's requests since its last
        timed one (less those not answered yet), as (observer tag, api version, how many) one
        after another; from now on they are the caller's.  The timed requests released stay
        for :meth:`answers_written`.  ``closing``: the queued timed requests will never be
        released, so the released requests they stand for are taken too."""
        taken = self.counted
        self.counted = []
        # The queue holds the last requests read, from the first not yet released on: those
        # only counted after its last timed one are the run's not released, which it keeps.
        queued = 0
        for head in self._queue:
            if type(head) is Request and head.error_counts is not None:
                if head.observer_tag is None:
                    queued += 1
                else:
                    if closing and head.counted_before > queued:
                        taken += (head.observer_tag, head.header.api_version, head.counted_before - queued)
                    queued = 0
        credited = self._run_from - self._countdown - queued
        if credited > 0:
            taken += (self._run_tag[0], self._run_version, credited)
            self._run_from -= credited
        return taken

    def _max_frame_size(self, auth: SaslAuthenticator) -> int:
        if auth.authenticated:
            return self.max_request_bytes
        return min(auth.max_receive_size, self.max_request_bytes)

    def _request(self, frame: bytes | bytearray, auth: SaslAuthenticator | None) -> Request | None:
        if auth is not None and not auth.authenticated:
            if auth.failed:
                return None  # refused: its answer is on the way, then the close
            if auth.expects_raw_token:
                self._raw_sasl_token(auth, frame)
                return None
        try:
            header, offset = decode_request_header(frame)
        except UnsupportedRequestError as e:
            response = self.on_unsupported(e)
            if response is None:
                log.info("Closing connection from %s: %s", self.peer, e)
                self.closing = True
            else:
                self._answer(response)
            return None
        except ProtocolError as e:
            log.info("Closing connection from %s: malformed request: %s", self.peer, e)
            self.closing = True
            return None
        if auth is not None and not self._sasl_allows(auth, header):
            self.closing = True
            return None
        return Request(header, frame, offset, self.connection)

    def _sasl_allows(self, auth: SaslAuthenticator, header: RequestHeaderInfo) -> bool:
        """The SASL gate (Kafka's SaslServerAuthenticator and Processor checks)."""
        if auth.authenticated:
            if auth.begins_reauthentication(header.api_key):
                return True
            if auth.expired():
                log.info("Closing connection from %s: SASL session of %s expired (connections.max.reauth.ms)",
                         self.peer, self.principal)
                return False
            self.principal = auth.principal  # type: ignore[assignment]  # authenticated: set
            return True
        if not auth.allows(header.api_key):
            log.info("Closing connection from %s: unexpected request (api key %d) during SASL authentication "
                     "in state %s (IllegalSaslState)", self.peer, header.api_key, auth.state.value)
            return False
        if header.api_key == _API_VERSIONS:
            auth.api_versions()
        return True

    def _raw_sasl_token(self, auth: SaslAuthenticator, frame: bytes | bytearray) -> None:
        """A bare token after SaslHandshake v0: the reply goes back bare (size-prefixed)."""
        try:
            reply = auth.raw_token(bytes(frame))
        except SaslAuthenticationError as e:
            log.info("Failed authentication with /%s (%s)", self.client_host, e)
            self.closing = True
            return
        if auth.authenticated:
            self.principal = auth.principal  # type: ignore[assignment]  # authenticated: set
        self._answer(_SIZE.pack(len(reply)) + reply)

    # -- responses in, output out

    def respond(self, request: Request, response: Response) -> None:
        """The handler answered ``request`` at once (None: no answer, e.g. acks=0 produce)."""
        queue = self._queue
        if queue:  # behind an answer still awaited
            if request.observer_tag is not None:  # timed (None without an observer)
                request.handled_ns = request.ready_ns = _now()
            request.response = response
            request.awaiting = None
            queue.append(request)
        elif not self.closing:
            self._emit(response)
            if request.observer_tag is not None:  # timed: released as it was handled, one clock read for the three
                request.handled_ns = request.ready_ns = request.sent_ns = _now()
                self.released.append(request)

    def defer(self, request: Request, awaiting: object) -> None:
        """The handler answers ``request`` later (:meth:`complete`); ``awaiting`` is what the
        I/O side waits on (a future), handed back by :meth:`abandon`."""
        if request.observer_tag is not None:  # timed
            request.handled_ns = _now()
        request.awaiting = awaiting
        self._queue.append(request)

    def complete(self, request: Request, response: Response) -> None:
        """A deferred request's answer (None: none); it goes out once those before it have."""
        if request.observer_tag is not None:  # timed
            request.ready_ns = _now()
        request.response = response
        request.awaiting = None
        queue = self._queue
        while queue and not self.closing:
            head = queue[0]
            if type(head) is Request:
                if head.awaiting is not None:
                    break
                queue.popleft()
                self._send(head, head.response)
            else:
                queue.popleft()
                self._emit(head)

    def clear_output(self) -> None:
        """The output was sent."""
        self.output.clear()
        self.output_has_regions = False

    def answers_written(self) -> None:
        """The I/O side found every byte of the output so far written to the socket (its
        transport's buffer empty): the observer hears of each answer released since."""
        released, counted = self.released, self.counted
        if not released and not counted:
            return
        observer = self.observer
        assert observer is not None  # only an observed channel releases into the lists
        observer.requests_written(self, released, counted, _now())
        released.clear()
        counted.clear()

    @property
    def answers_unwritten(self) -> bool:
        """Whether answers released to the output are not yet reported written (observed only)."""
        return bool(self.released or self.counted)

    @property
    def in_flight(self) -> int:
        """Requests (and answers) not yet released to the output."""
        return len(self._queue)

    def abandon(self) -> list[object]:
        """The connection is gone: forget every queued request; returns what the deferred
        ones were awaiting (for the I/O side to cancel).  The observer hears of the answers
        released by now as written now (Kafka's ``processDisconnected`` measures its
        in-flight responses so), not of the requests unanswered."""
        if self.observer is not None:
            self.counted = self.take_counted(closing=True)
            self._run_from = self._countdown  # the run's unanswered ones: never counted
            self.answers_written()
        awaited = [head.awaiting for head in self._queue if type(head) is Request and head.awaiting is not None]
        self._queue.clear()
        self.closing = True
        return awaited

    def _answer(self, response: Response) -> None:
        """An answer the channel made itself (while reading: not closing), in its place in the order."""
        if self._queue:
            self._queue.append(response)
        else:
            self._emit(response)

    def _send(self, request: Request, response: Response) -> None:
        if self.closing:
            return
        self._emit(response)
        if request.observer_tag is not None:  # timed
            request.sent_ns = _now()
            self.released.append(request)

    def _emit(self, response: Response) -> None:
        """Put an answer in the output (the caller checked the channel is not closing)."""
        output = self.output
        if isinstance(response, _BUFFERS):
            output.append(response)
        elif response is not None:
            inline_all = not self.sendfile
            for chunk in response:
                if isinstance(chunk, _BUFFERS):
                    output.append(chunk)
                elif inline_all or chunk.size <= INLINE_FILE_BYTES:
                    output.append(read_file_region(chunk))
                else:  # a large file region (FileChunk, or the log's FileRegion): fd, position, size
                    output.append(chunk)
                    self.output_has_regions = True
        auth = self.authenticator
        if auth is not None and auth.failed:
            # The refusal is out: close after it.
            log.info("Failed authentication with /%s (%s)", self.client_host, auth.failure)
            self.closing = True

    # -- throttling (KIP-219)

    def mute(self, until_ns: int) -> None:
        """Read no requests until ``time.monotonic_ns()`` reaches ``until_ns`` (the I/O side
        pauses reading and calls :meth:`unmute` then); frames already buffered wait."""
        self.muted_until_ns = until_ns

    def unmute(self) -> None:
        self.muted_until_ns = None
        if self.observer is not None:
            # Frames buffered while muted count as received now (Kafka would read them now).
            self._read_ns = _now()

    @property
    def reading_paused(self) -> bool:
        """Whether the I/O side should stop reading: muted, or too many answers outstanding."""
        return self.muted_until_ns is not None or len(self._queue) >= MAX_IN_FLIGHT_PER_CONNECTION


def read_file_region(chunk: Any, skip: int = 0) -> bytes:
    """The bytes of a file region (fd, position, size) from ``skip`` on."""
    want = chunk.size - skip
    data = os.pread(chunk.fd, want, chunk.position + skip)
    if len(data) < want:
        # The file shrank under us (a truncation): the frame's size is already promised, so
        # pad; a client rejects the damaged batch by its CRC and fetches again.
        data += bytes(want - len(data))
    return data
