"""Fetch from the closest replica (KIP-392) on a FakeBroker with real logs: a leader with
``replica.selector.class`` sends a consumer of another rack to that rack's replica, and a
follower serves consumers that send their rack (Fetch v11+) up to its high watermark."""

from __future__ import annotations

import asyncio
import datetime
import time
from typing import Any

from control_helpers import lai_state, leader_and_isr, um_broker, um_state, update_metadata
from fake_broker import BROKER_ID, OTHER_BROKER, FakeBroker, WithBroker
from kio.schema.fetch.v10 import request as fetch_v10
from kio.schema.fetch.v10 import response as fetch_v10_resp
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.fetch.v12 import response as fetch_v12_resp
from kio.static.primitive import i32

from odradek.broker.delayed_fetch import FetchPartitionRequest
from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import SimpleRecord, build_batch, iter_batches

RACK_AWARE = {"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
FAR_FOLLOWER = 2  # alive, in rack r2, never fetched: its log reaches no offset


def fetch(offset: int, *, rack: str | None, topic: str = "t", max_wait_ms: int = 0) -> Any:
    """A consumer's fetch of partition 0: v12 with ``rack``, or v10 (no rack) when None."""
    schema = fetch_v10 if rack is None else fetch_v12
    request = schema.FetchRequest(
        replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=i32(1),
        session_id=i32(0), session_epoch=i32(-1), forgotten_topics_data=(),
        topics=(schema.FetchTopic(topic=topic, partitions=(schema.FetchPartition(
            partition=i32(0), current_leader_epoch=i32(0), fetch_offset=offset, partition_max_bytes=i32(1 << 20)),)),),
        **({} if rack is None else {"rack_id": rack}))
    return request


async def fetched(b: FakeBroker, request: Any) -> Any:
    response_type = fetch_v10_resp.FetchResponse if isinstance(request, fetch_v10.FetchRequest) \
        else fetch_v12_resp.FetchResponse
    response = await b.call(request, response_type)
    [topic] = response.responses
    [partition] = topic.partitions
    return partition


def batch(base_offset: int) -> bytes:
    return build_batch([SimpleRecord(b"v")], base_offset=base_offset, partition_leader_epoch=0,
                       timestamp=time.time_ns() // 1_000_000)


async def lead_with_followers(b: FakeBroker) -> None:
    """Broker 0 (rack r0) leads t-0 with followers 1 (r1, in the ISR, caught up at offset 1)
    and 2 (r2, out of the ISR, never fetched); one record is committed."""
    brokers = [um_broker(BROKER_ID, "r0"), um_broker(OTHER_BROKER, "r1"), um_broker(FAR_FOLLOWER, "r2")]
    replicas, isr = (BROKER_ID, OTHER_BROKER, FAR_FOLLOWER), (BROKER_ID, OTHER_BROKER)
    rm = b.replica_manager
    async with rm.state_change_lock:
        await rm.become_leader_or_follower(1, leader_and_isr([lai_state(0, BROKER_ID, 0, isr, replicas)]))
    b.metadata_cache.update(update_metadata({"t": (None, [um_state(0, BROKER_ID, 0, isr, replicas)])}, brokers))
    rm.append_records(1, 1000, [("t", 0, bytearray(batch(0)))])
    follower_fetch = rm.fetch_messages(OTHER_BROKER, 0, 1, 1 << 20, [FetchPartitionRequest("t", 0, 1, 1 << 20)])
    assert not isinstance(follower_fetch, asyncio.Future)
    assert rm.partitions[TopicPartition("t", 0)].high_watermark == 1


def test_a_leader_sends_a_consumer_to_the_replica_of_its_rack(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await lead_with_followers(b)
        elsewhere = await fetched(b, fetch(0, rack="r1"))
        assert (elsewhere.error_code, elsewhere.preferred_read_replica) == (E.none, OTHER_BROKER)
        assert not elsewhere.records and elsewhere.high_watermark == 1
        # Even a long poll answers at once: the consumer is to go elsewhere.
        assert (await fetched(b, fetch(0, rack="r1", max_wait_ms=10_000))).preferred_read_replica == OTHER_BROKER
        # The leader's own rack, no rack, an unknown rack, a replica that lacks the offset,
        # and a consumer too old to send a rack: read here.
        for request in (fetch(0, rack="r0"), fetch(0, rack=""), fetch(0, rack="r9"), fetch(0, rack="r2")):
            here = await fetched(b, request)
            assert (here.error_code, here.preferred_read_replica) == (E.none, -1)
            assert [h.base_offset for _, h in iter_batches(here.records)] == [0]
        old = await fetched(b, fetch(0, rack=None))
        assert old.error_code == E.none and [h.base_offset for _, h in iter_batches(old.records)] == [0]
    with_broker(body, props=RACK_AWARE)


def test_without_a_selector_consumers_read_from_the_leader(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await lead_with_followers(b)
        here = await fetched(b, fetch(0, rack="r1"))
        assert here.preferred_read_replica == -1 and [h.base_offset for _, h in iter_batches(here.records)] == [0]
    with_broker(body)


def test_a_follower_serves_consumers_that_send_a_rack_up_to_its_high_watermark(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("u", [0], leader=OTHER_BROKER)
        p = b.replica_manager.partitions[TopicPartition("u", 0)]
        assert p.log is not None
        p.log.append_as_follower(batch(0) + batch(1))
        p.log.update_high_watermark(1)
        served = await fetched(b, fetch(0, rack="", topic="u"))
        assert served.error_code == E.none and served.high_watermark == 1
        assert [h.base_offset for _, h in iter_batches(served.records)] == [0]  # not past the high watermark
        assert (await fetched(b, fetch(0, rack=None, topic="u"))).error_code == E.not_leader_or_follower

        # A long poll at the high watermark waits for the leader's next one to arrive.
        waiting = asyncio.ensure_future(fetched(b, fetch(1, rack="", topic="u", max_wait_ms=10_000)))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        p.log.update_high_watermark(2)
        b.replica_manager.wake_fetches(TopicPartition("u", 0))
        woken = await asyncio.wait_for(waiting, 5)
        assert [h.base_offset for _, h in iter_batches(woken.records)] == [1]
    with_broker(body, props=RACK_AWARE)
