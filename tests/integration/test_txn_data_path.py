"""The transactional data path on real brokers, driven with raw requests (no transaction
coordinator involved): transactional Produce, WriteTxnMarkers, read_committed Fetch and
ListOffsets bounded by the last stable offset, aborted transactions in Fetch responses,
DescribeProducers.  KIP-890 verification is switched off so a transactional batch can be
written without AddPartitionsToTxn."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.describe_producers.v0 import request as dp_req
from kio.schema.describe_producers.v0 import response as dp_resp
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.fetch.v12 import response as fetch_resp
from kio.schema.list_offsets.v7 import request as lo_req
from kio.schema.list_offsets.v7 import response as lo_resp
from kio.schema.produce.v9 import request as produce_req
from kio.schema.produce.v9 import response as produce_resp
from kio.schema.write_txn_markers.v1 import request as wtm_req
from kio.schema.write_txn_markers.v1 import response as wtm_resp

from odradek.local.cluster import LocalCluster
from odradek.net.client import BrokerConnection
from odradek.protocol.control_records import ControlRecordType, decode_end_txn_marker
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import SimpleRecord, build_batch, iter_batches
from support import (
    ClusterFactory,
    address_of,
    create_topic,
    kafka_request,
    partitions_of,
    wait_until,
)

TOPIC = "txn-data"
PID, EPOCH = 9_000_001, 0
COORDINATOR_EPOCH = 3


@pytest.fixture(scope="module")
def cluster(zookeeper: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("txn-data"))
    try:
        c = factory(3, overrides={"transaction.partition.verification.enable": "false"})
        create_topic(c, TOPIC, 1, 3, {"min.insync.replicas": "2"})
        yield c
    finally:
        factory.stop_all()


def leader_and_follower(cluster: LocalCluster) -> tuple[tuple[str, int], tuple[str, int]]:
    info = partitions_of(address_of(cluster, 0), TOPIC)
    assert info is not None
    leader = info[0].leader
    follower = next(r for r in info[0].replicas if r != leader)
    return address_of(cluster, leader), address_of(cluster, follower)


def produce(address: tuple[str, int], records: bytes, transactional_id: str | None) -> Any:
    request = produce_req.ProduceRequest(
        transactional_id=transactional_id, acks=-1, timeout=datetime.timedelta(seconds=10),
        topic_data=(produce_req.TopicProduceData(name=TOPIC, partition_data=(
            produce_req.PartitionProduceData(index=0, records=records),)),))
    return kafka_request(address, request, produce_resp.ProduceResponse).responses[0].partition_responses[0]


def txn_batch(seq: int, value: bytes) -> bytes:
    return build_batch([SimpleRecord(value)], producer_id=PID, producer_epoch=EPOCH, base_sequence=seq,
                       is_transactional=True, timestamp=time.time_ns() // 1_000_000)


def fetch_request(offset: int, isolation_level: int, max_wait_ms: int = 0) -> Any:
    return fetch_req.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1, max_bytes=1 << 20,
        isolation_level=isolation_level,
        topics=(fetch_req.FetchTopic(topic=TOPIC, partitions=(fetch_req.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=())


def fetch(address: tuple[str, int], offset: int, isolation_level: int) -> Any:
    response = kafka_request(address, fetch_request(offset, isolation_level), fetch_resp.FetchResponse)
    return response.responses[0].partitions[0]


def latest(address: tuple[str, int], isolation_level: int) -> int:
    request = lo_req.ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=(
        lo_req.ListOffsetsTopic(name=TOPIC, partitions=(
            lo_req.ListOffsetsPartition(partition_index=0, timestamp=-1),)),))
    (p,) = kafka_request(address, request, lo_resp.ListOffsetsResponse).topics[0].partitions
    assert p.error_code == ErrorCode.none
    return p.offset


def markers_request(commit: bool, topic: str = TOPIC, partition: int = 0) -> Any:
    return wtm_req.WriteTxnMarkersRequest(markers=(wtm_req.WritableTxnMarker(
        producer_id=PID, producer_epoch=EPOCH, transaction_result=commit, coordinator_epoch=COORDINATOR_EPOCH,
        topics=(wtm_req.WritableTxnMarkerTopic(name=topic, partition_indexes=(partition,)),)),))


def write_markers(address: tuple[str, int], commit: bool, topic: str = TOPIC) -> ErrorCode:
    response = kafka_request(address, markers_request(commit, topic), wtm_resp.WriteTxnMarkersResponse)
    (m,) = response.markers
    assert m.producer_id == PID
    return m.topics[0].partitions[0].error_code


def producers(address: tuple[str, int], topic: str = TOPIC) -> Any:
    request = dp_req.DescribeProducersRequest(topics=(dp_req.TopicRequest(name=topic, partition_indexes=(0,)),))
    return kafka_request(address, request, dp_resp.DescribeProducersResponse).topics[0].partitions[0]


def test_transactional_batches_need_a_transactional_id(cluster: LocalCluster) -> None:
    leader, _ = leader_and_follower(cluster)
    p = produce(leader, txn_batch(0, b"no-id"), None)
    assert p.error_code == ErrorCode.transactional_id_authorization_failed
    assert latest(leader, 0) == 0


def test_an_aborted_then_a_committed_transaction(cluster: LocalCluster) -> None:
    leader, follower = leader_and_follower(cluster)
    p = produce(leader, txn_batch(0, b"aborted"), "raw-txn")
    assert (p.error_code, p.base_offset) == (ErrorCode.none, 0)

    # Ongoing: read_committed sees nothing past the LSO; read_uncommitted reads to the HW.
    committed = fetch(leader, 0, 1)
    assert (committed.error_code, committed.last_stable_offset, committed.high_watermark) == (ErrorCode.none, 0, 1)
    assert not committed.records
    uncommitted = fetch(leader, 0, 0)
    assert uncommitted.records and uncommitted.last_stable_offset == 0
    assert (latest(leader, 1), latest(leader, 0)) == (0, 1)
    state = producers(leader)
    assert state.error_code == ErrorCode.none
    assert [(s.producer_id, s.producer_epoch, s.last_sequence, s.current_txn_start_offset)
            for s in state.active_producers] == [(PID, EPOCH, 0, 0)]
    # Any replica answers from its own log (Kafka's Partition.activeProducerState), once it has the batch.
    wait_until(lambda: [(s.producer_id, s.current_txn_start_offset) for s in producers(follower).active_producers]
               == [(PID, 0)], message="the follower's producer state")
    assert producers(leader, "no-such-topic").error_code == ErrorCode.unknown_topic_or_partition

    # Markers go to the leader only.
    assert write_markers(follower, False) == ErrorCode.not_leader_or_follower
    assert write_markers(leader, False) == ErrorCode.none

    done = fetch(leader, 0, 1)
    assert (done.last_stable_offset, done.high_watermark) == (2, 2)
    assert [(a.producer_id, a.first_offset) for a in done.aborted_transactions] == [(PID, 0)]
    batches = [(h, bytes(done.records[pos:pos + h.size])) for pos, h in iter_batches(done.records)]
    assert [h.base_offset for h, _ in batches] == [0, 1]
    assert batches[1][0].is_control
    assert decode_end_txn_marker(batches[1][1]) == (ControlRecordType.ABORT, COORDINATOR_EPOCH)
    (after,) = producers(leader).active_producers
    assert (after.current_txn_start_offset, after.coordinator_epoch) == (-1, COORDINATOR_EPOCH)

    # A read_committed fetch waiting at the LSO is answered as soon as the commit marker lands.
    assert produce(leader, txn_batch(1, b"committed"), "raw-txn").error_code == ErrorCode.none

    async def wait_then_commit() -> tuple[Any, float]:
        conn = BrokerConnection(leader[0], leader[1], "txn-data-test")
        await conn.connect()
        try:
            started = time.monotonic()
            waiting = asyncio.ensure_future(conn.send(fetch_request(2, 1, max_wait_ms=20_000),
                                                      fetch_resp.FetchResponse))
            await asyncio.sleep(0.5)
            assert not waiting.done()
            answer = await conn.send(markers_request(True), wtm_resp.WriteTxnMarkersResponse)
            assert answer.markers[0].topics[0].partitions[0].error_code == ErrorCode.none
            response = await waiting
            return response.responses[0].partitions[0], time.monotonic() - started
        finally:
            await conn.close()

    answered, took = asyncio.run(wait_then_commit())
    assert took < 10
    assert answered.last_stable_offset == 4 and answered.records
    assert list(answered.aborted_transactions) == []
    assert latest(leader, 1) == 4

    # The followers replicate the markers: every replica holds the same bytes.
    def replica_logs() -> set[bytes]:
        return {b"".join(f.read_bytes() for f in sorted(
            (cluster.brokers[b].config_path.parent / "data" / f"{TOPIC}-0").glob("*.log"))) for b in range(3)}

    wait_until(lambda: len(replica_logs()) == 1, message="identical replica logs")


def test_markers_for_unknown_partitions(cluster: LocalCluster) -> None:
    leader, _ = leader_and_follower(cluster)
    assert write_markers(leader, True, "no-such-topic") == ErrorCode.unknown_topic_or_partition
