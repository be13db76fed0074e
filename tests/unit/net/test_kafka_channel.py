"""KafkaChannel, the connection's protocol without sockets: bytes in, requests out, answers
in request order, the SASL gate, file regions in the output, muting and request timing."""

from __future__ import annotations

import os
import struct
import tempfile
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v11.request import MetadataRequest as MetadataV11
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from odradek.net.kafka_channel import MAX_IN_FLIGHT_PER_CONNECTION, FileChunk, KafkaChannel, Request
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.framing import UnsupportedRequestError, encode_request
from odradek.security.acls import ANONYMOUS, KafkaPrincipal
from odradek.security.sasl import SaslAuthenticator, SaslServerConfig

_SIZE = struct.Struct(">i")


def metadata(correlation_id: int) -> bytes:
    return encode_request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False), correlation_id, "c")


def api_versions(correlation_id: int) -> bytes:
    return encode_request(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                          correlation_id, "c")


def handshake(correlation_id: int, version: int = 1) -> bytes:
    payload = SaslHandshakeRequest(mechanism="PLAIN") if version == 1 else SaslHandshakeV0(mechanism="PLAIN")
    return encode_request(payload, correlation_id, "c")


def receive(channel: KafkaChannel, data: bytes, piece: int = 1 << 20) -> None:
    """What the event loop does: read into the channel's buffer, in pieces of ``piece`` bytes."""
    view = memoryview(data)
    while view:
        target = channel.get_buffer()
        n = min(len(target), len(view), piece)
        target[:n] = view[:n]
        channel.buffer_updated(n)
        view = view[n:]


def requests(channel: KafkaChannel) -> list[Request]:
    found = []
    while (request := channel.next_request()) is not None:
        found.append(request)
    return found


def correlation_ids(found: list[Request]) -> list[int]:
    return [r.header.correlation_id for r in found]


# -- framing and order


def test_a_frame_in_pieces_becomes_one_request_when_its_last_byte_arrives() -> None:
    channel = KafkaChannel()
    frame = metadata(7)
    for byte in frame[:-1]:
        receive(channel, bytes([byte]))
        assert channel.next_request() is None
    receive(channel, frame[-1:])
    (request,) = requests(channel)
    assert (request.api_key, request.header.correlation_id) == (3, 7)
    assert request.frame == frame[4:] and request.body_offset > 0
    assert not channel.closing


def test_pipelined_answers_leave_in_request_order() -> None:
    """1 is answered last, 2 at once and 3 before 1: the output waits for 1."""
    channel = KafkaChannel()
    receive(channel, metadata(1) + metadata(2) + metadata(3) + metadata(4))
    one, two, three, four = requests(channel)
    channel.defer(one, "future-1")
    channel.respond(two, b"answer-2")
    channel.defer(three, "future-3")
    channel.respond(four, None)  # no answer at all (acks=0 produce)
    assert channel.output == [] and channel.in_flight == 4
    channel.complete(three, [b"answer-3a", b"answer-3b"])
    assert channel.output == []
    channel.complete(one, b"answer-1")
    assert channel.output == [b"answer-1", b"answer-2", b"answer-3a", b"answer-3b"]
    assert channel.in_flight == 0


def test_an_answer_with_nothing_before_it_goes_straight_out() -> None:
    channel = KafkaChannel()
    receive(channel, metadata(1))
    (request,) = requests(channel)
    channel.respond(request, b"answer")
    assert channel.output == [b"answer"] and channel.in_flight == 0


@pytest.mark.parametrize("size", [1025, -1])
def test_a_size_outside_max_request_bytes_closes_before_the_frame_arrives(size: int) -> None:
    channel = KafkaChannel(max_request_bytes=1024)
    receive(channel, metadata(1) + _SIZE.pack(size))
    assert correlation_ids(requests(channel)) == [1]
    assert channel.closing


def test_a_malformed_header_closes() -> None:
    channel = KafkaChannel()
    receive(channel, _SIZE.pack(3) + b"\0\3\0")
    assert requests(channel) == [] and channel.closing


