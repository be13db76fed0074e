"""One consumer group as its coordinator holds it (Kafka's GroupMetadata and MemberMetadata).

The group's state machine is a table: each state lists the states it may be entered from.

* Empty: no members (offsets may still be kept, e.g. for a standalone consumer);
* PreparingRebalance: waiting for the members to (re)join;
* CompletingRebalance: everyone joined, waiting for the leader's assignment (SyncGroup);
* Stable: the assignment is out; members heartbeat;
* Dead: removed (unloaded, deleted, or every offset expired); never left.

Members waiting on a JoinGroup or SyncGroup response are held as plain callbacks, so this
module stays free of I/O: the coordinator supplies them and the timers around them.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from odradek.protocol.consumer_protocol import consumer_subscription_topics
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

__all__ = [
    "VALID_PREVIOUS",
    "GroupMetadata",
    "GroupState",
    "IllegalGroupStateTransition",
    "JoinResult",
    "MemberMetadata",
    "OffsetAndMetadata",
    "SyncResult",
]

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_S = GroupState
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
}


class IllegalGroupStateTransition(RuntimeError):
    """A transition the table does not allow: a coordinator bug, never a client's fault."""


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    # For the leader: every member's (member id, group instance id, metadata).
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    # Where the commit sits in __consumer_offsets (None while not yet appended): of two
    # commits for one partition, the later in the log wins.
    record_offset: int | None = None


@dataclass(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    awaiting_join: Callable[[JoinResult], None] | None = None
    awaiting_sync: Callable[[SyncResult], None] | None = None
    # Joined but not yet through a completed rebalance: expires on the new-member timeout.
    is_new: bool = False
    # The coordinator's heartbeat timer (opaque here).
    heartbeat_timer: Any = None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Iterable[tuple[str, bytes]]) -> bool:
        return tuple(protocols) == self.protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def keeps_alive_without_heartbeat(self) -> bool:
        """A member in the middle of a rebalance (waiting on JoinGroup or SyncGroup) needs no
        heartbeats; a new member does, as its JoinGroup may have been abandoned."""
        return not self.is_new and (self.is_awaiting_join or self.is_awaiting_sync)


