"""The group coordinator's protocol logic on a manual clock with an in-memory
__consumer_offsets: joins, rebalances, syncs, heartbeats and session expiry, leaving,
static members, commits and their validation, loading and unloading."""

from __future__ import annotations

import asyncio
from typing import Any

from group_fakes import FakeOffsetsTopic, ManualClock, make_coordinator, run, settle

from odradek.broker.group.coordinator import GroupCoordinator
from odradek.broker.group.group import GroupState, JoinResult, OffsetAndMetadata, SyncResult
from odradek.broker.group.loader import PartitionReplay
from odradek.broker.group.membership import JoinRequest
from odradek.broker.group.offsets_records import GroupMetadataKey, OffsetCommitKey
from odradek.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState
SESSION = 10_000
REBALANCE = 30_000


def join_request(member_id: str = "", *, client: str = "client", instance: str | None = None,
                 protocols: tuple[tuple[str, bytes], ...] = (("range", b"sub"),), session: int = SESSION,
                 rebalance: int = REBALANCE, v4: bool = True) -> JoinRequest:
    return JoinRequest("g", member_id, instance, client, "/127.0.0.1", session, rebalance, "consumer", protocols,
                       require_known_member_id=v4)


def commit(coordinator: GroupCoordinator, member_id: str, generation: int, offset: int, *,
           metadata: str = "", group: str = "g", instance: str | None = None, timestamp: int = 1000) -> Any:
    return coordinator.commit_offsets(group, member_id, instance, generation,
                                      {("t", 0): OffsetAndMetadata(offset, 3, metadata, timestamp)})


async def join_new(coordinator: GroupCoordinator, clock: ManualClock, client: str = "client",
                   **kwargs: Any) -> asyncio.Future[JoinResult]:
    """A v4+ join: MEMBER_ID_REQUIRED, then the join with the id (left pending)."""
    first = await coordinator.join_group(join_request(client=client, **kwargs))
    assert first.error == E.member_id_required
    assert first.member_id.startswith(f"{client}-")
    task = asyncio.ensure_future(coordinator.join_group(join_request(first.member_id, client=client, **kwargs)))
    await settle()
    return task


async def stable_group(coordinator: GroupCoordinator, clock: ManualClock, n: int) -> list[JoinResult]:
    """n members through a first rebalance and sync; returns their join results."""
    tasks = [await join_new(coordinator, clock, client=f"c{i}") for i in range(n)]
    clock.advance(0)  # the initial rebalance delay (0 in these tests)
    await settle()
    joins = [t.result() for t in tasks]
    await sync_all(coordinator, joins)
    return joins


async def sync_all(coordinator: GroupCoordinator, joins: list[JoinResult]) -> list[SyncResult]:
    leader = next(j for j in joins if j.member_id == j.leader_id)
    assignments = {mid: f"assigned-{mid}".encode() for mid, _, _ in leader.members}
    tasks = [asyncio.ensure_future(coordinator.sync_group(
        "g", j.generation_id, j.member_id, None, None, None, assignments if j is leader else {})) for j in joins]
    await settle()
    return [t.result() for t in tasks]


def elect(coordinator: GroupCoordinator) -> None:
    coordinator.on_election(0)


async def ready(**config: Any) -> tuple[GroupCoordinator, FakeOffsetsTopic, ManualClock]:
    coordinator, topic, clock = make_coordinator(**config)
    elect(coordinator)
    await settle()
    return coordinator, topic, clock


def test_first_member_joins_syncs_and_is_persisted() -> None:
    async def scenario() -> None:
        coordinator, topic, clock = await ready()
        task = await join_new(coordinator, clock)
        assert not task.done()  # waiting for the initial rebalance delay
        clock.advance(0)
        await settle()
        join = task.result()
        assert (join.error, join.generation_id, join.protocol_name) == (E.none, 1, "range")
        assert join.leader_id == join.member_id
        assert join.members == ((join.member_id, None, b"sub"),)
        group = coordinator.manager.get_group("g")
        assert group is not None and group.is_(S.COMPLETING_REBALANCE)
        sync = (await sync_all(coordinator, [join]))[0]
        assert sync == SyncResult(E.none, f"assigned-{join.member_id}".encode(), "consumer", "range")
        assert group.is_(S.STABLE)
        replay = PartitionReplay()
        for chunk in topic.read(0):
            replay.apply(chunk)
        record = replay.groups["g"]
        assert (record.generation, record.protocol, record.leader) == (1, "range", join.member_id)
        assert record.members[0].assignment == sync.assignment
        assert record.members[0].subscription == b"sub"
    run(scenario())