def test_an_unsupported_request_is_answered_in_its_place_or_closes() -> None:
    unknown = _SIZE.pack(10) + struct.pack(">hhih", 999, 0, 5, -1)
    answered = KafkaChannel(on_unsupported=lambda e: b"unsupported-%d" % e.api_key)
    receive(answered, metadata(1) + unknown + metadata(2))
    one = answered.next_request()
    assert one is not None
    answered.defer(one, "future")
    two = answered.next_request()
    assert two is not None and answered.next_request() is None
    answered.respond(two, b"answer-2")
    answered.complete(one, b"answer-1")
    assert answered.output == [b"answer-1", b"unsupported-999", b"answer-2"]

    refused: list[UnsupportedRequestError] = []
    closed = KafkaChannel(on_unsupported=lambda e: refused.append(e))
    receive(closed, unknown + metadata(2))
    assert requests(closed) == [] and closed.closing
    assert refused[0].correlation_id == 5


def test_too_many_answers_outstanding_pause_reading_and_abandon_hands_back_what_was_awaited() -> None:
    channel = KafkaChannel()
    receive(channel, b"".join(metadata(i) for i in range(MAX_IN_FLIGHT_PER_CONNECTION)))
    found = requests(channel)
    for i, request in enumerate(found[:-1]):
        channel.defer(request, f"future-{i}")
    assert not channel.reading_paused
    channel.defer(found[-1], "last")
    assert channel.reading_paused
    awaited = channel.abandon()
    assert awaited == [f"future-{i}" for i in range(MAX_IN_FLIGHT_PER_CONNECTION - 1)] + ["last"]
    assert channel.closing and channel.in_flight == 0


# -- file regions


@pytest.fixture
def segment() -> Iterator[int]:
    with tempfile.TemporaryFile() as f:
        f.write(bytes(range(256)) * 512)  # 128 KiB
        f.flush()
        yield f.fileno()


def test_large_file_regions_stay_regions_for_sendfile_and_small_ones_are_read(segment: int) -> None:
    channel = KafkaChannel()
    receive(channel, metadata(1))
    (request,) = requests(channel)
    large = FileChunk(segment, 1000, 100_000)
    channel.respond(request, [b"header", FileChunk(segment, 10, 20), large, b"tail"])
    assert channel.output == [b"header", bytes(range(10, 30)), large, b"tail"]
    assert channel.output_has_regions
    channel.clear_output()
    assert channel.output == [] and not channel.output_has_regions


def test_without_sendfile_every_region_is_read(segment: int) -> None:
    """TLS encrypts every byte, so its channel reads even large regions into the output."""
    channel = KafkaChannel(sendfile=False)
    receive(channel, metadata(1))
    (request,) = requests(channel)
    channel.respond(request, [b"header", FileChunk(segment, 1000, 100_000)])
    expected = (bytes(range(256)) * 512)[1000:101_000]
    assert channel.output == [b"header", expected] and not channel.output_has_regions


def test_a_region_past_the_end_of_a_shrunken_file_is_padded(segment: int) -> None:
    channel = KafkaChannel()
    receive(channel, metadata(1))
    (request,) = requests(channel)
    channel.respond(request, [FileChunk(segment, os.fstat(segment).st_size - 4, 10)])
    assert channel.output == [bytes([252, 253, 254, 255]) + bytes(6)]


# -- the SASL gate


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def sasl_channel(clock: Clock | None = None, reauth_ms: int = 0) -> KafkaChannel:
    config = SaslServerConfig(enabled_mechanisms=("PLAIN",), plain_users={"alice": "secret"},
                              connections_max_reauth_ms=reauth_ms, max_receive_size=1000)
    return KafkaChannel(authenticator=SaslAuthenticator(config, now_ms=clock or Clock()))


def login(channel: KafkaChannel, correlation_id: int = 1) -> None:
    """SaslHandshake v1 and one SaslAuthenticate v1, as the SASL handlers would answer them."""
    auth = channel.authenticator
    assert auth is not None
    receive(channel, handshake(correlation_id))
    (request,) = requests(channel)
    assert auth.handshake("PLAIN", 1).error == 0
    channel.respond(request, b"handshake-ok")
    result = auth.authenticate(b"\0alice\0secret", 1)
    assert result.error == 0 and auth.authenticated


def test_a_request_other_than_the_sasl_ones_before_authentication_closes() -> None:
    channel = sasl_channel()
    receive(channel, api_versions(1) + metadata(2))
    assert correlation_ids(requests(channel)) == [1]
    assert channel.closing and channel.principal == ANONYMOUS


