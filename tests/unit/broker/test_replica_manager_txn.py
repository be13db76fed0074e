"""ReplicaManager's transactional data path on real logs: KIP-890 verification before a
transactional batch starts a transaction, WriteTxnMarkers appends, read_committed fetches
and ListOffsets bounded by the last stable offset, DescribeProducers' producer state."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from control_helpers import OTHER_TOPIC_ID, lai_state, leader_and_isr

from odradek.broker.apis.txn_markers import marker_entries, write_txn_markers
from odradek.broker.delayed_fetch import DelayedFetch, FetchPartitionRequest
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.replica_manager import PartitionVerifier, ReplicaManager, transactional_header
from odradek.common import TopicPartition
from odradek.config import KafkaConfig
from odradek.log.log_manager import LogManager, LogManagerConfig
from odradek.protocol import control
from odradek.protocol.control_records import ControlRecordType, decode_end_txn_marker
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import SimpleRecord, build_batch, iter_batches

BROKER = 1
PID, EPOCH = 4000, 2
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
FOLLOWED = TopicPartition("t", 2)
OFFSETS0 = TopicPartition("__consumer_offsets", 0)
LATEST = -1


R = TypeVar("R")


def run(body: Callable[[ReplicaManager], Awaitable[R]], tmp_path: Path, verifier: PartitionVerifier | None = None
        ) -> R:
    """Run ``body`` against a broker leading t-0, t-1 and __consumer_offsets-0 alone and
    following t-2 (its leader 2 is not alive), checking transactions with ``verifier``."""
    async def main() -> R:
        config = KafkaConfig.from_props({"broker.id": str(BROKER), "zookeeper.connect": "unused:2181",
                                         "log.dirs": str(tmp_path / "logs")})
        log_manager = LogManager(LogManagerConfig.from_kafka_config(config), config.log_config())
        log_manager.startup()
        rm = ReplicaManager(BROKER, config, MetadataCache(BROKER), log_manager, broker_epoch=lambda: -1,
                            txn_verifier=verifier)
        offsets = control.LeaderAndIsrTopicState(
            topic_name=OFFSETS0.topic, topic_id=OTHER_TOPIC_ID,
            partition_states=(lai_state(0, leader=1, leader_epoch=0, isr=(1,), replicas=(1,)),))
        request = leader_and_isr([lai_state(0, leader=1, leader_epoch=0, isr=(1,), replicas=(1,)),
                                  lai_state(1, leader=1, leader_epoch=0, isr=(1,), replicas=(1,)),
                                  lai_state(2, leader=2, leader_epoch=0, isr=(2, 1), replicas=(2, 1))],
                                 more=[offsets])
        async with rm.state_change_lock:
            await rm.become_leader_or_follower(1, request)
        try:
            return await body(rm)
        finally:
            await rm.fetchers.shutdown()
            log_manager.shutdown()
    return asyncio.run(main())


def txn_batch(seq: int = 0, pid: int = PID, epoch: int = EPOCH, value: bytes = b"v") -> bytes:
    return build_batch([SimpleRecord(value)], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       is_transactional=True, timestamp=time.time_ns() // 1_000_000)


def leo(rm: ReplicaManager, tp: TopicPartition) -> int:
    p = rm.partitions[tp]
    assert p.log is not None
    return p.log.log_end_offset


@dataclass
class Verifier:
    """A transaction coordinator's answers, recording what it was asked."""

    answers: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    fail: Exception | None = None
    calls: list[tuple[str, int, int, list[TopicPartition]]] = field(default_factory=list)

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Sequence[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        self.calls.append((transactional_id, producer_id, producer_epoch, list(partitions)))
        await asyncio.sleep(0)  # a real one waits for the coordinator
        if self.fail is not None:
            raise self.fail
        return {tp: self.answers.get(tp, ErrorCode.none) for tp in partitions}


@dataclass(frozen=True)
class MarkerTopic:
    name: str
    partition_indexes: tuple[int, ...]


@dataclass(frozen=True)
class Marker:
    producer_id: int
    producer_epoch: int
    transaction_result: bool
    topics: tuple[MarkerTopic, ...]
    coordinator_epoch: int = 5


def marker(commit: bool, *tps: TopicPartition, pid: int = PID) -> Marker:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return Marker(pid, EPOCH, commit, tuple(MarkerTopic(t, tuple(ps)) for t, ps in by_topic.items()))


@dataclass
class Groups:
    completed: list[tuple[int, list[int], bool]] = field(default_factory=list)

    def complete_txn(self, producer_id: int, partitions: list[int], commit: bool) -> None:
        self.completed.append((producer_id, partitions, commit))


# ----------------------------------------------------------------------------- sans-IO pieces


def test_transactional_header_only_for_transactional_data_batches() -> None:
    assert transactional_header(None) is None
    assert transactional_header(b"\x01\x02") is None  # malformed: the append reports it
    assert transactional_header(build_batch([SimpleRecord(b"v")], producer_id=1, producer_epoch=0,
                                            base_sequence=0)) is None
    header = transactional_header(memoryview(txn_batch(seq=7)))
    assert header is not None and (header.producer_id, header.producer_epoch, header.base_sequence) == (PID, EPOCH, 7)
    (_, _, control_batch), = marker_entries(marker(True, T0), 1)
    assert transactional_header(control_batch) is None


def test_marker_entries_are_one_end_txn_batch_per_partition() -> None:
    entries = marker_entries(marker(False, T0, T1, OFFSETS0), 1_700_000_000_000)
    assert [(t, p) for t, p, _ in entries] == [("t", 0), ("t", 1), ("__consumer_offsets", 0)]
    assert entries[0][2] is not entries[1][2]  # each is rewritten in place by its leader
    for _, _, batch in entries:
        header = transactional_header(batch)
        assert header is None  # a control batch
        assert decode_end_txn_marker(bytes(batch)) == (ControlRecordType.ABORT, 5)


# ----------------------------------------------------------------------------- KIP-890 verification


def test_a_partition_that_fails_verification_gets_the_error_and_nothing_appended(tmp_path: Path) -> None:
    verifier = Verifier({T0: ErrorCode.invalid_txn_state})

    async def body(rm: ReplicaManager) -> None:
        results, delayed = await rm.append_records_async(
            -1, 1000, [("t", 0, bytearray(txn_batch())), ("t", 1, bytearray(txn_batch()))], transactional_id="tx")
        if delayed is not None:
            results = await delayed.future
        assert results[T0].error == ErrorCode.invalid_txn_state
        assert results[T1].error == ErrorCode.none and results[T1].base_offset == 0
        assert (leo(rm, T0), leo(rm, T1)) == (0, 1)

    run(body, tmp_path, verifier)
    assert verifier.calls == [("tx", PID, EPOCH, [T0, T1])]


def test_an_unreachable_coordinator_is_retriable_for_the_producer(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager) -> None:
        results, _ = await rm.append_records_async(1, 1000, [("t", 0, bytearray(txn_batch()))],
                                                   transactional_id="tx")
        assert results[T0].error == ErrorCode.not_enough_replicas
        assert leo(rm, T0) == 0

    run(body, tmp_path, Verifier(fail=ConnectionError("coordinator gone")))


def test_without_a_verifier_transactional_batches_are_appended_unverified(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager) -> None:
        assert rm.txn_verifier is None
        results, delayed = await rm.append_records_async(
            1, 1000, [("t", 0, bytearray(txn_batch())), ("t", 9, bytearray(txn_batch()))], transactional_id="tx")
        assert delayed is None
        assert results[T0].error == ErrorCode.none and leo(rm, T0) == 1
        assert results[TopicPartition("t", 9)].error == ErrorCode.unknown_topic_or_partition

    run(body, tmp_path)


def test_non_leaders_are_not_verified(tmp_path: Path) -> None:
    verifier = Verifier()

    async def body(rm: ReplicaManager) -> None:
        results, _ = await rm.append_records_async(1, 1000, [("t", 2, bytearray(txn_batch()))],
                                                   transactional_id="tx")
        assert results[FOLLOWED].error == ErrorCode.not_leader_or_follower

    run(body, tmp_path, verifier)
    assert verifier.calls == []


# ----------------------------------------------------------------------------- markers and producers


def test_markers_for_partitions_not_led_here(tmp_path: Path) -> None:
    groups = Groups()

    async def body(rm: ReplicaManager) -> list[tuple[int, dict[TopicPartition, ErrorCode]]]:
        return await write_txn_markers(rm, groups, [marker(True, FOLLOWED, TopicPartition("gone", 0))], 1000)

    assert run(body, tmp_path) == [(PID, {FOLLOWED: ErrorCode.not_leader_or_follower,
                                          TopicPartition("gone", 0): ErrorCode.unknown_topic_or_partition})]
    assert groups.completed == []


def test_active_producers_of_hosted_partitions(tmp_path: Path) -> None:
    """Led or followed, as Kafka's activeProducerState answers (the differential oracle)."""
    async def body(rm: ReplicaManager) -> None:
        batch = build_batch([SimpleRecord(b"a"), SimpleRecord(b"b")], producer_id=77, producer_epoch=3,
                            base_sequence=0, timestamp=1_700_000_000_123)
        results, _ = rm.append_records(1, 1000, [("t", 0, bytearray(batch))])
        assert results[T0].error == ErrorCode.none
        found = rm.active_producers("t", 0)
        assert not isinstance(found, ErrorCode)
        (entry,) = found
        assert (entry.producer_id, entry.producer_epoch, entry.last_seq, entry.last_timestamp) == \
            (77, 3, 1, 1_700_000_000_123)
        assert rm.active_producers("t", 1) == []
        assert rm.active_producers("t", 2) == []  # followed here
        assert rm.active_producers("nope", 0) == ErrorCode.unknown_topic_or_partition

    run(body, tmp_path)


# ----------------------------------------------------------------------------- with the log's transactions


def test_an_ongoing_transaction_is_not_verified_again(tmp_path: Path) -> None:
    verifier = Verifier()

    async def body(rm: ReplicaManager) -> None:
        for seq in range(2):
            results, _ = await rm.append_records_async(1, 1000, [("t", 0, bytearray(txn_batch(seq)))],
                                                       transactional_id="tx")
            assert results[T0].error == ErrorCode.none
        found = rm.active_producers("t", 0)
        assert not isinstance(found, ErrorCode)
        assert [(e.producer_id, e.current_txn_first_offset) for e in found] == [(PID, 0)]

    run(body, tmp_path, verifier)
    assert verifier.calls == [("tx", PID, EPOCH, [T0])]


def test_with_a_verifier_the_sync_path_cannot_start_a_transaction(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager) -> None:
        results, _ = rm.append_records(1, 1000, [("t", 0, bytearray(txn_batch()))])
        assert results[T0].error == ErrorCode.invalid_txn_state
        assert leo(rm, T0) == 0

    run(body, tmp_path, Verifier())


def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(tmp_path: Path) -> None:
    groups = Groups()
    fetch = [FetchPartitionRequest("t", 0, 0, 1 << 20)]

    async def body(rm: ReplicaManager) -> None:
        results, _ = rm.append_records(-1, 1000, [("t", 0, bytearray(txn_batch()))])
        assert results[T0].error == ErrorCode.none
        committed = rm.read_from_local_log(-1, 1 << 20, fetch, isolation_level=1)[T0]
        uncommitted = rm.read_from_local_log(-1, 1 << 20, fetch)[T0]
        assert (committed.size, committed.last_stable_offset, committed.aborted_transactions) == (0, 0, None)
        assert uncommitted.size > 0 and (uncommitted.high_watermark, uncommitted.last_stable_offset) == (1, 0)
        assert rm.offset_for_timestamp("t", 0, LATEST, -1, -1, 1)[2] == 0
        assert rm.offset_for_timestamp("t", 0, LATEST, -1, -1, 0)[2] == 1

        # A read_committed consumer waiting at the LSO is answered when the marker moves it.
        waiting = rm.fetch_messages(-1, 30_000, 1, 1 << 20, fetch, isolation_level=1)
        assert isinstance(waiting, DelayedFetch) and not waiting.future.done()
        answers = await write_txn_markers(rm, groups, [marker(False, T0, OFFSETS0)], 1000)
        assert answers == [(PID, {T0: ErrorCode.none, OFFSETS0: ErrorCode.none})]
        done = (await asyncio.wait_for(waiting.future, 5))[T0]
        assert done.last_stable_offset == 2
        (region,) = done.regions  # the data batch and the marker
        assert [h.base_offset for _, h in iter_batches(region.read())] == [0, 1]
        assert done.aborted_transactions == ((PID, 0),)
        assert rm.offset_for_timestamp("t", 0, LATEST, -1, -1, 1)[2] == 2
        found = rm.active_producers("t", 0)
        assert not isinstance(found, ErrorCode)
        assert [(e.current_txn_first_offset, e.coordinator_epoch) for e in found] == [(None, 5)]

    run(body, tmp_path)
    assert groups.completed == [(PID, [0], False)]


def test_a_committed_transaction_lists_no_aborted_transactions(tmp_path: Path) -> None:
    groups = Groups()

    async def body(rm: ReplicaManager) -> dict[TopicPartition, Any]:
        rm.append_records(1, 1000, [("t", 1, bytearray(txn_batch()))])
        answers = await write_txn_markers(rm, groups, [marker(True, T1)], 1000)
        assert answers == [(PID, {T1: ErrorCode.none})]
        return rm.read_from_local_log(-1, 1 << 20, [FetchPartitionRequest("t", 1, 0, 1 << 20)], isolation_level=1)

    result = run(body, tmp_path)[T1]
    assert result.size > 0 and result.last_stable_offset == 2 and result.aborted_transactions == ()
    assert groups.completed == []  # no __consumer_offsets partition in the marker


def test_aborted_transactions_are_those_of_the_segment_read(tmp_path: Path) -> None:
    async def body(rm: ReplicaManager) -> list[tuple[tuple[int, int], ...] | None]:
        lg = rm.partitions[T0].log
        assert lg is not None
        for pid in (1, 2):
            results, _ = rm.append_records(1, 1000, [("t", 0, bytearray(txn_batch(pid=pid)))])
            assert results[T0].error == ErrorCode.none
            assert await write_txn_markers(rm, Groups(), [marker(False, T0, pid=pid)], 1000) == \
                [(pid, {T0: ErrorCode.none})]
            if pid == 1:
                lg.roll()
        assert [s.base_offset for s in lg.segments] == [0, 2]
        return [rm.read_from_local_log(-1, 1 << 20, [FetchPartitionRequest("t", 0, offset, 1 << 20)],
                                       isolation_level=1)[T0].aborted_transactions for offset in (0, 2)]

    assert run(body, tmp_path) == [((1, 0),), ((2, 2),)]