@dataclass(eq=False)
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    current_state_timestamp: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)  # group instance id -> member id
    num_members_awaiting_join: int = 0
    supported_protocols: Counter[str] = field(default_factory=Counter)
    # Set when a member joins during the initial rebalance delay: the delay is extended.
    new_member_added: bool = False
    # Members given a JoinGroup response for this generation that have not sent SyncGroup.
    pending_sync_members: set[str] = field(default_factory=set)
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    # Commits appended but not yet acknowledged, by partition, with how many are in flight.
    pending_offset_commits: Counter[tuple[str, int]] = field(default_factory=Counter)
    # Transactional commits (TxnOffsetCommit) by producer id, kept until the transaction's
    # marker (Kafka's pendingTransactionalOffsetCommits); record_offset is None until appended.
    pending_txn_offset_commits: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    # The coordinator's rebalance timer (opaque here) and the phase it belongs to.
    rebalance_timer: Any = None
    in_initial_delay: bool = False

    # ------------------------------------------------------------------ state

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalGroupStateTransition(
                f"group {self.group_id} should be in one of "
                f"{sorted(s.value for s in VALID_PREVIOUS[target])} before moving to {target}, "
                f"but it is {self.state}")
        log.debug("Group %s transitioned from %s to %s", self.group_id, self.state, target)
        self.state = target
        self.current_state_timestamp = now_ms

    # ------------------------------------------------------------------ members

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    @property
    def size(self) -> int:
        return len(self.members)

    def add_pending_member(self, member_id: str) -> None:
        self.pending_members.add(member_id)

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        names = list(protocols)
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        return (protocol_type == self.protocol_type
                and any(self.supported_protocols[p] == len(self.members) for p in names))

    def add(self, member: MemberMetadata, join_callback: Callable[[JoinResult], None] | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.awaiting_join = join_callback
        if join_callback is not None:
            self.num_members_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names())
            self.supported_protocols += Counter()  # drop the zeros
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None and \
                    self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(self, member: MemberMetadata, protocols: tuple[tuple[str, bytes], ...],
                      rebalance_timeout_ms: int, session_timeout_ms: int,
                      join_callback: Callable[[JoinResult], None] | None) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        member.protocols = protocols
        self.supported_protocols.update(member.protocol_names())
        self.supported_protocols += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_callback is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif join_callback is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.awaiting_join = join_callback

    def invoke_join_callback(self, member: MemberMetadata, result: JoinResult) -> None:
        callback = member.awaiting_join
        if callback is not None:
            member.awaiting_join = None
            self.num_members_awaiting_join -= 1
            callback(result)

    @staticmethod
    def invoke_sync_callback(member: MemberMetadata, result: SyncResult) -> None:
        callback = member.awaiting_sync
        if callback is not None:
            member.awaiting_sync = None
            callback(result)

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        current = self.static_member_id(group_instance_id)
        return current is not None and current != member_id

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str
                              ) -> MemberMetadata:
        """The static member behind ``group_instance_id`` continues under a new member id; a
        request still waiting under the old id is fenced."""
        member = self.members.pop(old_member_id)
        self.invoke_join_callback(member, JoinResult(ErrorCode.fenced_instance_id, old_member_id))
        self.invoke_sync_callback(member, SyncResult(ErrorCode.fenced_instance_id))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else promote any member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that every member supports; the
        most votes win (ties go to the protocol voted for first)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"no protocol is supported by every member of group {self.group_id}")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)

    def current_member_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        """What the leader is given to compute the assignment."""
        if self.protocol_name is None:
            raise ValueError(f"no protocol selected for group {self.group_id}")
        return tuple((m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                     for m in self.members.values())

    # ------------------------------------------------------------------ subscriptions

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members of a consumer group subscribe to (None when unknown: another
        protocol type, or a subscription that does not parse)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics.update(consumer_subscription_topics(member.metadata(self.protocol_name)))
            except (KeyError, ValueError):
                return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        topics = self.subscribed_topics()
        return True if topics is None else topic in topics

    # ------------------------------------------------------------------ offsets

    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits) or bool(self.pending_txn_offset_commits)

    def has_pending_offset_commits_for(self, tp: tuple[str, int]) -> bool:
        """A commit in flight, or a transactional one awaiting its marker, for ``tp``
        (Kafka's hasPendingOffsetCommitsForTopicPartition: OffsetFetch require_stable)."""
        return tp in self.pending_offset_commits or any(tp in p for p in self.pending_txn_offset_commits.values())

    def prepare_offset_commit(self, partitions: Iterable[tuple[str, int]]) -> None:
        for tp in partitions:
            self.pending_offset_commits[tp] += 1

    def _finish_pending(self, tp: tuple[str, int]) -> None:
        self.pending_offset_commits[tp] -= 1
        if self.pending_offset_commits[tp] <= 0:
            del self.pending_offset_commits[tp]

    def on_offset_commit_append(self, tp: tuple[str, int], committed: OffsetAndMetadata) -> None:
        if tp in self.pending_offset_commits:
            self._finish_pending(tp)
        current = self.offsets.get(tp)
        if current is None or current.record_offset is None or committed.record_offset is None or \
                current.record_offset < committed.record_offset:
            self.offsets[tp] = committed

    def fail_pending_offset_write(self, tp: tuple[str, int]) -> None:
        if tp in self.pending_offset_commits:
            self._finish_pending(tp)

    # ------------------------------------------------------------------ transactional offsets (KIP-98)

    def prepare_txn_offset_commit(self, producer_id: int, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> None:
        self.pending_txn_offset_commits.setdefault(producer_id, {}).update(offsets)

    def on_txn_offset_commit_append(self, producer_id: int, tp: tuple[str, int], committed: OffsetAndMetadata
                                    ) -> None:
        """The commit is in the log at ``committed.record_offset``; a newer TxnOffsetCommit
        for the same partition (or a completed transaction) has precedence."""
        pending = self.pending_txn_offset_commits.get(producer_id)
        if pending is not None and tp in pending and pending[tp] == replace(committed, record_offset=None):
            pending[tp] = committed

    def fail_pending_txn_offset_commit(self, producer_id: int, tp: tuple[str, int]) -> None:
        pending = self.pending_txn_offset_commits.get(producer_id)
        if pending is not None:
            pending.pop(tp, None)
            if not pending:
                del self.pending_txn_offset_commits[producer_id]

    def complete_pending_txn_offset_commit(self, producer_id: int, is_commit: bool) -> int:
        """The transaction's marker is written: on commit its offsets become the group's,
        each unless the partition has a commit later in the log (Kafka's
        completePendingTxnOffsetCommit); on abort they are dropped.  Returns how many
        offsets were made visible."""
        pending = self.pending_txn_offset_commits.pop(producer_id, None)
        if not is_commit or not pending:
            return 0
        applied = 0
        for tp, om in pending.items():
            if om.record_offset is None:
                # Kafka throws here: the marker came before the commit's own append returned.
                log.error("Group %s: transactional offset commit of producer %d for %s completed before it "
                          "was appended; ignoring it", self.group_id, producer_id, tp)
                continue
            current = self.offsets.get(tp)
            if current is None or current.record_offset is None or current.record_offset < om.record_offset:
                self.offsets[tp] = om
                applied += 1
        return applied

    def remove_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], OffsetAndMetadata]:
        """Kafka's removeOffsets: a removed partition also leaves every producer's pending
        transactional commits (the producers' entries stay until their markers)."""
        removed = {}
        for tp in partitions:
            self.pending_offset_commits.pop(tp, None)
            for pending in self.pending_txn_offset_commits.values():
                pending.pop(tp, None)
            om = self.offsets.pop(tp, None)
            if om is not None:
                removed[tp] = om
        return removed

    def remove_all_offsets(self) -> dict[tuple[str, int], OffsetAndMetadata]:
        return self.remove_offsets(list(self.offsets))

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """Offsets past retention (Kafka's rules since KIP-211).  A commit that carried its
        own retention expires at its expire timestamp.  Otherwise: in an empty group,
        ``retention_ms`` after the group became empty; for a standalone consumer's offsets
        (a group without a protocol type), ``retention_ms`` after the commit; in a stable
        consumer group, ``retention_ms`` after the commit for topics it no longer subscribes
        to.  Offsets with a commit in flight never expire."""
        subscribed: set[str] = set()
        if self.protocol_type is None:
            use_state_time = False
        elif self.is_(GroupState.EMPTY):
            use_state_time = self.current_state_timestamp >= 0
        elif self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.is_(GroupState.STABLE):
            topics = self.subscribed_topics()
            if topics is None:
                return []
            subscribed, use_state_time = topics, False
        else:
            return []
        expired = []
        for tp, om in self.offsets.items():
            if tp in self.pending_offset_commits or tp[0] in subscribed:
                continue
            if om.expire_timestamp >= 0:
                if now_ms >= om.expire_timestamp:
                    expired.append(tp)
                continue
            base = self.current_state_timestamp if use_state_time else om.commit_timestamp
            if now_ms - base >= retention_ms:
                expired.append(tp)
        return expired