def test_sasl_requests_pass_the_gate_and_then_everything_does() -> None:
    channel = sasl_channel()
    receive(channel, api_versions(1))
    assert correlation_ids(requests(channel)) == [1]
    login(channel, 2)
    receive(channel, metadata(3))
    assert correlation_ids(requests(channel)) == [3]
    assert channel.principal == KafkaPrincipal("User", "alice") and not channel.closing


def test_frames_before_authentication_are_capped_at_sasl_server_max_receive_size() -> None:
    channel = sasl_channel()
    receive(channel, _SIZE.pack(1001))
    assert requests(channel) == [] and channel.closing


def test_a_refused_client_gets_its_answer_then_the_close_and_nothing_more_is_read() -> None:
    channel = sasl_channel()
    auth = channel.authenticator
    assert auth is not None
    receive(channel, handshake(1) + handshake(2))
    request = channel.next_request()
    assert request is not None
    assert auth.handshake("GSSAPI", 1).error != 0 and auth.failed
    channel.respond(request, b"unsupported-mechanism")
    assert channel.output == [b"unsupported-mechanism"] and channel.closing
    assert channel.next_request() is None


def test_bare_tokens_after_handshake_v0_are_answered_bare() -> None:
    channel = sasl_channel()
    auth = channel.authenticator
    assert auth is not None
    receive(channel, handshake(1, version=0))
    (request,) = requests(channel)
    auth.handshake("PLAIN", 0)
    channel.respond(request, b"handshake-ok")
    token = b"\0alice\0secret"
    receive(channel, _SIZE.pack(len(token)) + token + metadata(2))
    assert correlation_ids(requests(channel)) == [2]
    assert channel.output == [b"handshake-ok", _SIZE.pack(0)]  # PLAIN's empty reply
    assert channel.principal == KafkaPrincipal("User", "alice")


def test_a_wrong_bare_token_closes_without_an_answer() -> None:
    channel = sasl_channel()
    auth = channel.authenticator
    assert auth is not None
    receive(channel, handshake(1, version=0))
    (request,) = requests(channel)
    auth.handshake("PLAIN", 0)
    channel.respond(request, b"handshake-ok")
    token = b"\0alice\0wrong"
    receive(channel, _SIZE.pack(len(token)) + token)
    assert requests(channel) == [] and channel.closing
    assert channel.output == [b"handshake-ok"]


def test_an_expired_session_closes_at_the_next_request_but_may_reauthenticate() -> None:
    clock = Clock()
    channel = sasl_channel(clock, reauth_ms=1000)
    login(channel)
    clock.ms += 999
    receive(channel, metadata(2))
    assert correlation_ids(requests(channel)) == [2]
    clock.ms += 1
    # A re-authentication passes the gate after expiry...
    receive(channel, handshake(3))
    assert correlation_ids(requests(channel)) == [3] and not channel.closing
    auth = channel.authenticator
    assert auth is not None and not auth.authenticated
    auth.handshake("PLAIN", 1)
    auth.authenticate(b"\0alice\0secret", 1)
    clock.ms += 999
    receive(channel, metadata(4))
    assert correlation_ids(requests(channel)) == [4]
    # ... and any other request after it closes.
    clock.ms += 1
    receive(channel, metadata(5))
    assert requests(channel) == [] and channel.closing


# -- throttling and timing seams


def test_a_muted_channel_reads_no_requests_until_unmuted() -> None:
    channel = KafkaChannel()
    receive(channel, metadata(1))
    channel.mute(until_ns=123)
    assert channel.reading_paused and channel.next_request() is None
    receive(channel, metadata(2))
    channel.unmute()
    assert not channel.reading_paused
    assert correlation_ids(requests(channel)) == [1, 2]


class Recorder:
    def __init__(self, sample_every: int = 1) -> None:
        self.tags: dict[int, tuple[object, dict[int, int]]] = {}
        self.sample_every = sample_every
        self.received: list[int] = []
        # Requests timed: (correlation id, received, started, handled, ready, sent, written).
        self.sent: list[tuple[int, ...]] = []
        # Requests only counted, reported as (tag, api version, how many): how many by version.
        self.counted: Counter[int] = Counter()

    def request_received(self, request: Request) -> None:
        request.observer_tag = "recorded"
        request.error_counts = {}
        self.received.append(request.header.correlation_id)

    def requests_written(self, channel: KafkaChannel, requests: list[Request], counted: list[object],
                         written_ns: int) -> None:
        self.sent.extend((request.header.correlation_id, request.received_ns, request.started_ns, request.handled_ns,
                          request.ready_ns, request.sent_ns, written_ns) for request in requests)
        for request in requests:  # a timed request stands for itself and those counted before it
            if request.counted_before:
                self.counted[request.header.api_version] += request.counted_before
        self.credit(counted)

    def credit(self, counted: list[object]) -> None:
        for i in range(0, len(counted), 3):
            _tag, version, n = counted[i:i + 3]
            self.counted[version] += n  # type: ignore[index]


