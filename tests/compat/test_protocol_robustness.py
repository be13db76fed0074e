"""Raw sockets against a real broker: garbage, truncated and oversized frames, unknown api
keys and versions, forged array counts.  Each bad connection is answered with Kafka's error
or closed; the broker process stays up and a client connected before the abuse (and one
connecting after it) keeps producing and fetching on the same broker.
"""

from __future__ import annotations

import datetime
import itertools
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.api_versions.v0 import response as api_versions_v0
from kio.schema.api_versions.v3 import request as api_versions_v3_req
from kio.schema.api_versions.v3 import response as api_versions_v3
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.fetch.v12 import response as fetch_resp
from kio.schema.list_offsets.v7 import request as list_offsets_req
from kio.schema.list_offsets.v7 import response as list_offsets_resp
from kio.schema.metadata.v12 import request as metadata_req
from kio.schema.metadata.v12 import response as metadata_resp
from kio.schema.produce.v3 import request as produce_v3_req
from kio.schema.produce.v9 import request as produce_req
from kio.schema.produce.v9 import response as produce_resp

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.protocol.errors import ErrorCode
from odradek.protocol.framing import decode_response, encode_request
from odradek.protocol.records import SimpleRecord, build_batch, decode_batch
from odradek.protocol.varint import encode_uvarint as uvarint
from support import ClusterFactory, address_of, create_topic, partitions_of
from support.wire import raw_frame as frame
from support.wire import raw_header as header

MAX_REQUEST = 200_000  # socket.request.max.bytes for this module's cluster
TOPIC = "robust"
_SIZE = struct.Struct(">i")


# ----------------------------------------------------------------------------- raw client


