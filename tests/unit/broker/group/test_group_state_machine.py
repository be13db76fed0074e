"""GroupMetadata: the state table, members and protocols, offsets and their expiry."""

from __future__ import annotations

import struct

import pytest

from odradek.broker.group.group import (
    VALID_PREVIOUS,
    GroupMetadata,
    GroupState,
    IllegalGroupStateTransition,
    JoinResult,
    MemberMetadata,
    OffsetAndMetadata,
)
from odradek.protocol.consumer_protocol import consumer_subscription_topics
from odradek.protocol.errors import ErrorCode

S = GroupState


def member(member_id: str, protocols: tuple[tuple[str, bytes], ...] = (("range", b"r"),), *,
           instance: str | None = None) -> MemberMetadata:
    return MemberMetadata(member_id, instance, "client", "/127.0.0.1", 30000, 10000, "consumer", protocols)


def subscription(*topics: str, version: int = 1) -> bytes:
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)  # user data: null (v1 continues with owned partitions)


def test_the_table_is_kafkas() -> None:
    table = VALID_PREVIOUS
    assert table == {
        S.EMPTY: {S.PREPARING_REBALANCE},
        S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
        S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
        S.STABLE: {S.COMPLETING_REBALANCE},
        S.DEAD: {S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD},
    }


@pytest.mark.parametrize("start", list(S))
@pytest.mark.parametrize("target", list(S))
def test_every_transition_follows_the_table(start: GroupState, target: GroupState) -> None:
    group = GroupMetadata("g", state=start)
    if start in VALID_PREVIOUS[target]:
        group.transition_to(target, 123)
        assert group.state is target
        assert group.current_state_timestamp == 123
    else:
        with pytest.raises(IllegalGroupStateTransition):
            group.transition_to(target, 123)
        assert group.state is start


def test_a_full_rebalance_cycle() -> None:
    group = GroupMetadata("g")
    assert group.can_rebalance()
    answered: list[JoinResult] = []
    group.add(member("a", (("range", b"a1"), ("roundrobin", b"a2"))), answered.append)
    group.add(member("b", (("roundrobin", b"b2"), ("range", b"b1"))), answered.append)
    assert group.leader_id == "a"
    assert group.protocol_type == "consumer"
    group.transition_to(S.PREPARING_REBALANCE, 1)
    assert group.has_all_members_joined()
    group.init_next_generation(2)
    assert (group.state, group.generation_id) == (S.COMPLETING_REBALANCE, 1)
    # One vote each; the tie goes to the protocol voted for first.
    assert group.protocol_name == "range"
    assert group.current_member_metadata() == (("a", None, b"a1"), ("b", None, b"b1"))
    assert group.can_rebalance()  # a member joining now starts over
    group.transition_to(S.STABLE, 3)
    assert group.can_rebalance()


def test_protocol_vote_and_support() -> None:
    group = GroupMetadata("g")
    assert not group.supports_protocols("", ["range"])  # a protocol type is required
    assert group.supports_protocols("consumer", ["range"])
    group.add(member("a", (("roundrobin", b""), ("range", b""))), None)
    group.add(member("b", (("roundrobin", b""), ("range", b""))), None)
    group.add(member("c", (("range", b""), ("roundrobin", b""))), None)
    assert group.select_protocol() == "roundrobin"  # two votes to one
    group.transition_to(S.PREPARING_REBALANCE, 0)
    assert group.supports_protocols("consumer", ["sticky", "range"])
    assert not group.supports_protocols("consumer", ["sticky"])
    assert not group.supports_protocols("connect", ["range"])
    group.remove("c")
    assert group.candidate_protocols() == {"roundrobin", "range"}


def test_removing_the_leader_promotes_the_next_member() -> None:
    group = GroupMetadata("g")
    group.add(member("a"), None)
    group.add(member("b"), lambda _: None)
    assert group.num_members_awaiting_join == 1
    assert not group.has_all_members_joined()
    assert [m.member_id for m in group.not_yet_rejoined_members()] == ["a"]
    assert group.maybe_elect_new_joined_leader()
    assert group.leader_id == "b"  # a had not rejoined
    group.remove("b")
    assert group.leader_id == "a"
    assert group.num_members_awaiting_join == 0
    group.remove("a")
    assert group.leader_id is None
    assert not group.supported_protocols