def test_initial_delay_is_extended_while_members_arrive() -> None:
    async def scenario() -> None:
        coordinator, _, clock = await ready(initial_rebalance_delay_ms=3000)
        a = await join_new(coordinator, clock, client="a")
        clock.advance(2000)
        b = await join_new(coordinator, clock, client="b")
        clock.advance(1000)  # the first delay ends, but b arrived during it
        await settle()
        assert not a.done() and not b.done()
        clock.advance(3000)
        await settle()
        assert a.result().generation_id == b.result().generation_id == 1
        assert len([r for r in (a.result(), b.result()) if r.members]) == 1  # only the leader's
    run(scenario())


def test_a_new_member_rebalances_a_stable_group() -> None:
    async def scenario() -> None:
        coordinator, _, clock = await ready()
        (a,) = await stable_group(coordinator, clock, 1)
        b_task = await join_new(coordinator, clock, client="b")
        group = coordinator.manager.get_group("g")
        assert group is not None and group.is_(S.PREPARING_REBALANCE)
        assert coordinator.heartbeat("g", a.member_id, None, 1) == E.rebalance_in_progress
        # A commit from the current generation is still taken during the rebalance.
        assert await commit(coordinator, a.member_id, 1, 5) == {("t", 0): E.none}
        a2 = await coordinator.join_group(join_request(a.member_id, client="c0"))
        await settle()
        b = b_task.result()
        assert a2.generation_id == b.generation_id == 2
        assert a2.leader_id == a.member_id and {m[0] for m in a2.members} == {a.member_id, b.member_id}
        assert b.members == ()
        # Before the leader's assignment, a follower's SyncGroup waits.
        b_sync = asyncio.ensure_future(coordinator.sync_group("g", 2, b.member_id, None, "consumer", "range", {}))
        await settle()
        assert not b_sync.done()
        assert coordinator.heartbeat("g", b.member_id, None, 2) == E.none
        assert await commit(coordinator, b.member_id, 2, 6) == {("t", 0): E.rebalance_in_progress}
        await coordinator.sync_group("g", 2, a.member_id, None, None, None,
                                     {a.member_id: b"A", b.member_id: b"B"})
        await settle()
        assert b_sync.result().assignment == b"B"
        assert group.is_(S.STABLE)
        # The old generation is gone.
        assert coordinator.heartbeat("g", a.member_id, None, 1) == E.illegal_generation
        assert await commit(coordinator, a.member_id, 1, 7) == {("t", 0): E.illegal_generation}
    run(scenario())


