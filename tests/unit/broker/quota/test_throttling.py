"""Quotas on the request path (broker/quota/throttling.py, apis/fetch.py) on a FakeBroker: the
throttle time in the answer and the muted connection (KIP-219), the fetch quota's empty answer,
the request-time quota, and what is exempt."""

from __future__ import annotations

import datetime
import time

from fake_broker import (
    CLIENT_ID,
    OTHER_BROKER,
    FakeBroker,
    FakeConnection,
    WithBroker,
    decode_answer,
)
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.fetch.v12 import response as fetch_resp
from kio.schema.list_groups.v4 import request as list_groups_req
from kio.schema.list_groups.v4 import response as list_groups_resp
from kio.schema.produce.v9 import request as produce_req
from kio.schema.produce.v9 import response as produce_resp
from kio.static.primitive import i32

from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import SimpleRecord, build_batch
from odradek.zk.zk_data import ClientQuotaEntity

T = "quoted"


def produce(value_bytes: int, acks: int = 1) -> produce_req.ProduceRequest:
    records = build_batch([SimpleRecord(b"x" * value_bytes)], timestamp=time.time_ns() // 1_000_000)
    return produce_req.ProduceRequest(
        transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=5), topic_data=(
            produce_req.TopicProduceData(name=T, partition_data=(
                produce_req.PartitionProduceData(index=i32(0), records=records),)),))


def fetch(offset: int, replica_id: int = -1, session_epoch: int = -1) -> fetch_req.FetchRequest:
    return fetch_req.FetchRequest(
        replica_id=i32(replica_id), max_wait=datetime.timedelta(0), min_bytes=i32(1), max_bytes=i32(50 << 20),
        session_id=i32(0), session_epoch=i32(session_epoch), topics=(fetch_req.FetchTopic(topic=T, partitions=(
            fetch_req.FetchPartition(partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=offset,
                                     partition_max_bytes=i32(10 << 20)),)),), forgotten_topics_data=())


def muted_for_ms(connection: FakeConnection) -> float:
    until = connection.channel.muted_until_ns
    return 0 if until is None else (until - time.monotonic_ns()) / 1e6


def test_without_quotas_nothing_is_recorded_or_muted(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead(T, [0])
        connection = FakeConnection()
        for _ in range(5):
            response = await b.call(produce(100_000), produce_resp.ProduceResponse, connection=connection)
            assert response.throttle_time == datetime.timedelta(0)
        assert connection.channel.muted_until_ns is None
        assert not b.quotas.enabled
    with_broker(body)


def test_a_producer_over_its_byte_rate_is_told_and_muted(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead(T, [0])
        b.quotas.update(ClientQuotaEntity(None, CLIENT_ID), {"producer_byte_rate": "10000"})
        connection = FakeConnection()
        # 10 windows' worth (100,000 bytes) goes through; then each request earns a throttle.
        first = await b.call(produce(90_000), produce_resp.ProduceResponse, connection=connection)
        assert first.throttle_time == datetime.timedelta(0) and connection.channel.muted_until_ns is None
        second = await b.call(produce(50_000), produce_resp.ProduceResponse, connection=connection)
        throttle_ms = second.throttle_time.total_seconds() * 1000
        assert 3000 < throttle_ms < 5000  # ~140 KB over 10 s against 10 KB/s
        assert throttle_ms - 100 < muted_for_ms(connection) <= throttle_ms
        assert [p.error_code for t in second.responses for p in t.partition_responses] == [E.none]
        # Another client id has no quota.
        other = FakeConnection()
        third = await b.call(produce(50_000), produce_resp.ProduceResponse, connection=other, client_id="free")
        assert third.throttle_time == datetime.timedelta(0) and other.channel.muted_until_ns is None
    with_broker(body)


def test_an_acks_all_answer_carries_the_throttle_when_it_comes(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead(T, [0])
        b.quotas.update(ClientQuotaEntity("ANONYMOUS", None), {"producer_byte_rate": "1000"})
        connection = FakeConnection()
        response = await b.call(produce(20_000, acks=-1), produce_resp.ProduceResponse, connection=connection)
        assert response.throttle_time.total_seconds() > 5
        assert muted_for_ms(connection) > 5000
        # acks=0: no answer, but the connection is muted all the same.
        quiet = FakeConnection()
        assert b.send(produce(20_000, acks=0), quiet) is None
        assert muted_for_ms(quiet) > 5000
    with_broker(body)


def test_a_consumer_over_its_byte_rate_gets_an_empty_answer(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead(T, [0])
        for _ in range(4):
            await b.call(produce(30_000), produce_resp.ProduceResponse)
        b.quotas.update(ClientQuotaEntity(None, "<default>"), {"consumer_byte_rate": "5000"})
        connection = FakeConnection()
        # The fetch size is capped at what the quota allows in a window (50,000 bytes): two batches.
        first = await b.call(fetch(0), fetch_resp.FetchResponse, connection=connection)
        assert first.throttle_time == datetime.timedelta(0)
        assert sum(len(p.records or b"") for t in first.responses for p in t.partitions) < 90_000
        second = await b.call(fetch(1), fetch_resp.FetchResponse, connection=connection)
        assert second.throttle_time.total_seconds() > 1 and second.responses == ()
        assert muted_for_ms(connection) > 1000
        # What the empty answer did not send was taken back: after the throttle, the rate is at the quota.
        assert b.quotas.fetch.record("ANONYMOUS", CLIENT_ID, 0) == 0
    with_broker(body)


def test_followers_are_exempt(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead(T, [0])
        await b.call(produce(30_000), produce_resp.ProduceResponse)
        b.quotas.update(ClientQuotaEntity(None, "<default>"), {"consumer_byte_rate": "1", "request_percentage": "0"})
        connection = FakeConnection()
        for _ in range(3):
            response = await b.call(fetch(0, replica_id=OTHER_BROKER), fetch_resp.FetchResponse, connection=connection)
            assert response.throttle_time == datetime.timedelta(0)
        assert connection.channel.muted_until_ns is None
    with_broker(body)


def test_handler_time_over_the_request_quota_is_throttled(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        b.quotas.update(ClientQuotaEntity(None, CLIENT_ID), {"request_percentage": "0.000001"})
        connection = FakeConnection()
        answer = b.send(list_groups_req.ListGroupsRequest(states_filter=()), connection)
        response = decode_answer(answer, list_groups_resp.ListGroupsResponse)
        assert response.error_code == E.none
        assert response.throttle_time.total_seconds() > 0
        assert muted_for_ms(connection) > 0
    with_broker(body)