class RawConnection:
    """A blocking Kafka connection that can also send arbitrary bytes."""

    def __init__(self, address: tuple[str, int], timeout: float = 15.0) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self._correlation = itertools.count(1)

    def close(self) -> None:
        self.sock.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(out)} of {n} bytes")
            out += chunk
        return bytes(out)

    def read_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self.read_exactly(4))
        return self.read_exactly(size)

    def request(self, payload: Any, response_type: type[Any]) -> Any:
        correlation_id = next(self._correlation)
        self.sock.sendall(encode_request(payload, correlation_id, "compat-raw"))
        got, response = decode_response(self.read_frame(), response_type)
        assert got == correlation_id
        return response

    def closed_by_peer(self, timeout: float = 15.0) -> bool:
        """True once the broker closes the connection; fails if it sends anything instead."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
        assert not data, f"expected the connection to be closed, got {len(data)} bytes: {data[:64]!r}"
        return True




def produce_request(records: bytes | None, partition: int = 0, acks: int = -1, topic: str = TOPIC) -> Any:
    return produce_req.ProduceRequest(acks=acks, timeout=datetime.timedelta(seconds=10), topic_data=(
        produce_req.TopicProduceData(name=topic, partition_data=(
            produce_req.PartitionProduceData(index=partition, records=records),)),))


def fetch_request(offset: int, partition: int = 0, max_wait_ms: int = 0, partition_max_bytes: int = 1 << 20,
                  max_bytes: int = 1 << 20, min_bytes: int = 1) -> Any:
    return fetch_req.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes, max_bytes=max_bytes,
        topics=(fetch_req.FetchTopic(topic=TOPIC, partitions=(fetch_req.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes),)),),
        forgotten_topics_data=())


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("robustness"))
    try:
        c = factory(3, overrides={"socket.request.max.bytes": str(MAX_REQUEST)})
        create_topic(c, TOPIC, 3, 3)
        yield c
    finally:
        factory.stop_all()


@pytest.fixture(scope="module")
def target(cluster: LocalCluster) -> int:
    """The broker under abuse: the leader of partition 0."""
    info = partitions_of(address_of(cluster, 0), TOPIC)
    assert info is not None
    return info[0].leader


@pytest.fixture(scope="module")
def bystander(cluster: LocalCluster, target: int) -> Iterator[RawConnection]:
    """A well-behaved client connected to the target broker before any abuse."""
    conn = RawConnection(address_of(cluster, target))
    produce_and_fetch(conn, b"before any abuse")
    try:
        yield conn
    finally:
        conn.close()


_values = itertools.count()


def produce_and_fetch(conn: RawConnection, value: bytes) -> None:
    batch = build_batch([SimpleRecord(value, key=b"bystander")], timestamp=int(time.time() * 1000))
    response = conn.request(produce_request(batch), produce_resp.ProduceResponse)
    (p,) = response.responses[0].partition_responses
    assert p.error_code == ErrorCode.none, p
    fetched = conn.request(fetch_request(p.base_offset), fetch_resp.FetchResponse)
    part = fetched.responses[0].partitions[0]
    assert part.error_code == ErrorCode.none and part.records, part
    _, records = decode_batch(part.records)
    assert records[0].offset == p.base_offset and records[0].value == value


def assert_still_serving(cluster: LocalCluster, target: int, bystander: RawConnection) -> None:
    assert cluster.brokers[target].alive, "the broker process died"
    produce_and_fetch(bystander, b"bystander %d" % next(_values))
    fresh = RawConnection(address_of(cluster, target))
    try:
        produce_and_fetch(fresh, b"fresh %d" % next(_values))
    finally:
        fresh.close()


def assert_closed(cluster: LocalCluster, target: int, payload: bytes) -> None:
    conn = RawConnection(address_of(cluster, target))
    try:
        conn.send_bytes(payload)
        assert conn.closed_by_peer(), "the broker kept the connection open"
    finally:
        conn.close()


# ----------------------------------------------------------------------------- framing


@pytest.mark.parametrize("payload", [
    pytest.param(b"GET / HTTP/1.1\r\nHost: odradek\r\n\r\n", id="http"),
    pytest.param(frame(b"\xff" * 16), id="api-key-minus-1"),
    pytest.param(frame(b""), id="empty-frame"),
    pytest.param(frame(b"\x00\x12"), id="header-cut-short"),
    pytest.param(b"\xff\xff\xff\xfe" + b"\x00" * 8, id="negative-size"),
    pytest.param(_SIZE.pack(18) + struct.pack(">hhih", 3, 1, 1, 32767) + b"x" * 8, id="client-id-past-end"),
])
def test_garbage_closes_only_that_connection(cluster: LocalCluster, target: int, bystander: RawConnection,
                                             payload: bytes) -> None:
    assert_closed(cluster, target, payload)
    assert_still_serving(cluster, target, bystander)


def test_truncated_frame_then_close(cluster: LocalCluster, target: int, bystander: RawConnection) -> None:
    conn = RawConnection(address_of(cluster, target))
    whole = encode_request(produce_request(build_batch([SimpleRecord(b"never")])), 99, "truncated")
    conn.send_bytes(whole[: len(whole) // 2])
    # While half a frame sits in the broker's buffer, everyone else is served.
    assert_still_serving(cluster, target, bystander)
    conn.close()
    assert_still_serving(cluster, target, bystander)


def test_size_prefix_above_socket_request_max_bytes(cluster: LocalCluster, target: int,
                                                    bystander: RawConnection) -> None:
    # Closed on the size alone: the broker does not wait for (or buffer) the body.
    assert_closed(cluster, target, _SIZE.pack(MAX_REQUEST + 1))
    assert_closed(cluster, target, _SIZE.pack(2**31 - 1) + b"\x00" * 100)
    assert_still_serving(cluster, target, bystander)


def test_frame_of_exactly_socket_request_max_bytes_is_served(cluster: LocalCluster, target: int,
                                                             bystander: RawConnection) -> None:
    def request_of(size: int) -> bytes:
        batch = build_batch([SimpleRecord(b"x" * size, key=b"big")], timestamp=int(time.time() * 1000))
        return encode_request(produce_request(batch), 5, "max-size")

    size = MAX_REQUEST - 200
    while len(request_of(size)) - 4 != MAX_REQUEST:
        size += MAX_REQUEST - (len(request_of(size)) - 4)
    conn = RawConnection(address_of(cluster, target))
    try:
        conn.send_bytes(request_of(size))
        correlation_id, response = decode_response(conn.read_frame(), produce_resp.ProduceResponse)
        assert correlation_id == 5
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
        conn.send_bytes(request_of(size + 1))  # one byte more is one byte too many
        assert conn.closed_by_peer()
    finally:
        conn.close()
    assert_still_serving(cluster, target, bystander)


def _cut_body(payload: Any, keep: float) -> bytes:
    whole = encode_request(payload, 11, "cut")[4:]
    return frame(whole[: int(len(whole) * keep)])


@pytest.mark.parametrize("payload", [
    pytest.param(_cut_body(produce_request(build_batch([SimpleRecord(b"cut" * 50)])), 0.6), id="produce-v9"),
    pytest.param(_cut_body(produce_v3_req.ProduceRequest(
        acks=1, timeout=datetime.timedelta(seconds=1), topic_data=(produce_v3_req.TopicProduceData(
            name=TOPIC, partition_data=(produce_v3_req.PartitionProduceData(
                index=0, records=build_batch([SimpleRecord(b"cut" * 50)])),)),)), 0.7), id="produce-v3"),
    pytest.param(_cut_body(metadata_req.MetadataRequest(
        topics=(metadata_req.MetadataRequestTopic(topic_id=None, name=TOPIC),),
        include_topic_authorized_operations=False), 0.8), id="metadata-v12"),
    pytest.param(_cut_body(fetch_request(0), 0.5), id="fetch-v12"),
])
def test_valid_header_with_truncated_body(cluster: LocalCluster, target: int, bystander: RawConnection,
                                          payload: bytes) -> None:
    assert_closed(cluster, target, payload)
    assert_still_serving(cluster, target, bystander)


# ----------------------------------------------------------------------------- api keys and versions


@pytest.mark.parametrize(("api_key", "version"), [
    pytest.param(999, 0, id="unknown-key-999"),
    pytest.param(-5, 0, id="negative-key"),
    pytest.param(24, 3, id="add-partitions-to-txn-not-implemented"),
    pytest.param(57, 1, id="update-features-not-implemented"),
])
def test_unknown_api_key(cluster: LocalCluster, target: int, bystander: RawConnection, api_key: int,
                         version: int) -> None:
    assert_closed(cluster, target, frame(header(api_key, version) + b"\x00" * 20))
    assert_still_serving(cluster, target, bystander)


@pytest.mark.parametrize(("api_key", "version", "flexible"), [
    pytest.param(19, 1, False, id="create-topics-v1-below-the-implemented-range"),
    pytest.param(0, 13, True, id="produce-v13-known-to-kio-not-implemented"),
    pytest.param(0, 99, True, id="produce-v99"),
    pytest.param(1, 3, False, id="fetch-v3"),
    pytest.param(1, 18, True, id="fetch-v18"),
    pytest.param(3, 13, True, id="metadata-v13"),
    pytest.param(2, 32767, True, id="list-offsets-v32767"),
])
def test_unsupported_version_of_a_known_api(cluster: LocalCluster, target: int, bystander: RawConnection,
                                            api_key: int, version: int, flexible: bool) -> None:
    assert_closed(cluster, target, frame(header(api_key, version, flexible=flexible) + b"\x00" * 20))
    assert_still_serving(cluster, target, bystander)


@pytest.mark.parametrize("version", [5, 99, 32767])
def test_api_versions_at_an_unknown_version(cluster: LocalCluster, target: int, bystander: RawConnection,
                                            version: int) -> None:
    """Kafka's answer: an ApiVersions v0 response with UNSUPPORTED_VERSION and the versions of
    ApiVersions alone (KIP-511); the connection stays open for the client's retry at one of those."""
    conn = RawConnection(address_of(cluster, target))
    try:
        conn.send_bytes(frame(header(18, version, correlation_id=4242, flexible=True) + b"\x07future body"))
        correlation_id, response = decode_response(conn.read_frame(), api_versions_v0.ApiVersionsResponse)
        assert correlation_id == 4242
        assert response.error_code == ErrorCode.unsupported_version
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert ranges == {18: (0, 4)}
        retry = conn.request(api_versions_v3_req.ApiVersionsRequest(
            client_software_name="compat", client_software_version="1"), api_versions_v3.ApiVersionsResponse)
        assert retry.error_code == ErrorCode.none
        retried = {k.api_key: (k.min_version, k.max_version) for k in retry.api_keys}
        assert retried[18] == (0, 4) and retried[0][1] == 9 and retried[1][1] == 12
    finally:
        conn.close()
    assert_still_serving(cluster, target, bystander)


