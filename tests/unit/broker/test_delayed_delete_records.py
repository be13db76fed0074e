"""DeleteRecords waits for the replicas (Kafka's DelayedDeleteRecords and
Partition.lowWatermarkIfLeader): the low watermark over the leader and the live followers, the
delayed operation's completion rules, and ReplicaManager's wiring of both into the follower
fetch path."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from control_helpers import (
    TOPIC_ID,
    lai_state,
    leader_and_isr,
    stop_replica,
    um_broker,
    um_state,
    update_metadata,
)

from odradek.broker.delayed_delete_records import DelayedDeleteRecords, DeleteRecordsPartitionResult
from odradek.broker.delayed_fetch import FetchPartitionRequest
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.partition import Partition
from odradek.broker.replica_manager import ReplicaManager
from odradek.common import TopicPartition
from odradek.config import KafkaConfig, LogConfig
from odradek.log.log import Log
from odradek.log.log_manager import LogManager, LogManagerConfig
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import SimpleRecord, build_batch

TP = TopicPartition("t", 0)


def run(scenario: Awaitable[Any]) -> Any:
    return asyncio.run(scenario)  # type: ignore[arg-type]


def caught_up(tmp_path: Path, log_starts: dict[int, int]) -> Partition:
    """Leader 1 of replicas 1, 2, 3 (ISR 1, 2) with 10 records, all at the high watermark,
    each follower reporting its log start from ``log_starts``."""
    p = Partition("t", 0, local_broker_id=1)
    p.log = Log.open(tmp_path / "t-0", LogConfig(), topic="t", partition=0)
    p.make_leader(lai_state(0, 1, 6, (1, 2), (1, 2, 3)), now_ms=1_000)
    p.log.append_as_leader(build_batch([SimpleRecord(b"v")] * 10), p.leader_epoch)
    for replica, start in log_starts.items():
        p.update_follower_fetch_state(replica, 10, 2_000, start)
    assert p.high_watermark == 10
    return p


# ----------------------------------------------------------------------------- low watermark


def test_low_watermark_is_the_least_log_start_of_the_leader_and_the_live_followers(tmp_path: Path) -> None:
    p = caught_up(tmp_path, {2: 6, 3: 2})
    assert p.log is not None and p.log.maybe_increment_log_start_offset(8)
    # Replica 3 counts although it is out of the ISR: only brokers that are not alive do not.
    assert p.low_watermark({1, 2, 3}) == 2
    assert p.low_watermark({1, 2}) == 6
    assert p.low_watermark({1}) == 8


def test_a_follower_fetch_reports_a_change_of_its_log_start_only(tmp_path: Path) -> None:
    p = caught_up(tmp_path, {2: 0, 3: 0})
    # Same position, same log start: nothing for delayed requests to look at.
    assert not p.update_follower_fetch_state(2, 10, 3_000, 0)
    assert p.update_follower_fetch_state(2, 10, 3_100, 4)
    assert p.remote[2].log_start_offset == 4
    # A new leader epoch forgets what the followers reported.
    p.make_leader(lai_state(0, 1, 7, (1, 2), (1, 2, 3)), now_ms=4_000)
    assert {r: s.log_start_offset for r, s in p.remote.items()} == {2: -1, 3: -1}
    assert p.low_watermark({1, 2, 3}) == -1


# ----------------------------------------------------------------------------- DelayedDeleteRecords


def waiting(p: Partition, required: int, timeout_ms: int = 60_000, alive: frozenset[int] = frozenset({1, 2, 3}),
            offline: frozenset[TopicPartition] = frozenset()) -> DelayedDeleteRecords:
    """A DeleteRecords of ``p`` down to ``required``, as the replica manager starts one."""
    results = {TP: DeleteRecordsPartitionResult(ErrorCode.none, p.low_watermark(alive), required)}
    return DelayedDeleteRecords({TP: p}, timeout_ms, results, lambda: alive, offline)


def test_completes_once_every_live_replica_has_moved_its_log_start(tmp_path: Path) -> None:
    async def scenario() -> None:
        p = caught_up(tmp_path, {2: 0, 3: 0})
        assert p.log is not None
        p.log.maybe_increment_log_start_offset(5)
        op = waiting(p, 5)
        assert not op.try_complete()
        p.update_follower_fetch_state(2, 10, 3_000, 5)
        assert not op.try_complete()
        p.update_follower_fetch_state(3, 10, 3_000, 7)  # past it: retention may have moved it further
        assert op.try_complete()
        result = (await op.future)[TP]
        assert (result.error, result.low_watermark) == (ErrorCode.none, 5)
    run(scenario())


def test_a_follower_whose_broker_is_not_alive_is_not_waited_for(tmp_path: Path) -> None:
    async def scenario() -> None:
        p = caught_up(tmp_path, {2: 5, 3: 0})
        assert p.log is not None
        p.log.maybe_increment_log_start_offset(5)
        op = waiting(p, 5, alive=frozenset({1, 2}))
        assert op.try_complete()
        assert (await op.future)[TP].low_watermark == 5
    run(scenario())


def test_at_the_timeout_the_pending_partition_is_request_timed_out(tmp_path: Path) -> None:
    async def scenario() -> None:
        p = caught_up(tmp_path, {2: 0, 3: 0})
        assert p.log is not None
        p.log.maybe_increment_log_start_offset(5)
        op = waiting(p, 5, timeout_ms=10)
        assert not op.try_complete()
        result = (await op.future)[TP]
        assert op.expired
        # The low watermark stays what it was when the request arrived (Kafka's response too).
        assert (result.error, result.low_watermark) == (ErrorCode.request_timed_out, 0)
    run(scenario())


def test_a_partition_no_longer_led_here_completes_with_its_error(tmp_path: Path) -> None:
    async def scenario() -> None:
        p = caught_up(tmp_path, {2: 0, 3: 0})
        op = waiting(p, 5)
        assert not op.try_complete()
        p.make_follower(lai_state(0, 2, 7, (1, 2), (1, 2, 3)))
        assert op.try_complete()
        assert (await op.future)[TP].error == ErrorCode.not_leader_or_follower

        gone = waiting(caught_up(tmp_path / "gone", {2: 0, 3: 0}), 5)
        gone.partitions = {}  # deleted here meanwhile
        assert gone.try_complete()
        assert (await gone.future)[TP].error == ErrorCode.unknown_topic_or_partition

        offline = waiting(caught_up(tmp_path / "offline", {2: 0, 3: 0}), 5, offline=frozenset({TP}))
        offline.partitions = {}  # its log directory failed
        assert offline.try_complete()
        assert (await offline.future)[TP] == DeleteRecordsPartitionResult(ErrorCode.kafka_storage_error, -1, 5)
    run(scenario())


# ----------------------------------------------------------------------------- ReplicaManager


async def cluster_of_three(tmp_path: Path, alive: tuple[int, ...] = (1, 2, 3)) -> ReplicaManager:
    """Broker 1 leading t-0 (replicas 1, 2, 3) with 10 records that both followers have;
    ``alive``: the brokers its metadata cache knows alive."""
    config = KafkaConfig.from_props({"broker.id": "1", "zookeeper.connect": "unused:2181",
                                     "log.dirs": str(tmp_path / "logs")})
    log_manager = LogManager(LogManagerConfig.from_kafka_config(config), config.log_config())
    log_manager.startup()
    rm = ReplicaManager(1, config, MetadataCache(1), log_manager, broker_epoch=lambda: 100)
    async with rm.state_change_lock:
        await rm.become_leader_or_follower(1, leader_and_isr([lai_state(0, 1, 1, (1, 2, 3), (1, 2, 3))]))
    rm.maybe_update_metadata_cache(2, update_metadata({"t": (TOPIC_ID, [um_state(0, 1, 1, (1, 2, 3), (1, 2, 3))])},
                                                      [um_broker(b) for b in alive]))
    results, _ = rm.append_records(1, 1_000, [("t", 0, build_batch([SimpleRecord(b"v")] * 10))])
    assert results[TP].error == ErrorCode.none
    for replica in (2, 3):
        follower_fetch(rm, replica, 0)
    assert rm.partitions[TP].high_watermark == 10
    return rm


def follower_fetch(rm: ReplicaManager, replica: int, log_start: int) -> None:
    answer = rm.fetch_messages(replica, 0, 0, 1 << 20, [FetchPartitionRequest("t", 0, 10, 1 << 20,
                                                                              log_start_offset=log_start)])
    assert isinstance(answer, dict) and answer[TP].error == ErrorCode.none


def test_replica_manager_answers_delete_records_when_the_followers_report_the_new_log_start(tmp_path: Path) -> None:
    async def scenario() -> None:
        rm = await cluster_of_three(tmp_path)
        results, delayed = rm.delete_records(60_000, {TP: 4})
        assert delayed is not None and not delayed.future.done()
        assert rm.partitions[TP].log.log_start_offset == 4  # type: ignore[union-attr]
        assert results[TP].low_watermark == 0
        # The followers learn the new log start from the fetch responses, then report theirs.
        follower_fetch(rm, 2, 4)
        assert not delayed.future.done()
        follower_fetch(rm, 3, 4)
        assert delayed.future.done() and rm.delete_records_purgatory.watched() == 0
        assert delayed.future.result()[TP] == DeleteRecordsPartitionResult(ErrorCode.none, 4, 4)
    run(scenario())


def test_replica_manager_resolves_minus_one_and_refuses_past_the_high_watermark(tmp_path: Path) -> None:
    async def scenario() -> None:
        rm = await cluster_of_three(tmp_path, alive=(1,))  # the followers' brokers are not alive
        results, delayed = rm.delete_records(60_000, {TP: -1})
        assert delayed is None
        assert results[TP] == DeleteRecordsPartitionResult(ErrorCode.none, 10, 10)
        results, delayed = rm.delete_records(60_000, {TP: 11, TopicPartition("t", 5): 1})
        assert delayed is None
        assert results[TP].error == ErrorCode.offset_out_of_range
        assert results[TopicPartition("t", 5)].error == ErrorCode.unknown_topic_or_partition
    run(scenario())


def test_replica_manager_answers_not_leader_when_the_partition_stops_while_waiting(tmp_path: Path) -> None:
    async def scenario() -> None:
        rm = await cluster_of_three(tmp_path)
        _, delayed = rm.delete_records(60_000, {TP: 4})
        assert delayed is not None
        rm.stop_replicas(3, stop_replica([("t", 0, 2, False)]))  # the controller moved it away
        assert delayed.future.done()
        assert delayed.future.result()[TP].error == ErrorCode.not_leader_or_follower
    run(scenario())