def test_an_observer_hears_of_each_request_as_read_and_once_written_with_its_timestamps_in_order() -> None:
    recorder = Recorder()
    channel = KafkaChannel(observer=recorder)
    receive(channel, metadata(1) + metadata(2))
    one = channel.next_request()
    assert one is not None and recorder.received == [1] and one.error_counts == {}
    channel.defer(one, "future")
    two = channel.next_request()
    assert two is not None and channel.next_request() is None
    channel.respond(two, b"answer-2")
    channel.answers_written()
    assert recorder.sent == []  # 2 waits behind 1: nothing released, nothing written
    channel.complete(one, b"answer-1")
    assert channel.output == [b"answer-1", b"answer-2"] and recorder.sent == []
    # Released to the output is not written yet: the I/O side says when the socket took it.
    channel.clear_output()
    channel.answers_written()
    assert [s[0] for s in recorder.sent] == [1, 2] and not recorder.counted
    for _, received, started, handled, ready, sent, written in recorder.sent:
        assert 0 < received <= started <= handled <= ready <= sent <= written
    # Both came in one read; 2 started after 1's handler returned, and was ready before 1 was.
    (_, received_1, _, handled_1, ready_1, _, _), (_, received_2, started_2, _, ready_2, _, _) = recorder.sent
    assert received_1 == received_2 and started_2 >= handled_1 and ready_2 <= ready_1
    channel.answers_written()
    assert len(recorder.sent) == 2  # each answer is reported once


def test_one_request_in_sample_every_is_timed_and_the_others_counted() -> None:
    recorder = Recorder(sample_every=3)
    counts: dict[int, int] = {}
    recorder.tags[ApiKey.METADATA] = ("metadata's tag", counts)
    channel = KafkaChannel(observer=recorder)
    receive(channel, b"".join(metadata(i) for i in range(1, 8)))
    while (request := channel.next_request()) is not None:
        assert request.error_counts is counts
        channel.respond(request, b"answer")
    assert recorder.received == []  # tagged by the channel, without a call
    channel.answers_written()
    # The connection's first request is timed, then every third: 4 and 7 each with the two
    # counted before it.
    assert [s[0] for s in recorder.sent] == [1, 4, 7] and recorder.counted == {12: 4}
    (_, received_1, started_1, handled_1, ready_1, sent_1, written_1), (_, received_4, started_4, *_) = \
        recorder.sent[:2]
    assert 0 < received_1 <= started_1 <= handled_1 == ready_1 == sent_1 <= written_1
    assert received_4 == received_1 and started_4 >= handled_1  # one read; 4 waited for those before it
    # A deferred request is counted, or timed, when its answer goes out; those counted after
    # the last timed one are handed over when asked for (before a scrape), once answered.
    receive(channel, metadata(8) + metadata(9) + metadata(10) + metadata(11))
    eight, nine = channel.next_request(), channel.next_request()
    assert eight is not None and nine is not None
    channel.respond(eight, b"answer")
    channel.defer(nine, "future")
    ten, eleven = requests(channel)  # 10 timed, standing for 8 and 9; 11 counted
    channel.respond(ten, b"answer")
    channel.respond(eleven, b"answer")
    recorder.credit(channel.take_counted())
    assert recorder.counted == {12: 4}  # 11 waits behind 9, and 8 is 10's to report
    channel.complete(nine, b"answer")
    channel.answers_written()
    assert [s[0] for s in recorder.sent] == [1, 4, 7, 10] and recorder.counted == {12: 6}
    recorder.credit(channel.take_counted())
    assert recorder.counted == {12: 7} and channel.take_counted() == []


