"""TransactionsAdmin against two broker stand-ins on 127.0.0.1: which broker each request goes
to (ListTransactions to every broker, DescribeTransactions to the FindCoordinator answer,
DescribeProducers and WriteTxnMarkers to the partition leader), what the requests carry, the
retry of a retriable error, and errors turned into one-line failures."""

from __future__ import annotations

import asyncio
import datetime
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from odradek.admin.transactions import (
    AbortTransactionSpec,
    TransactionsAdmin,
    TransactionsCommandError,
)
from odradek.protocol.framing import FrameBuffer, decode_request, encode_response, response_schema
from odradek.protocol.messages import build

SUPPORTED = {18: (0, 3), 3: (0, 9), 10: (0, 3), 61: (0, 0), 27: (0, 1), 65: (0, 0), 66: (0, 0)}
START_MS = 1_700_000_000_000


class Stand:
    """Two brokers; broker 1 leads t-0 and coordinates ``app``."""

    def __init__(self) -> None:
        self.ports: dict[int, int] = {}
        self.servers: list[asyncio.Server] = []
        self.seen: list[tuple[int, int, Any]] = []  # broker id, api key, request
        self.marker_errors = [ErrorCode.not_leader_or_follower]  # answered to WriteTxnMarkers in turn
        self.describe_error = ErrorCode.none

    async def start(self) -> str:
        for broker_id in (0, 1):
            server = await asyncio.start_server(
                lambda r, w, b=broker_id: self._serve(b, r, w), "127.0.0.1", 0)
            self.servers.append(server)
            self.ports[broker_id] = server.sockets[0].getsockname()[1]
        return f"127.0.0.1:{self.ports[0]}"

    async def stop(self) -> None:
        for server in self.servers:
            server.close()

    async def _serve(self, broker_id: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameBuffer()
        try:
            while data := await reader.read(65536):
                frames.feed(data)
                while (frame := frames.next_frame()) is not None:
                    header, request = decode_request(frame)
                    self.seen.append((broker_id, header.api_key, request))
                    cls = response_schema(header.api_key, header.api_version)
                    assert cls is not None
                    m = sys.modules[cls.__module__]
                    writer.write(encode_response(self._answer(broker_id, header.api_key, m, request),
                                                 header.correlation_id))
                    await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    def _answer(self, broker_id: int, api_key: int, m: Any, request: Any) -> Any:
        if api_key == 18:
            return build(m.ApiVersionsResponse, error_code=ErrorCode.none, api_keys=tuple(
                build(m.ApiVersion, api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in SUPPORTED.items()))
        if api_key == 3:
            topics = []
            for t in request.topics or ():
                if t.name == "t":
                    topics.append(build(m.MetadataResponseTopic, error_code=ErrorCode.none, name="t", partitions=(
                        build(m.MetadataResponsePartition, error_code=ErrorCode.none, partition_index=0, leader_id=1,
                              replica_nodes=(1, 0), isr_nodes=(1, 0), offline_replicas=()),)))
                else:
                    topics.append(build(m.MetadataResponseTopic, error_code=ErrorCode.unknown_topic_or_partition,
                                        name=t.name, partitions=()))
            return build(m.MetadataResponse, controller_id=0, topics=tuple(topics), brokers=tuple(
                build(m.MetadataResponseBroker, node_id=b, host="127.0.0.1", port=p) for b, p in self.ports.items()))
        if api_key == 10:
            assert request.key_type == 1
            return build(m.FindCoordinatorResponse, error_code=ErrorCode.none, error_message=None, node_id=1,
                         host="127.0.0.1", port=self.ports[1])
        if api_key == 66:
            rows = {0: [("a0", 10, "Ongoing")], 1: [("app", 11, "CompleteCommit"), ("b1", 12, "PrepareAbort")]}
            return build(m.ListTransactionsResponse, error_code=ErrorCode.none, unknown_state_filters=(),
                         transaction_states=tuple(build(m.TransactionState, transactional_id=t, producer_id=p,
                                                        transaction_state=s) for t, p, s in rows[broker_id]))
        if api_key == 65:
            (txn_id,) = request.transactional_ids
            return build(m.DescribeTransactionsResponse, transaction_states=(build(
                m.TransactionState, error_code=self.describe_error, transactional_id=txn_id,
                transaction_state="Ongoing", transaction_timeout=60000,
                transaction_start_time=datetime.datetime.fromtimestamp(START_MS / 1000, datetime.UTC),
                producer_id=11, producer_epoch=4, topics=(build(m.TopicData, topic="t", partitions=(0, 2)),)),))
        if api_key == 61:
            error = ErrorCode.none if broker_id == 1 else ErrorCode.not_leader_or_follower
            return build(m.DescribeProducersResponse, topics=(build(m.TopicResponse, name="t", partitions=(build(
                m.PartitionResponse, partition_index=0, error_code=error, error_message=None, active_producers=(
                    build(m.ProducerState, producer_id=11, producer_epoch=4, last_sequence=9, last_timestamp=5,
                          coordinator_epoch=2, current_txn_start_offset=7),
                    build(m.ProducerState, producer_id=12, producer_epoch=0, last_sequence=1, last_timestamp=6,
                          coordinator_epoch=-1, current_txn_start_offset=-1),
                )),)),))
        if api_key == 27:
            error = self.marker_errors.pop(0) if self.marker_errors else ErrorCode.none
            return build(m.WriteTxnMarkersResponse, markers=tuple(build(
                m.WritableTxnMarkerResult, producer_id=marker.producer_id, topics=tuple(build(
                    m.WritableTxnMarkerTopicResult, name=t.name, partitions=tuple(build(
                        m.WritableTxnMarkerPartitionResult, partition_index=p, error_code=error)
                        for p in t.partition_indexes)) for t in marker.topics)) for marker in request.markers))
        raise AssertionError(f"unexpected api key {api_key}")


def run(body: Callable[[TransactionsAdmin, Stand], Awaitable[None]]) -> Stand:
    async def main() -> Stand:
        stand = Stand()
        bootstrap = await stand.start()
        try:
            async with TransactionsAdmin(bootstrap) as admin:
                await body(admin, stand)
        finally:
            await stand.stop()
        return stand

    return asyncio.run(main())


def sent(stand: Stand, api_key: int) -> list[tuple[int, Any]]:
    return [(b, r) for b, k, r in stand.seen if k == api_key]


def test_list_asks_every_broker_and_names_each_coordinator() -> None:
    async def body(admin: TransactionsAdmin, stand: Stand) -> None:
        listings = await admin.list_transactions()
        assert [(t.transactional_id, t.coordinator_id, t.producer_id, t.state) for t in listings] == [
            ("a0", 0, 10, "Ongoing"), ("app", 1, 11, "CompleteCommit"), ("b1", 1, 12, "PrepareAbort")]

    stand = run(body)
    assert sorted(b for b, _ in sent(stand, 66)) == [0, 1]


def test_describe_goes_to_the_transaction_coordinator() -> None:
    async def body(admin: TransactionsAdmin, stand: Stand) -> None:
        d = await admin.describe_transaction("app")
        assert (d.coordinator_id, d.producer_id, d.producer_epoch, d.state, d.timeout_ms) == (1, 11, 4, "Ongoing", 60000)
        assert d.start_time_ms == START_MS
        assert d.topic_partitions == (("t", 0), ("t", 2))

    stand = run(body)
    assert [b for b, _ in sent(stand, 65)] == [1]
    assert [r.key_type for _, r in sent(stand, 10)] == [1]


def test_describe_of_an_unknown_id_fails_in_one_line() -> None:
    async def body(admin: TransactionsAdmin, stand: Stand) -> None:
        stand.describe_error = ErrorCode.transactional_id_not_found
        with pytest.raises(TransactionsCommandError) as raised:
            await admin.describe_transaction("nobody")
        assert str(raised.value).startswith("Failed to describe transaction state of transactional-id `nobody`: ")
        assert "TRANSACTIONAL_ID_NOT_FOUND" in str(raised.value)
        assert "\n" not in str(raised.value)

    run(body)


def test_describe_producers_asks_the_leader_or_the_named_broker() -> None:
    async def body(admin: TransactionsAdmin, stand: Stand) -> None:
        producers = await admin.describe_producers("t", 0)
        assert [(p.producer_id, p.coordinator_epoch, p.current_txn_start_offset) for p in producers] == [
            (11, 2, 7), (12, -1, None)]
        with pytest.raises(TransactionsCommandError, match="Failed to describe producers for partition t-0 on broker 0"):
            await admin.describe_producers("t", 0, broker_id=0)
        with pytest.raises(TransactionsCommandError, match=r"on leader: .*UNKNOWN_TOPIC_OR_PARTITION"):
            await admin.describe_producers("gone", 0)

    stand = run(body)
    assert [b for b, _ in sent(stand, 61)] == [1, 0]  # the leader, then the broker named


def test_abort_writes_an_abort_marker_at_the_leader_and_retries_not_leader() -> None:
    async def body(admin: TransactionsAdmin, stand: Stand) -> None:
        spec = await admin.abort_spec("t", 0, 7)
        assert spec == AbortTransactionSpec("t", 0, 11, 4, 2)
        await admin.abort_transaction(spec)

    stand = run(body)
    markers = sent(stand, 27)
    assert [b for b, _ in markers] == [1, 1]  # NOT_LEADER_OR_FOLLOWER once, then written
    marker = markers[-1][1].markers[0]
    assert (marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch) == (
        11, 4, False, 2)
    assert [(t.name, tuple(t.partition_indexes)) for t in marker.topics] == [("t", (0,))]


def test_abort_refused_by_the_leader_fails_in_one_line() -> None:
    async def body(admin: TransactionsAdmin, stand: Stand) -> None:
        stand.marker_errors = [ErrorCode.invalid_producer_epoch]
        with pytest.raises(TransactionsCommandError) as raised:
            await admin.abort_transaction(AbortTransactionSpec("t", 0, 11, 3, 2))
        assert str(raised.value).startswith("Failed to abort transaction AbortTransactionSpec(topicPartition=t-0")
        assert "INVALID_PRODUCER_EPOCH" in str(raised.value)

    stand = run(body)
    assert len(sent(stand, 27)) == 1
