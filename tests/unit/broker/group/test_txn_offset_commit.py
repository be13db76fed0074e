"""Transactional offset commits (TxnOffsetCommit, KIP-98/KIP-447) on a manual clock with an
in-memory __consumer_offsets: pending until the marker, commit and abort, the later append
winning, KIP-447 member checks, OffsetFetch require_stable, and replay of a partition with
transactional batches and markers."""

from __future__ import annotations

import asyncio
from typing import Any

from group_fakes import FakeOffsetsTopic, make_coordinator, run, settle
from test_group_coordinator import commit, join_request, ready, stable_group

from odradek.broker.group.coordinator import GroupCoordinator
from odradek.broker.group.group import GroupState, OffsetAndMetadata
from odradek.broker.group.loader import replay
from odradek.broker.group.offsets_records import (
    OffsetCommitKey,
    OffsetCommitValue,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from odradek.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import SimpleRecord, build_batch, parse_header

E = ErrorCode
S = GroupState
PID = 4000
EPOCH = 3
TP = ("t", 0)


def txn_commit(coordinator: GroupCoordinator, offset: int, *, pid: int = PID, group: str = "g", member: str = "",
               instance: str | None = None, generation: int = -1, tp: tuple[str, int] = TP,
               metadata: str = "") -> Any:
    return coordinator.txn_commit_offsets(group, pid, EPOCH, member, instance, generation,
                                          {tp: OffsetAndMetadata(offset, 2, metadata, 1000)})


def fetched(coordinator: GroupCoordinator, *, group: str = "g", tp: tuple[str, int] = TP,
            require_stable: bool = False) -> tuple[int, ErrorCode]:
    error, offsets = coordinator.fetch_offsets(group, [tp], require_stable)
    assert error == E.none
    return offsets[tp].offset, offsets[tp].error


def test_pending_until_commit_marker_then_visible() -> None:
    async def scenario() -> None:
        coordinator, topic, _ = await ready()
        assert await txn_commit(coordinator, 42) == {TP: E.none}
        # One transactional batch of the producer, with Kafka's base sequence 0.
        (batch,) = topic.logs[0]
        header = parse_header(batch)
        assert (header.is_transactional, header.is_control) == (True, False)
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (PID, EPOCH, 0)
        assert topic.transactional_appends == [(0, 0)]
        group = coordinator.manager.get_group("g")
        assert group is not None and group.is_(S.EMPTY)  # created for the commit, as Kafka does
        assert fetched(coordinator) == (-1, E.none)
        assert fetched(coordinator, require_stable=True) == (-1, E.unstable_offset_commit)
        coordinator.complete_txn(PID, [0], commit=True)
        assert fetched(coordinator, require_stable=True) == (42, E.none)
        assert not group.pending_txn_offset_commits
    run(scenario())


def test_abort_drops_the_pending_offsets() -> None:
    async def scenario() -> None:
        coordinator, _, _ = await ready()
        assert await commit(coordinator, "", -1, 5) == {TP: E.none}
        assert await txn_commit(coordinator, 42) == {TP: E.none}
        coordinator.complete_txn(PID, [0], commit=False)
        assert fetched(coordinator, require_stable=True) == (5, E.none)
        # A second marker for the same producer changes nothing.
        coordinator.complete_txn(PID, [0], commit=True)
        assert fetched(coordinator) == (5, E.none)
    run(scenario())


def test_markers_only_touch_their_producer_and_partitions() -> None:
    async def scenario() -> None:
        coordinator, _, _ = await ready()
        assert await txn_commit(coordinator, 1, pid=1) == {TP: E.none}
        assert await txn_commit(coordinator, 2, pid=2, tp=("t", 1)) == {("t", 1): E.none}
        coordinator.complete_txn(1, [5], commit=True)  # not the group's partition
        assert fetched(coordinator) == (-1, E.none)
        coordinator.complete_txn(1, [0], commit=True)
        assert fetched(coordinator) == (1, E.none)
        assert fetched(coordinator, tp=("t", 1), require_stable=True) == (-1, E.unstable_offset_commit)
        coordinator.complete_txn(2, [0], commit=True)
        assert fetched(coordinator, tp=("t", 1)) == (2, E.none)
    run(scenario())


def test_the_commit_later_in_the_log_wins() -> None:
    async def scenario() -> None:
        coordinator, _, _ = await ready()
        # Transactional commit first, a plain commit after it: the plain one stays.
        assert await txn_commit(coordinator, 10) == {TP: E.none}
        assert await commit(coordinator, "", -1, 20) == {TP: E.none}
        coordinator.complete_txn(PID, [0], commit=True)
        assert fetched(coordinator) == (20, E.none)
        # Plain commit first, transactional after it: the transactional one replaces it.
        assert await txn_commit(coordinator, 30) == {TP: E.none}
        coordinator.complete_txn(PID, [0], commit=True)
        assert fetched(coordinator) == (30, E.none)
    run(scenario())


def test_kip_447_member_checks() -> None:
    async def scenario() -> None:
        coordinator, _, clock = await ready()
        (a,) = await stable_group(coordinator, clock, 1)
        assert await txn_commit(coordinator, 1, member=a.member_id, generation=2) == {TP: E.illegal_generation}
        assert await txn_commit(coordinator, 1, member="stranger", generation=1) == {TP: E.unknown_member_id}
        assert await txn_commit(coordinator, 1, generation=7) == {TP: E.illegal_generation}
        # v0-2 requests carry neither member nor generation: accepted whatever the group is.
        assert await txn_commit(coordinator, 1) == {TP: E.none}
        assert await txn_commit(coordinator, 2, member=a.member_id, generation=1) == {TP: E.none}
        # An unknown group is created empty: generation 0 is its generation.
        assert await txn_commit(coordinator, 1, group="fresh", generation=3) == {TP: E.illegal_generation}
        assert await txn_commit(coordinator, 1, group="fresh2", generation=0) == {TP: E.none}
        group = coordinator.manager.get_group("g")
        assert group is not None and not group.offsets  # nothing committed until a marker
        assert set(group.pending_txn_offset_commits[PID]) == {TP}
    run(scenario())


def test_static_member_fencing() -> None:
    async def scenario() -> None:
        coordinator, _, clock = await ready()
        join = asyncio.ensure_future(coordinator.join_group(join_request(instance="i1")))
        await settle()
        clock.advance(0)
        await settle()
        first = join.result()
        assert first.error == E.none
        await coordinator.sync_group("g", 1, first.member_id, "i1", None, None, {first.member_id: b"x"})
        assert await txn_commit(coordinator, 1, member="old-incarnation", instance="i1", generation=1) == \
            {TP: E.fenced_instance_id}
        assert await txn_commit(coordinator, 1, member=first.member_id, instance="i1", generation=1) == \
            {TP: E.none}
        # An instance id the group does not know is not fenced (the member id check decides).
        assert await txn_commit(coordinator, 1, member=first.member_id, instance="other", generation=1) == \
            {TP: E.none}
    run(scenario())


def test_coordinator_errors() -> None:
    async def scenario() -> None:
        coordinator, topic, _ = make_coordinator()
        assert await txn_commit(coordinator, 1) == {TP: E.not_coordinator}
        topic.logs[0] = [build_batch([SimpleRecord(key=b"\x00\x09", value=b"")])]  # a record to replay
        topic.next_offsets[0] = 1
        coordinator.on_election(0)
        assert await txn_commit(coordinator, 1) == {TP: E.coordinator_load_in_progress}
        await settle()
        assert await txn_commit(coordinator, 1, group="") == {TP: E.invalid_group_id}
        assert await txn_commit(coordinator, 1, metadata="x" * 5000) == {TP: E.offset_metadata_too_large}
        topic.fail_with = E.not_leader_or_follower
        assert await txn_commit(coordinator, 1) == {TP: E.not_coordinator}
        group = coordinator.manager.get_group("g")
        assert group is not None and not group.pending_txn_offset_commits  # the failed write left nothing
        assert fetched(coordinator, require_stable=True) == (-1, E.none)
    run(scenario())


def test_an_append_in_flight_is_pending_and_a_newer_commit_replaces_it() -> None:
    async def scenario() -> None:
        coordinator, topic, _ = await ready()
        topic.hold = True
        first = asyncio.ensure_future(txn_commit(coordinator, 1))
        await settle()
        assert fetched(coordinator, require_stable=True) == (-1, E.unstable_offset_commit)
        topic.hold = False
        assert await txn_commit(coordinator, 2) == {TP: E.none}
        topic.release()
        await settle()
        assert first.result() == {TP: E.none}
        coordinator.complete_txn(PID, [0], commit=True)
        assert fetched(coordinator) == (2, E.none)
    run(scenario())


def test_expiry_and_deletion_leave_pending_transactional_offsets() -> None:
    async def scenario() -> None:
        coordinator, _, clock = await ready(offsets_retention_ms=1000)
        assert await txn_commit(coordinator, 7, group="solo") == {TP: E.none}
        clock.advance(5000)
        assert coordinator.cleanup_expired_offsets() == 0
        group = coordinator.manager.get_group("solo")
        assert group is not None and not group.is_(S.DEAD)  # pending offsets keep the group
        coordinator.complete_txn(PID, [0], commit=True)
        assert fetched(coordinator, group="solo") == (7, E.none)
        # Deleting a group with another transaction pending: the group goes (Kafka deletes
        # Empty groups whatever is pending).
        assert await txn_commit(coordinator, 8, group="solo") == {TP: E.none}
        assert coordinator.delete_groups(["solo"]) == {"solo": E.none}
        assert coordinator.manager.get_group("solo") is None
        coordinator.complete_txn(PID, [0], commit=True)  # a late marker finds nothing to do
        assert fetched(coordinator, group="solo") == (-1, E.none)
    run(scenario())


def test_a_new_coordinator_replays_transactional_commits_and_markers() -> None:
    async def scenario() -> None:
        first, topic, clock = await ready()
        (a,) = await stable_group(first, clock, 1)
        assert await txn_commit(first, 11, pid=1, member=a.member_id, generation=1) == {TP: E.none}
        topic.append_marker(0, 1, commit=True)
        first.complete_txn(1, [0], commit=True)
        assert await txn_commit(first, 22, pid=2, tp=("t", 1)) == {("t", 1): E.none}
        topic.append_marker(0, 2, commit=False)
        first.complete_txn(2, [0], commit=False)
        assert await txn_commit(first, 33, pid=3, tp=("t", 2)) == {("t", 2): E.none}  # no marker yet
        assert await txn_commit(first, 44, pid=3, group="only-pending") == {TP: E.none}
        first.on_resignation(0)
        second, _, _ = make_coordinator(topic=topic, clock=clock)
        second.on_election(0)
        await settle()
        group = second.manager.get_group("g")
        assert group is not None and group.is_(S.STABLE)
        assert fetched(second) == (11, E.none)
        assert fetched(second, tp=("t", 1), require_stable=True) == (-1, E.none)
        assert fetched(second, tp=("t", 2), require_stable=True) == (-1, E.unstable_offset_commit)
        solo = second.manager.get_group("only-pending")
        assert solo is not None and solo.is_(S.EMPTY) and not solo.offsets
        second.complete_txn(3, [0], commit=True)
        assert fetched(second, tp=("t", 2)) == (33, E.none)
        assert fetched(second, group="only-pending") == (44, E.none)
    run(scenario())


def test_a_marker_during_loading_completes_after_the_load() -> None:
    async def scenario() -> None:
        first, topic, clock = await ready()
        assert await txn_commit(first, 9, pid=5) == {TP: E.none}
        assert await txn_commit(first, 10, pid=6) == {TP: E.none}
        first.on_resignation(0)
        second, _, _ = make_coordinator(topic=topic, clock=clock)
        second.on_election(0)
        # Markers written while the partition loads (not in what the load reads).
        second.complete_txn(5, [0], commit=True)
        second.complete_txn(6, [0], commit=False)
        assert second.fetch_offsets("g", [TP], False)[0] == E.coordinator_load_in_progress
        await settle()
        assert fetched(second, require_stable=True) == (9, E.none)
        group = second.manager.get_group("g")
        assert group is not None and not group.pending_txn_offset_commits
    run(scenario())


# ----------------------------------------------------------------------------- loader, sans-IO


def offset_record(group: str, partition: int, value: int | None) -> SimpleRecord:
    return SimpleRecord(
        key=encode_offset_commit_key(OffsetCommitKey(group, "t", partition)),
        value=None if value is None else encode_offset_commit_value(OffsetCommitValue(value, "", 5)))


class Log:
    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.next = 0

    def plain(self, *records: SimpleRecord) -> None:
        self.batches.append(build_batch(records, base_offset=self.next))
        self.next += len(records)

    def txn(self, pid: int, *records: SimpleRecord) -> None:
        self.batches.append(build_batch(records, base_offset=self.next, producer_id=pid, producer_epoch=0,
                                        base_sequence=0, is_transactional=True))
        self.next += len(records)

    def marker(self, pid: int, commit: bool) -> None:
        self.batches.append(build_end_txn_marker_batch(
            ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, producer_id=pid, producer_epoch=0,
            coordinator_epoch=1, timestamp=0, base_offset=self.next))
        self.next += 1


def committed(state: Any) -> dict[tuple[str, int], int]:
    return {(k.group, k.partition): om.offset for k, om in state.offsets.items()}


def test_replay_applies_commit_markers_and_drops_aborted() -> None:
    log = Log()
    log.plain(offset_record("g", 0, 1))
    log.txn(7, offset_record("g", 0, 2), offset_record("g", 1, 2))
    log.txn(8, offset_record("g", 2, 3))
    log.txn(9, offset_record("h", 0, 4))
    log.marker(8, commit=False)
    log.marker(7, commit=True)
    state = replay(log.batches)
    assert state.next_offset == log.next
    assert committed(state) == {("g", 0): 2, ("g", 1): 2}
    assert list(state.pending) == [9]  # no marker yet: stays pending
    groups = {g.group_id: g for g in state.loaded_groups(now_ms=1)}
    assert groups["h"].is_(S.EMPTY) and not groups["h"].offsets
    assert groups["h"].pending_txn_offset_commits[9][("t", 0)].offset == 4
    assert groups["h"].has_pending_offset_commits_for(("t", 0))
    assert not groups["g"].pending_txn_offset_commits


def test_replay_keeps_a_plain_commit_written_after_the_transactional_one() -> None:
    log = Log()
    log.txn(7, offset_record("g", 0, 10), offset_record("g", 1, 10))
    log.plain(offset_record("g", 0, 20))
    log.txn(7, offset_record("g", 1, None))  # a transactional tombstone removes the pending offset
    log.marker(7, commit=True)
    state = replay(log.batches)
    assert committed(state) == {("g", 0): 20}
    # The committed record keeps its place in the log (the later append wins afterwards too).
    assert state.offsets[OffsetCommitKey("g", "t", 0)].record_offset == 2


def test_fake_topic_marker_helper_advances_offsets() -> None:
    topic = FakeOffsetsTopic()
    topic.append_marker(0, 1, commit=True)
    assert topic.next_offsets[0] == 1 and parse_header(topic.logs[0][0]).is_control