# ----------------------------------------------------------------------------- forged counts

_TOPIC_V1 = struct.pack(">h", len(TOPIC)) + TOPIC.encode()
_TOPIC_COMPACT = uvarint(len(TOPIC) + 1) + TOPIC.encode()
_PRODUCE_V3_HEAD = header(0, 3) + struct.pack(">hhi", -1, 1, 1000)  # null transactional id, acks, timeout
_PRODUCE_V9_HEAD = header(0, 9, flexible=True) + b"\x00" + struct.pack(">hi", 1, 1000)


@pytest.mark.parametrize("payload", [
    pytest.param(frame(header(3, 1) + struct.pack(">i", 2**31 - 1)), id="metadata-v1-topics"),
    pytest.param(frame(header(3, 12, flexible=True) + uvarint(2**32 - 1) + b"\x00" * 8), id="metadata-v12-topics"),
    pytest.param(frame(_PRODUCE_V3_HEAD + struct.pack(">i", 2**31 - 1)), id="produce-v3-topics"),
    pytest.param(frame(_PRODUCE_V3_HEAD + struct.pack(">i", 1) + _TOPIC_V1 + struct.pack(">i", 2**31 - 1)),
                 id="produce-v3-partitions"),
    pytest.param(frame(_PRODUCE_V3_HEAD + struct.pack(">i", 1) + _TOPIC_V1 + struct.pack(">iii", 1, 0, 2**31 - 1)
                       + b"\x00" * 61), id="produce-v3-records-length"),
    pytest.param(frame(_PRODUCE_V3_HEAD + struct.pack(">i", -7)), id="produce-v3-negative-count"),
    pytest.param(frame(_PRODUCE_V9_HEAD + uvarint(2**31)), id="produce-v9-topics"),
    pytest.param(frame(_PRODUCE_V9_HEAD + uvarint(2) + _TOPIC_COMPACT + uvarint(2**32 - 1) + b"\x00" * 4),
                 id="produce-v9-partitions"),
    pytest.param(frame(_PRODUCE_V9_HEAD + uvarint(2) + _TOPIC_COMPACT + uvarint(2) + struct.pack(">i", 0)
                       + uvarint(2**31) + b"\x00" * 61), id="produce-v9-records-length"),
    pytest.param(frame(_PRODUCE_V9_HEAD + b"\xff\xff\xff\xff\xff\xff\x01"), id="produce-v9-varint-too-long"),
    pytest.param(frame(header(1, 12, flexible=True) + struct.pack(">iiiib", -1, 0, 1, 1 << 20, 0)
                       + struct.pack(">ii", 0, -1) + uvarint(2**31)), id="fetch-v12-topics"),
    pytest.param(frame(header(2, 7, flexible=True) + struct.pack(">ib", -1, 0) + uvarint(2) + _TOPIC_COMPACT
                       + uvarint(2**28)), id="list-offsets-v7-partitions"),
    pytest.param(frame(header(3, 1) + struct.pack(">i", 1) + struct.pack(">h", 30000) + b"t"), id="string-length"),
])
def test_forged_huge_counts(cluster: LocalCluster, target: int, bystander: RawConnection, payload: bytes) -> None:
    assert_closed(cluster, target, payload)
    assert_still_serving(cluster, target, bystander)


