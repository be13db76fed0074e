"""Kafka requests sent straight to one broker through odradek's own connection class: what
that broker answers right now, with no client library choosing brokers or retrying."""

from __future__ import annotations

import asyncio
import datetime
import socket
import ssl
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.fetch.v12 import response as fetch_resp
from kio.schema.list_offsets.v7 import request as list_offsets_req
from kio.schema.list_offsets.v7 import response as list_offsets_resp
from kio.schema.metadata.v12 import request as metadata_req
from kio.schema.metadata.v12 import response as metadata_resp
from kio.schema.produce.v9 import request as produce_req
from kio.schema.produce.v9 import response as produce_resp

from odradek.local.cluster import LocalCluster
from odradek.net.client import BrokerConnection
from odradek.protocol.errors import ErrorCode
from odradek.protocol.framing import decode_response, encode_request
from odradek.protocol.records import HEADER_SIZE, RecordBatchHeader, iter_batches
from odradek.security.client import ClientSecurity

__all__ = [
    "EARLIEST",
    "LATEST",
    "Address",
    "PartitionInfo",
    "RawConnection",
    "address_of",
    "batch_headers",
    "fetch_records",
    "kafka_request",
    "list_offset",
    "metadata",
    "partitions_of",
    "produce_records",
    "raw_frame",
    "raw_header",
]

Address = tuple[str, int]

class RawConnection:
    """A blocking Kafka connection to one port (optionally TLS) that sends requests and raw
    size-prefixed frames and reads frames back: for checking what a broker does with exactly
    these bytes (SASL exchanges, refusals, fuzzing)."""

    def __init__(self, port: int, tls_ctx: ssl.SSLContext | None = None, timeout_s: float = 30.0,
                 client_id: str = "raw-test") -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.sock = tls_ctx.wrap_socket(sock, server_hostname="localhost") if tls_ctx else sock
        self.correlation = 0
        self.client_id = client_id

    def send(self, payload: Any) -> None:
        self.correlation += 1
        self.sock.sendall(encode_request(payload, self.correlation, self.client_id))

    def request(self, payload: Any, response_type: type) -> Any:
        self.send(payload)
        correlation, response = decode_response(self.read_frame(), response_type)
        assert correlation == self.correlation
        return response

    def raw(self, token: bytes) -> bytes:
        """Send one raw size-prefixed frame (a SaslHandshake v0 token) and read the answer."""
        self.sock.sendall(struct.pack(">i", len(token)) + token)
        return self.read_frame()

    def read_frame(self) -> bytes:
        frame = self.frame()
        if frame is None:
            raise ConnectionError("closed by the broker")
        return frame

    def frame(self) -> bytes | None:
        """The next frame, or None once the broker has closed (or reset) the connection."""
        head = self._read(4)
        if head is None:
            return None
        return self._read(struct.unpack(">i", head)[0])

    def _read(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            try:
                chunk = self.sock.recv(n - len(data))
            except (ConnectionError, ssl.SSLError, TimeoutError):
                return None
            if not chunk:
                return None
            data += chunk
        return data

    def closed_by_broker(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionError, ssl.SSLError):
            return True

    def close(self) -> None:
        self.sock.close()


# ListOffsets timestamps that ask for the log end and the log start.
LATEST = -1
EARLIEST = -2


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition as a broker's Metadata answer shows it."""

    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def address_of(cluster: LocalCluster, broker_id: int) -> Address:
    """Where one broker of a local cluster listens."""
    return "127.0.0.1", cluster.brokers[broker_id].port


def kafka_request(address: Address, payload: Any, response_type: type[Any], timeout_s: float = 30.0, *,
                  security: ClientSecurity | None = None) -> Any:
    """Send one request on a fresh :class:`BrokerConnection` (secured as ``security`` says)
    and return the decoded response."""

    async def call() -> Any:
        conn = BrokerConnection(address[0], address[1], "odradek-tests", security=security)
        await conn.connect(timeout_s=10)
        try:
            return await conn.send(payload, response_type, timeout_s=timeout_s)
        finally:
            await conn.close()

    return asyncio.run(call())


def metadata(address: Address, topics: Sequence[str] | None, timeout_s: float = 30.0, *,
             security: ClientSecurity | None = None, operations: bool = False) -> Any:
    """One broker's own Metadata v12 answer, from its metadata cache as it is now
    (``topics=None``: all topics; ``operations``: with each topic's authorized operations)."""
    request = metadata_req.MetadataRequest(
        topics=None if topics is None else tuple(
            metadata_req.MetadataRequestTopic(topic_id=None, name=t) for t in topics),
        allow_auto_topic_creation=False, include_topic_authorized_operations=operations)
    return kafka_request(address, request, metadata_resp.MetadataResponse, timeout_s=timeout_s, security=security)


def partitions_of(address: Address, topic: str, *, security: ClientSecurity | None = None
                  ) -> dict[int, PartitionInfo] | None:
    """What one broker's metadata says about a topic (None when it does not know it)."""
    response = metadata(address, [topic], security=security)
    (t,) = response.topics
    if t.error_code != ErrorCode.none:
        return None
    return {p.partition_index: PartitionInfo(p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes))
            for p in t.partitions}


