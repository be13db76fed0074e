"""A leader's answer to a follower whose log diverged (KIP-595, Fetch v12): Kafka 2.7+ followers
name the epoch of their last batch and truncate where the leader says that epoch ends, instead
of asking OffsetForLeaderEpoch; a leader that ignored it would leave a Kafka follower with a
tail the leader never had (seen in a mixed Kafka/odradek cluster)."""

from __future__ import annotations

import datetime
import time
from typing import Any

from control_helpers import lai_state, leader_and_isr, um_broker, um_state, update_metadata
from fake_broker import BROKER_ID, OTHER_BROKER, FakeBroker, WithBroker
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.fetch.v12 import response as fetch_v12_resp
from kio.static.primitive import i32

from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import SimpleRecord, build_batch, iter_batches


def follower_fetch(offset: int, last_fetched_epoch: int, *, max_wait_ms: int = 0) -> Any:
    return fetch_v12.FetchRequest(
        replica_id=i32(OTHER_BROKER), max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=i32(1),
        session_id=i32(0), session_epoch=i32(-1), forgotten_topics_data=(), rack_id="",
        topics=(fetch_v12.FetchTopic(topic="t", partitions=(fetch_v12.FetchPartition(
            partition=i32(0), current_leader_epoch=i32(1), fetch_offset=offset, partition_max_bytes=i32(1 << 20),
            last_fetched_epoch=i32(last_fetched_epoch)),)),))


async def answer(b: FakeBroker, request: Any) -> Any:
    [topic] = (await b.call(request, fetch_v12_resp.FetchResponse)).responses
    [partition] = topic.partitions
    return partition


async def lead_two_epochs(b: FakeBroker) -> None:
    """Broker 0 leads t-0 with follower 1: offsets 0-1 written in epoch 0, offset 2 in epoch 1."""
    replicas = (BROKER_ID, OTHER_BROKER)
    rm = b.replica_manager
    for epoch, first in ((0, 0), (1, 2)):
        async with rm.state_change_lock:
            await rm.become_leader_or_follower(1, leader_and_isr([lai_state(0, BROKER_ID, epoch, replicas, replicas,
                                                                            zk_version=epoch)]))
        b.metadata_cache.update(update_metadata({"t": (None, [um_state(0, BROKER_ID, epoch, replicas, replicas)])},
                                                [um_broker(BROKER_ID), um_broker(OTHER_BROKER)]))
        for offset in range(first, 2 if epoch == 0 else 3):
            rm.append_records(1, 1000, [("t", 0, bytearray(build_batch(
                [SimpleRecord(b"v")], base_offset=offset, partition_leader_epoch=epoch,
                timestamp=time.time_ns() // 1_000_000)))])


def test_a_follower_past_its_epochs_end_is_told_where_it_diverged(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await lead_two_epochs(b)
        p = b.replica_manager.partitions[TopicPartition("t", 0)]
        # The follower wrote offsets 2-3 in epoch 0 (as a deposed leader, say): epoch 0 ends at 2 here.
        started = time.monotonic()
        diverged = await answer(b, follower_fetch(4, 0, max_wait_ms=10_000))
        assert time.monotonic() - started < 5  # at once, long poll or not
        assert diverged.error_code == E.none
        assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (0, 2)
        assert not diverged.records
        assert p.remote[OTHER_BROKER].log_end_offset != 4  # its position is not taken until it truncates
        # One record too many in epoch 0 is as diverged as two.
        assert (await answer(b, follower_fetch(3, 0))).diverging_epoch.end_offset == 2
        # Followers that agree with this log read on.
        for offset, epoch, first in ((2, 0, 2), (1, 0, 1), (3, 1, None)):
            agreed = await answer(b, follower_fetch(offset, epoch))
            assert agreed.diverging_epoch.epoch == -1  # absent: kio's default
            assert [h.base_offset for _, h in iter_batches(agreed.records or b"")] == ([] if first is None else
                                                                                      list(range(first, 3)))
    with_broker(body)