# ----------------------------------------------------------------------------- well-formed but odd


def test_odd_but_well_formed_requests_get_kafka_errors(cluster: LocalCluster, target: int,
                                                       bystander: RawConnection) -> None:
    conn = RawConnection(address_of(cluster, target))
    try:
        batch = build_batch([SimpleRecord(b"odd")])

        def produce_error(**kwargs: Any) -> ErrorCode:
            r = conn.request(produce_request(**kwargs), produce_resp.ProduceResponse)
            return r.responses[0].partition_responses[0].error_code

        assert produce_error(records=batch, acks=5) == ErrorCode.invalid_required_acks
        assert produce_error(records=None) in (ErrorCode.corrupt_message, ErrorCode.invalid_record)
        assert produce_error(records=b"") in (ErrorCode.corrupt_message, ErrorCode.invalid_record)
        magic1 = bytearray(batch)
        magic1[16] = 1
        assert produce_error(records=bytes(magic1)) in (
            ErrorCode.corrupt_message, ErrorCode.invalid_record, ErrorCode.unsupported_for_message_format)
        assert produce_error(records=batch[:40]) in (ErrorCode.corrupt_message, ErrorCode.invalid_record)
        assert produce_error(records=batch, partition=-1) == ErrorCode.unknown_topic_or_partition

        # Odd fetch sizes: answered, without error and without data it cannot fit.
        for kwargs in ({"partition_max_bytes": -1}, {"partition_max_bytes": 0}, {"max_bytes": -5},
                       {"max_wait_ms": -1}):
            r = conn.request(fetch_request(0, **kwargs), fetch_resp.FetchResponse)
            assert r.error_code == ErrorCode.none
            assert r.responses[0].partitions[0].error_code == ErrorCode.none, kwargs
        r = conn.request(fetch_request(-1), fetch_resp.FetchResponse)
        assert r.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range

        # ListOffsets with timestamps that are not special values and a negative partition.
        for ts in (-3, -99, 2**62):
            r = conn.request(list_offsets_req.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
                list_offsets_req.ListOffsetsTopic(name=TOPIC, partitions=(
                    list_offsets_req.ListOffsetsPartition(partition_index=0, timestamp=ts),)),)),
                list_offsets_resp.ListOffsetsResponse)
            assert r.topics[0].partitions[0].error_code in (ErrorCode.none, ErrorCode.unsupported_version), ts

        # Bytes after a complete body are ignored, as Kafka's parser does (librdkafka 2.x
        # sends three of them after its Metadata v12 request for all topics).
        whole = encode_request(metadata_req.MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False), 77, "extra")
        conn.send_bytes(frame(whole[4:] + b"\x01\x00\x00"))
        correlation_id, md = decode_response(conn.read_frame(), metadata_resp.MetadataResponse)
        assert correlation_id == 77 and [t.name for t in md.topics] == [TOPIC]

        # Metadata for names that cannot be topics: an error per topic, nothing created.
        names = ["", ".", "..", "a/b", "x" * 300, "spaces are not allowed", "ok-but-missing"]
        r = conn.request(metadata_req.MetadataRequest(
            topics=tuple(metadata_req.MetadataRequestTopic(topic_id=None, name=n) for n in names),
            allow_auto_topic_creation=True, include_topic_authorized_operations=False),
            metadata_resp.MetadataResponse)
        errors = {t.name: t.error_code for t in r.topics}
        assert set(errors) == set(names)
        assert errors["ok-but-missing"] == ErrorCode.unknown_topic_or_partition
        assert all(errors[n] in (ErrorCode.invalid_topic_exception, ErrorCode.unknown_topic_or_partition)
                   for n in names)
    finally:
        conn.close()
    assert cluster.zk_client().get_children("/brokers/topics") == [TOPIC]
    assert_still_serving(cluster, target, bystander)