def list_offset(address: Address, topic: str, partition: int, timestamp: int) -> tuple[ErrorCode, int, int]:
    """ListOffsets v7 for one partition: (error, offset, timestamp)."""
    request = list_offsets_req.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        list_offsets_req.ListOffsetsTopic(name=topic, partitions=(
            list_offsets_req.ListOffsetsPartition(partition_index=partition, timestamp=timestamp),)),))
    response = kafka_request(address, request, list_offsets_resp.ListOffsetsResponse)
    (p,) = response.topics[0].partitions
    return p.error_code, p.offset, p.timestamp


def produce_records(address: Address, topic: str, partition: int, records: bytes | None, acks: int = -1,
                    timeout_ms: int = 10_000) -> Any:
    """Produce v9 of one record batch (or any bytes) to one partition: its PartitionProduceResponse."""
    request = produce_req.ProduceRequest(
        acks=acks, timeout=datetime.timedelta(milliseconds=timeout_ms), topic_data=(
            produce_req.TopicProduceData(name=topic, partition_data=(
                produce_req.PartitionProduceData(index=partition, records=records),)),))
    response = kafka_request(address, request, produce_resp.ProduceResponse, timeout_s=timeout_ms / 1000 + 30)
    (t,) = response.responses
    (p,) = t.partition_responses
    return p


def fetch_records(address: Address, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20,
                  max_wait_ms: int = 0) -> Any:
    """Fetch v12 (as a consumer) for one partition: its PartitionData."""
    request = fetch_req.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1, max_bytes=max_bytes,
        topics=(fetch_req.FetchTopic(topic=topic, partitions=(fetch_req.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes),)),),
        forgotten_topics_data=())
    response = kafka_request(address, request, fetch_resp.FetchResponse)
    assert response.error_code == ErrorCode.none, response.error_code
    (t,) = response.responses
    (p,) = t.partitions
    return p


def batch_headers(address: Address, topic: str, partition: int) -> list[RecordBatchHeader]:
    """The headers of every batch in a partition (from offset 0), read with raw fetches."""
    return [h for h, _ in stored_batches(address, topic, partition)]


def stored_batches(address: Address, topic: str, partition: int) -> list[tuple[RecordBatchHeader, bytes]]:
    """Every batch in a partition (from offset 0) as its header and its records section (as
    stored: compressed if the batch is), read with raw fetches."""
    out: list[tuple[RecordBatchHeader, bytes]] = []
    offset = 0
    while True:
        p = fetch_records(address, topic, partition, offset)
        assert p.error_code == ErrorCode.none, p.error_code
        buf = p.records or b""
        batches = [(h, bytes(buf[at + HEADER_SIZE:at + h.size]))
                   for at, h in iter_batches(buf, partial_tail_ok=True)]
        if not batches:
            return out
        out += batches
        offset = batches[-1][0].next_offset


_FRAME_SIZE = struct.Struct(">i")


def raw_frame(body: bytes) -> bytes:
    """``body`` behind its size prefix, bytes as they go on the wire (for malformed requests)."""
    return _FRAME_SIZE.pack(len(body)) + body


def raw_header(api_key: int, version: int, correlation_id: int = 7, *, flexible: bool = False,
               client_id: bytes = b"raw") -> bytes:
    """Request header v1 (v2 with ``flexible``: an empty tagged-field section), by hand."""
    out = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return out + (b"\x00" if flexible else b"")