def test_a_request_of_another_version_begins_a_new_run_and_the_last_is_credited() -> None:
    recorder = Recorder(sample_every=3)
    recorder.tags[ApiKey.METADATA] = ("metadata's tag", {})
    channel = KafkaChannel(observer=recorder)
    v11 = encode_request(MetadataV11(topics=None, allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=False), 3, "c")
    receive(channel, metadata(1) + metadata(2) + v11 + metadata(4))
    for request in requests(channel):
        channel.respond(request, b"answer")
    channel.answers_written()
    # 1 timed; 2 counted under v12, credited when 3 began a run of v11, and 3 when 4 began
    # one of v12 again; 4 timed, as its countdown ran out.
    assert [s[0] for s in recorder.sent] == [1, 4] and recorder.counted == {12: 1, 11: 1}
    assert channel.take_counted() == []


def test_a_request_whose_handler_failed_is_not_counted_but_what_a_timed_one_stood_for_is() -> None:
    recorder = Recorder(sample_every=3)
    recorder.tags[ApiKey.METADATA] = ("metadata's tag", {})
    channel = KafkaChannel(observer=recorder)
    receive(channel, b"".join(metadata(i) for i in range(1, 6)))
    one, two, three = channel.next_request(), channel.next_request(), channel.next_request()
    assert one is not None and two is not None and three is not None
    for request in (one, two):
        channel.respond(request, b"answer")
    channel.unanswered(three)  # counted by the countdown, then its handler raised
    recorder.credit(channel.take_counted())
    assert recorder.counted == {12: 1}  # 2 only
    four = channel.next_request()  # timed, as it would have been: 2 is reported, 3 not counted
    assert four is not None and four.observer_tag is not None
    channel.respond(four, b"answer")
    five = channel.next_request()
    assert five is not None
    channel.respond(five, b"answer")
    channel.answers_written()
    recorder.credit(channel.take_counted())
    assert [s[0] for s in recorder.sent] == [1, 4] and recorder.counted == {12: 2}  # 2 and 5
    # A timed request whose handler failed is not counted; the ones it stood for are.
    receive(channel, metadata(6) + metadata(7))
    six, seven = channel.next_request(), channel.next_request()
    assert six is not None and seven is not None and seven.observer_tag is not None
    channel.respond(six, b"answer")
    channel.unanswered(seven)
    recorder.credit(channel.take_counted())
    assert [s[0] for s in recorder.sent] == [1, 4] and recorder.counted == {12: 3}


def test_a_throttled_answer_is_timed_on_its_request() -> None:
    recorder = Recorder()
    channel = KafkaChannel(observer=recorder)
    receive(channel, metadata(1))
    request = channel.next_request()
    assert request is not None
    request.throttle_ms = 40
    channel.respond(request, b"answer")
    channel.answers_written()
    assert [s[0] for s in recorder.sent] == [1]


def test_frames_buffered_while_muted_count_as_received_on_unmute() -> None:
    recorder = Recorder()
    channel = KafkaChannel(observer=recorder)
    receive(channel, metadata(1))
    channel.mute(until_ns=1)
    assert channel.next_request() is None
    muted_at = time.monotonic_ns()
    channel.unmute()
    request = channel.next_request()
    assert request is not None
    channel.respond(request, b"answer")
    channel.answers_written()
    (_, received, _, _, _, _, _), = recorder.sent
    assert received >= muted_at


def test_an_abandoned_channel_reports_the_answers_it_released_and_not_the_others() -> None:
    recorder = Recorder(sample_every=2)
    recorder.tags[ApiKey.METADATA] = ("metadata's tag", {})
    channel = KafkaChannel(observer=recorder)
    receive(channel, b"".join(metadata(i) for i in range(1, 6)))
    one, two, three, four, five = requests(channel)
    for request in (one, two):
        channel.respond(request, b"answer")
    channel.defer(three, "future")  # timed; 4 (counted) and 5 (timed) wait behind it
    channel.respond(four, b"answer")
    channel.respond(five, b"answer")
    # Released and not known to be written: measured at the close, as Kafka's in-flight ones.
    channel.abandon()
    assert [s[0] for s in recorder.sent] == [1] and recorder.counted == {12: 1}
    channel.answers_written()
    assert [s[0] for s in recorder.sent] == [1] and recorder.counted == {12: 1} and channel.take_counted() == []


def test_without_an_observer_no_clock_is_read() -> None:
    channel = KafkaChannel()
    receive(channel, metadata(1))
    (request,) = requests(channel)
    channel.respond(request, b"answer")
    with pytest.raises(AttributeError):
        _ = request.received_ns
    assert request.error_counts is None and channel.released == [] and channel.counted == []