def test_pipelined_requests_are_answered_in_order(cluster: LocalCluster, target: int,
                                                  bystander: RawConnection) -> None:
    """Many requests written at once, mixing handlers that answer at once (ApiVersions) and
    ones that wait (acks=-1 produce, long-poll fetch): responses come back in request order."""
    conn = RawConnection(address_of(cluster, target))
    try:
        batch = build_batch([SimpleRecord(b"pipelined")], timestamp=int(time.time() * 1000))
        kinds = [
            (api_versions_v3_req.ApiVersionsRequest(client_software_name="c", client_software_version="1"),
             api_versions_v3.ApiVersionsResponse),
            (produce_request(batch), produce_resp.ProduceResponse),
            # min_bytes it cannot reach: parked in purgatory for max_wait
            (fetch_request(0, max_wait_ms=50, min_bytes=1 << 30), fetch_resp.FetchResponse),
            (metadata_req.MetadataRequest(topics=None, include_topic_authorized_operations=False),
             metadata_resp.MetadataResponse),
        ]
        plan = [kinds[i % len(kinds)] for i in range(40)]
        conn.send_bytes(b"".join(encode_request(p, 1000 + i, "pipeline") for i, (p, _) in enumerate(plan)))
        for i, (_, response_type) in enumerate(plan):
            correlation_id, _response = decode_response(conn.read_frame(), response_type)
            assert correlation_id == 1000 + i
    finally:
        conn.close()
    assert_still_serving(cluster, target, bystander)


def test_the_broker_log_has_no_fatal_errors(cluster: LocalCluster, target: int) -> None:
    """After all of the above (pytest runs this module in file order), the broker's log
    shows connections closed, not a broker in trouble."""
    log = cluster.brokers[target].log_path
    text = log.read_text(errors="replace")
    assert cluster.brokers[target].alive
    for bad in ("MemoryError", "Fatal", "Segmentation", "Killed", "shutting down"):
        assert bad not in text, bad