def test_static_members_are_replaced_and_fenced() -> None:
    group = GroupMetadata("g")
    fenced: list[JoinResult] = []
    group.add(member("old", instance="i1"), fenced.append)
    assert group.static_member_id("i1") == "old"
    replaced = group.replace_static_member("i1", "old", "new")
    assert replaced.member_id == "new" and group.has("new") and not group.has("old")
    assert group.leader_id == "new"
    assert fenced == [JoinResult(ErrorCode.fenced_instance_id, "old")]
    assert group.num_members_awaiting_join == 0
    assert group.is_static_member_fenced("i1", "old")
    assert not group.is_static_member_fenced("i1", "new")
    assert not group.is_static_member_fenced(None, "whatever")


def test_offset_commits_apply_in_log_order() -> None:
    group = GroupMetadata("g")
    tp = ("t", 0)
    group.prepare_offset_commit([tp])
    group.prepare_offset_commit([tp])
    assert group.pending_offset_commits[tp] == 2
    group.on_offset_commit_append(tp, OffsetAndMetadata(20, -1, "", 1, record_offset=11))
    group.on_offset_commit_append(tp, OffsetAndMetadata(10, -1, "", 1, record_offset=10))  # earlier in the log
    assert group.offsets[tp].offset == 20
    assert not group.pending_offset_commits
    group.prepare_offset_commit([tp])
    group.fail_pending_offset_write(tp)
    assert group.offsets[tp].offset == 20 and not group.pending_offset_commits
    assert group.remove_all_offsets() == {tp: OffsetAndMetadata(20, -1, "", 1, record_offset=11)}
    assert not group.has_offsets()


def test_offset_expiry_rules() -> None:
    day = 86_400_000
    # A standalone consumer's offsets (no protocol type): by commit time.
    simple = GroupMetadata("s", current_state_timestamp=0)
    simple.offsets = {("t", 0): OffsetAndMetadata(1, -1, "", 0), ("t", 1): OffsetAndMetadata(1, -1, "", 5 * day)}
    assert simple.expired_offsets(7 * day, 7 * day) == [("t", 0)]
    # An empty consumer group: from when it became empty, whatever the commit time.
    empty = GroupMetadata("e", protocol_type="consumer", current_state_timestamp=6 * day)
    empty.offsets = {("t", 0): OffsetAndMetadata(1, -1, "", 0)}
    assert empty.expired_offsets(7 * day, 7 * day) == []
    assert empty.expired_offsets(13 * day, 7 * day) == [("t", 0)]
    # An explicit expire timestamp (OffsetCommit v2-4 retention time) wins.
    empty.offsets[("t", 1)] = OffsetAndMetadata(1, -1, "", 0, expire_timestamp=day)
    assert ("t", 1) in empty.expired_offsets(2 * day, 7 * day)
    # Pending commits never expire.
    empty.prepare_offset_commit([("t", 0)])
    assert ("t", 0) not in empty.expired_offsets(13 * day, 7 * day)
    # A stable consumer group: only topics it no longer subscribes to, by commit time.
    stable = GroupMetadata("c", state=S.STABLE, protocol_type="consumer", protocol_name="range")
    stable.add(member("a", (("range", subscription("live")),)), None)
    stable.offsets = {("live", 0): OffsetAndMetadata(1, -1, "", 0), ("gone", 0): OffsetAndMetadata(1, -1, "", 0)}
    assert stable.expired_offsets(8 * day, 7 * day) == [("gone", 0)]
    # A group in a rebalance keeps everything.
    stable.state = S.PREPARING_REBALANCE
    assert stable.expired_offsets(8 * day, 7 * day) == []


def test_consumer_subscription_topics() -> None:
    assert consumer_subscription_topics(subscription("a", "bb", version=0)) == ["a", "bb"]
    assert consumer_subscription_topics(subscription(version=3)) == []
    group = GroupMetadata("g", protocol_type="consumer", protocol_name="range")
    group.add(member("a", (("range", subscription("x")),)), None)
    group.add(member("b", (("range", subscription("y")),)), None)
    assert group.subscribed_topics() == {"x", "y"}
    assert group.is_subscribed_to_topic("x") and not group.is_subscribed_to_topic("z")
    group.members["b"].protocols = (("range", b"\x00"),)  # unparseable: assume subscribed
    assert group.subscribed_topics() is None
    assert group.is_subscribed_to_topic("z")
