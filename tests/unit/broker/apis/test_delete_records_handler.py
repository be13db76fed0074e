"""DeleteRecords on a FakeBroker: answered at once when the leader is the only live replica,
later (here: REQUEST_TIMED_OUT at the request's timeout) when a live follower, in the ISR or
not, has not reported the new log start; the offsets that cannot be deleted are refused."""

from __future__ import annotations

import asyncio
import datetime

from control_helpers import lai_state, leader_and_isr, um_broker, um_state, update_metadata
from fake_broker import BROKER_ID, OTHER_BROKER, FakeBroker, FakeConnection, WithBroker
from kio.schema.delete_records.v2 import request as req
from kio.schema.delete_records.v2 import response as resp

from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import SimpleRecord, build_batch

TP = TopicPartition("t", 0)


def delete_records(topic: str, offsets: dict[int, int], timeout_ms: int = 30_000) -> req.DeleteRecordsRequest:
    return req.DeleteRecordsRequest(timeout=datetime.timedelta(milliseconds=timeout_ms), topics=(
        req.DeleteRecordsTopic(name=topic, partitions=tuple(
            req.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in offsets.items())),))


def answers(response: resp.DeleteRecordsResponse) -> dict[int, tuple[ErrorCode, int]]:
    return {p.partition_index: (p.error_code, p.low_watermark) for t in response.topics for p in t.partitions}


async def with_records(b: FakeBroker, replicas: tuple[int, ...], alive: tuple[int, ...]) -> None:
    """t-0 led here (ISR: this broker alone) over ``replicas``, with 10 records."""
    async with b.replica_manager.state_change_lock:
        await b.replica_manager.become_leader_or_follower(1, leader_and_isr(
            [lai_state(0, BROKER_ID, 0, (BROKER_ID,), replicas)]))
    b.metadata_cache.update(update_metadata({"t": (None, [um_state(0, BROKER_ID, 0, (BROKER_ID,), replicas)])},
                                            [um_broker(broker) for broker in alive]))
    results, _ = b.replica_manager.append_records(1, 1_000, [("t", 0, build_batch([SimpleRecord(b"v")] * 10))])
    assert results[TP].error == ErrorCode.none


def test_the_only_live_replica_answers_at_once(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await with_records(b, (BROKER_ID, OTHER_BROKER), alive=(BROKER_ID,))
        answer = b.send(delete_records("t", {0: 4}), FakeConnection())
        assert isinstance(answer, bytes)  # not a future: nothing to wait for
        assert answers(await b.call(delete_records("t", {0: -1}), resp.DeleteRecordsResponse)) == {
            0: (ErrorCode.none, 10)}
        assert answers(await b.call(delete_records("t", {0: 11}), resp.DeleteRecordsResponse)) == {
            0: (ErrorCode.offset_out_of_range, -1)}
        assert answers(await b.call(delete_records("nope", {0: 1}), resp.DeleteRecordsResponse)) == {
            0: (ErrorCode.unknown_topic_or_partition, -1)}

    with_broker(body)


def test_a_live_follower_outside_the_isr_is_waited_for_until_the_timeout(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await with_records(b, (BROKER_ID, OTHER_BROKER), alive=(BROKER_ID, OTHER_BROKER))
        answer = b.send(delete_records("t", {0: 4}, timeout_ms=20), FakeConnection())
        assert isinstance(answer, asyncio.Future) and not answer.done()
        response = await b.call(delete_records("t", {0: 4}, timeout_ms=20), resp.DeleteRecordsResponse)
        # The low watermark is the follower's log start as the leader knows it: none reported yet.
        assert answers(response) == {0: (ErrorCode.request_timed_out, -1)}
        assert b.replica_manager.partitions[TP].log.log_start_offset == 4  # type: ignore[union-attr]
        await answer

    with_broker(body)