def test_session_expiry_removes_a_member_and_rebalances() -> None:
    async def scenario() -> None:
        coordinator, _, clock = await ready()
        a, b = await stable_group(coordinator, clock, 2)
        for _ in range(4):
            clock.advance(SESSION // 2)
            assert coordinator.heartbeat("g", a.member_id, None, 1) in (E.none, E.rebalance_in_progress)
        group = coordinator.manager.get_group("g")
        assert group is not None
        assert not group.has(b.member_id)
        assert coordinator.heartbeat("g", b.member_id, None, 1) == E.unknown_member_id
        assert group.is_(S.PREPARING_REBALANCE)
        rejoin = await coordinator.join_group(join_request(a.member_id, client="c0"))
        assert (rejoin.generation_id, len(rejoin.members)) == (2, 1)
    run(scenario())


def test_members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() -> None:
    async def scenario() -> None:
        coordinator, _, clock = await ready()
        a, b = await stable_group(coordinator, clock, 2)
        c = await join_new(coordinator, clock, client="c")
        a2 = asyncio.ensure_future(coordinator.join_group(join_request(a.member_id, client="c0")))
        await settle()
        for _ in range(REBALANCE // 5000):
            clock.advance(5000)
            await settle()
        assert a2.done() and c.done()
        assert {m[0] for m in a2.result().members} == {a.member_id, c.result().member_id}
        group = coordinator.manager.get_group("g")
        assert group is not None and not group.has(b.member_id)
    run(scenario())


def test_a_member_that_never_syncs_is_removed() -> None:
    async def scenario() -> None:
        coordinator, _, clock = await ready()
        a_task = await join_new(coordinator, clock, client="a")
        b_task = await join_new(coordinator, clock, client="b")
        clock.advance(0)
        await settle()
        a, b = a_task.result(), b_task.result()
        leader = a if a.members else b
        follower = b if leader is a else a
        await coordinator.sync_group("g", 1, leader.member_id, None, None, None, {})
        group = coordinator.manager.get_group("g")
        assert group is not None and group.is_(S.STABLE)
        for _ in range(REBALANCE // 5000):  # both heartbeat, but the follower never sends SyncGroup
            assert group.has(follower.member_id)
            clock.advance(5000)
            coordinator.heartbeat("g", leader.member_id, None, 1)
            coordinator.heartbeat("g", follower.member_id, None, 1)
        assert group is not None and not group.has(follower.member_id)
        assert group.is_(S.PREPARING_REBALANCE)
    run(scenario())


def test_leaving() -> None:
    async def scenario() -> None:
        coordinator, _, clock = await ready()
        a, b = await stable_group(coordinator, clock, 2)
        assert coordinator.leave_group("g", [("nobody", None)]) == (E.none, [E.unknown_member_id])
        assert coordinator.leave_group("other", [("x", None)]) == (E.none, [E.unknown_member_id])
        assert coordinator.leave_group("g", [(b.member_id, None)]) == (E.none, [E.none])
        group = coordinator.manager.get_group("g")
        assert group is not None and group.is_(S.PREPARING_REBALANCE)
        assert coordinator.leave_group("g", [(a.member_id, None)]) == (E.none, [E.none])
        assert group.is_(S.EMPTY) and group.generation_id == 2
        await settle()
        # Now a standalone consumer may commit.
        assert await commit(coordinator, "", -1, 9) == {("t", 0): E.none}
    run(scenario())


def test_join_errors() -> None:
    async def scenario() -> None:
        coordinator, _, clock = await ready(max_session_timeout_ms=20_000)
        assert (await coordinator.join_group(join_request(session=50))).error == E.invalid_session_timeout
        assert (await coordinator.join_group(join_request(session=30_000))).error == E.invalid_session_timeout
        assert (await coordinator.join_group(join_request("ghost"))).error == E.unknown_member_id
        bad = JoinRequest("", "", None, "c", "/h", SESSION, REBALANCE, "consumer", (("range", b""),))
        assert (await coordinator.join_group(bad)).error == E.invalid_group_id
        (a,) = await stable_group(coordinator, clock, 1)
        other = await coordinator.join_group(join_request(protocols=(("sticky", b""),)))
        assert other.error == E.inconsistent_group_protocol
        # Pre-v4 clients join at once with a member id of the coordinator's choosing.
        old = asyncio.ensure_future(coordinator.join_group(join_request(v4=False)))
        await settle()
        await coordinator.join_group(join_request(a.member_id, client="c0"))
        await settle()
        assert old.result().error == E.none and old.result().member_id.startswith("client-")
    run(scenario())


def test_a_pending_member_that_never_returns_expires() -> None:
    async def scenario() -> None:
        coordinator, _, clock = await ready()
        (a,) = await stable_group(coordinator, clock, 1)
        first = await coordinator.join_group(join_request(client="late"))
        assert first.error == E.member_id_required
        group = coordinator.manager.get_group("g")
        assert group is not None and group.is_pending_member(first.member_id)
        a_rejoin = asyncio.ensure_future(coordinator.join_group(join_request(a.member_id, client="c0")))
        await settle()
        # The rebalance waits for the member that was given an id (KIP-394).
        assert group.is_(S.PREPARING_REBALANCE) and not a_rejoin.done()
        clock.advance(SESSION)
        await settle()
        assert not group.is_pending_member(first.member_id)
        assert a_rejoin.result().error == E.none
    run(scenario())


def test_static_member_restart_keeps_its_assignment_without_a_rebalance() -> None:
    async def scenario() -> None:
        coordinator, _, clock = await ready()
        join = asyncio.ensure_future(coordinator.join_group(join_request(instance="i1")))
        await settle()
        clock.advance(0)
        await settle()
        first = join.result()
        assert first.error == E.none  # static members need no MEMBER_ID_REQUIRED round
        await coordinator.sync_group("g", 1, first.member_id, "i1", None, None, {first.member_id: b"mine"})
        again = await coordinator.join_group(join_request(instance="i1"))
        assert again.error == E.none and again.member_id != first.member_id
        assert again.generation_id == 1  # no rebalance
        sync = await coordinator.sync_group("g", 1, again.member_id, "i1", None, None, {})
        assert sync.assignment == b"mine"
        # The old incarnation is fenced.
        assert coordinator.heartbeat("g", first.member_id, "i1", 1) == E.fenced_instance_id
        assert await commit(coordinator, first.member_id, 1, 1, instance="i1") == {("t", 0): E.fenced_instance_id}
        assert coordinator.leave_group("g", [("", "i1")]) == (E.none, [E.none])
    run(scenario())


def test_commit_validation_and_fetch() -> None:
    async def scenario() -> None:
        coordinator, topic, clock = await ready(offset_metadata_max_bytes=5)
        # A standalone consumer (generation -1, no member id) commits to a group nobody joined.
        assert await commit(coordinator, "", -1, 10, group="solo") == {("t", 0): E.none}
        assert await commit(coordinator, "m", 3, 10, group="nogroup") == {("t", 0): E.illegal_generation}
        error, offsets = coordinator.fetch_offsets("solo", [("t", 0), ("t", 1)], False)
        assert error == E.none
        assert (offsets[("t", 0)].offset, offsets[("t", 0)].leader_epoch) == (10, 3)
        assert offsets[("t", 1)].offset == -1
        assert coordinator.fetch_offsets("solo", None, False)[1].keys() == {("t", 0)}
        assert await commit(coordinator, "", -1, 11, group="solo", metadata="too long") == \
            {("t", 0): E.offset_metadata_too_large}
        (a,) = await stable_group(coordinator, clock, 1)
        assert await commit(coordinator, "", -1, 1) == {("t", 0): E.unknown_member_id}
        assert await commit(coordinator, "stranger", 1, 1) == {("t", 0): E.unknown_member_id}
        assert await commit(coordinator, a.member_id, 7, 1) == {("t", 0): E.illegal_generation}
        # Not visible until replicated; require_stable reports the commit in flight.
        topic.hold = True
        pending = asyncio.ensure_future(commit(coordinator, a.member_id, 1, 42))
        await settle()
        assert coordinator.fetch_offsets("g", [("t", 0)], False)[1][("t", 0)].offset == -1
        assert coordinator.fetch_offsets("g", [("t", 0)], True)[1][("t", 0)].error == E.unstable_offset_commit
        topic.release()
        await settle()
        assert pending.result() == {("t", 0): E.none}
        assert coordinator.fetch_offsets("g", [("t", 0)], True)[1][("t", 0)].offset == 42
    run(scenario())


def test_append_errors_are_mapped_like_kafka() -> None:
    async def scenario() -> None:
        coordinator, topic, _ = await ready()
        for append_error, expected in [(E.not_leader_or_follower, E.not_coordinator),
                                       (E.not_enough_replicas, E.coordinator_not_available),
                                       (E.message_too_large, E.invalid_commit_offset_size),
                                       (E.request_timed_out, E.request_timed_out)]:
            topic.fail_with = append_error
            assert await commit(coordinator, "", -1, 1) == {("t", 0): expected}
        topic.fail_with = None
        assert coordinator.fetch_offsets("g", [("t", 0)], False)[1][("t", 0)].offset == -1
    run(scenario())


def test_a_failed_assignment_write_sends_the_group_back_to_rebalance() -> None:
    async def scenario() -> None:
        coordinator, topic, clock = await ready()
        task = await join_new(coordinator, clock)
        clock.advance(0)
        await settle()
        join = task.result()
        topic.fail_with = E.request_timed_out
        sync = await coordinator.sync_group("g", 1, join.member_id, None, None, None, {join.member_id: b"x"})
        assert sync.error == E.rebalance_in_progress
        group = coordinator.manager.get_group("g")
        assert group is not None and group.is_(S.PREPARING_REBALANCE)
    run(scenario())


def test_a_new_coordinator_loads_groups_and_offsets_from_the_log() -> None:
    async def scenario() -> None:
        first, topic, clock = await ready()
        a, b = await stable_group(first, clock, 2)
        assert await commit(first, a.member_id, 1, 100) == {("t", 0): E.none}
        assert await commit(first, "", -1, 7, group="solo") == {("t", 0): E.none}
        first.on_resignation(0)
        assert first.heartbeat("g", a.member_id, None, 1) == E.not_coordinator
        # Another broker becomes leader of the partition and replays it.
        second, _, _ = make_coordinator(topic=topic, clock=clock)
        second.on_election(0)
        assert second.heartbeat("g", a.member_id, None, 1) == E.coordinator_load_in_progress
        await settle()
        group = second.manager.get_group("g")
        assert group is not None and group.is_(S.STABLE) and group.generation_id == 1
        assert group.leader_id == a.member_id
        assert group.get(b.member_id).assignment == f"assigned-{b.member_id}".encode()
        assert second.heartbeat("g", a.member_id, None, 1) == E.none
        assert second.fetch_offsets("g", [("t", 0)], False)[1][("t", 0)].offset == 100
        assert second.fetch_offsets("solo", [("t", 0)], False)[1][("t", 0)].offset == 7
        sync = await second.sync_group("g", 1, b.member_id, None, None, None, {})
        assert sync.assignment == f"assigned-{b.member_id}".encode()
        # The loaded members' sessions run: the one that stays silent goes.
        clock.advance(SESSION // 2)
        assert second.heartbeat("g", a.member_id, None, 1) == E.none
        clock.advance(SESSION // 2 + 1)
        assert not group.has(b.member_id)
    run(scenario())


def test_unloading_answers_waiting_members() -> None:
    async def scenario() -> None:
        coordinator, _, clock = await ready()
        (a,) = await stable_group(coordinator, clock, 1)
        b = await join_new(coordinator, clock, client="b")
        coordinator.on_resignation(0)
        await settle()
        assert b.result().error == E.not_coordinator
        assert (await coordinator.join_group(join_request(a.member_id))).error == E.not_coordinator
        assert clock.pending() == 0  # every timer of the group was cancelled
    run(scenario())


def test_delete_groups_and_offsets() -> None:
    async def scenario() -> None:
        coordinator, topic, clock = await ready()
        (a,) = await stable_group(coordinator, clock, 1)
        assert await commit(coordinator, a.member_id, 1, 5) == {("t", 0): E.none}
        assert await coordinator.commit_offsets("g", a.member_id, None, 1, {
            ("other", 0): OffsetAndMetadata(1, -1, "", 0)}) == {("other", 0): E.none}
        # A stable consumer group keeps offsets of topics it subscribes to.
        group = coordinator.manager.get_group("g")
        assert group is not None
        group.members[a.member_id].protocols = (("range", b"\x00\x01\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"),)
        assert coordinator.delete_offsets("g", [("t", 0), ("other", 0)]) == (
            E.none, {("t", 0): E.group_subscribed_to_topic, ("other", 0): E.none})
        assert coordinator.delete_groups(["g", "missing"]) == {"g": E.non_empty_group, "missing": E.group_id_not_found}
        assert coordinator.leave_group("g", [(a.member_id, None)])[0] == E.none
        await settle()
        assert coordinator.delete_groups(["g"]) == {"g": E.none}
        await settle()
        assert coordinator.manager.get_group("g") is None
        assert coordinator.describe_group("g")[1].state == "Dead"
        replay = PartitionReplay()
        for chunk in topic.read(0):
            replay.apply(chunk)
        assert "g" not in replay.groups and "g" in replay.removed_groups
        assert OffsetCommitKey("g", "t", 0) not in replay.offsets
        assert GroupMetadataKey("g") not in replay.offsets  # type: ignore[comparison-overlap]
    run(scenario())


def test_describe_and_list() -> None:
    async def scenario() -> None:
        coordinator, _, clock = await ready()
        (a,) = await stable_group(coordinator, clock, 1)
        error, summary = coordinator.describe_group("g")
        assert error == E.none and (summary.state, summary.protocol_type, summary.protocol) == (
            "Stable", "consumer", "range")
        assert summary.members[0].assignment == f"assigned-{a.member_id}".encode()
        assert summary.members[0].client_host == "/127.0.0.1"
        assert coordinator.list_groups() == (E.none, [("g", "consumer", "Stable")])
        assert coordinator.list_groups(["empty"]) == (E.none, [])
        error, unknown = coordinator.describe_group("nope")
        assert (error, unknown.state, unknown.members) == (E.none, "Dead", ())
    run(scenario())


def test_expired_offsets_are_removed() -> None:
    async def scenario() -> None:
        coordinator, topic, clock = await ready(offsets_retention_ms=1000)
        assert await commit(coordinator, "", -1, 5, group="solo", timestamp=clock.now) == {("t", 0): E.none}
        clock.advance(999)
        assert coordinator.cleanup_expired_offsets() == 0
        clock.advance(1)
        assert coordinator.cleanup_expired_offsets() == 1
        await settle()
        assert coordinator.manager.get_group("solo") is None  # empty, no offsets: dead
        replay = PartitionReplay()
        for chunk in topic.read(0):
            replay.apply(chunk)
        assert not replay.offsets
    run(scenario())
