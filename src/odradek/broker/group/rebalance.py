"""Rebalance timing: from PreparingRebalance to a new generation and its SyncGroup phase
(Kafka's GroupCoordinator prepareRebalance / onCompleteJoin with ``DelayedJoin``,
``InitialDelayedJoin`` and ``DelayedSync``).

The coordinator waits for every member it knows to rejoin (up to the rebalance timeout; for
a group that was empty, ``group.initial.rebalance.delay.ms`` first, extended while new
members keep arriving), then starts a new generation and answers every JoinGroup, the
leader's with all members' subscriptions.  Members that get their JoinGroup answer but never
send SyncGroup are removed after the rebalance timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from odradek.broker.group.group import (
    GroupMetadata,
    GroupState,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from odradek.broker.group.group_config import GroupConfig
from odradek.broker.group.group_metadata_manager import GroupMetadataManager
from odradek.broker.group.heartbeats import HeartbeatExpiration
from odradek.broker.group.offsets_topic import OFFSETS_TOPIC
from odradek.broker.group.scheduler import Scheduler
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

__all__ = ["Rebalancer", "cancel_group_timer", "join_result"]

S = GroupState
E = ErrorCode


def join_result(group: GroupMetadata, member: MemberMetadata, *, with_members: bool,
                leader_id: str | None = None, skip_assignment: bool = False) -> JoinResult:
    """The JoinGroup answer for ``member`` in the current generation (the leader's lists
    every member's subscription)."""
    return JoinResult(
        E.none, member.member_id, group.generation_id, group.protocol_type, group.protocol_name,
        (leader_id if leader_id is not None else group.leader_id) or "",
        group.current_member_metadata() if with_members else (), skip_assignment)


def cancel_group_timer(group: GroupMetadata) -> None:
    """Cancel the group's join or sync timer, if one runs."""
    if group.rebalance_timer is not None:
        group.rebalance_timer.cancel()
        group.rebalance_timer = None


class Rebalancer:
    def __init__(self, config: GroupConfig, manager: GroupMetadataManager, scheduler: Scheduler,
                 now_ms: Callable[[], int], heartbeats: HeartbeatExpiration,
                 spawn: Callable[[Coroutine[Any, Any, None]], None]) -> None:
        self.config = config
        self.manager = manager
        self.scheduler = scheduler
        self.now_ms = now_ms
        self.heartbeats = heartbeats
        self._spawn = spawn

    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        """Start a rebalance if the group's state allows one."""
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        """Move to PreparingRebalance and start the join timer (the initial delay for an
        empty group)."""
        if group.is_(S.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment_error(group, E.rebalance_in_progress)
        cancel_group_timer(group)
        group.pending_sync_members.clear()
        initial = group.is_(S.EMPTY)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.in_initial_delay = True
            group.rebalance_timer = self.scheduler.call_later(
                delay, lambda: self._on_initial_delay_expired(group, delay, remaining))
        else:
            group.in_initial_delay = False
            group.rebalance_timer = self.scheduler.call_later(
                group.rebalance_timeout_ms(), lambda: self._on_rebalance_timeout(group))
        log.info("Preparing to rebalance group %s in state %s with old generation %d (%s-%d) (reason: %s)",
                 group.group_id, group.state, group.generation_id, OFFSETS_TOPIC,
                 self.manager.partition_for(group.group_id), reason)
        group.transition_to(S.PREPARING_REBALANCE, self.now_ms())
        if not initial:
            self.try_complete_join(group)

    def _on_initial_delay_expired(self, group: GroupMetadata, delay: int, remaining: int) -> None:
        group.rebalance_timer = None
        if not group.is_(S.PREPARING_REBALANCE):
            return
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            next_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            next_remaining = max(remaining - delay, 0)
            group.rebalance_timer = self.scheduler.call_later(
                next_delay, lambda: self._on_initial_delay_expired(group, next_delay, next_remaining))
            return
        group.in_initial_delay = False
        self._complete_join(group)

    def _on_rebalance_timeout(self, group: GroupMetadata) -> None:
        group.rebalance_timer = None
        if group.is_(S.PREPARING_REBALANCE):
            self._complete_join(group)

    def try_complete_join(self, group: GroupMetadata) -> None:
        """Complete the join phase early once every known member has rejoined."""
        if group.is_(S.PREPARING_REBALANCE) and not group.in_initial_delay and group.has_all_members_joined():
            cancel_group_timer(group)
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        if group.is_(S.DEAD):
            return
        for member in group.not_yet_rejoined_members():
            if not member.is_static:  # static members keep their place until their session expires
                self.heartbeats.cancel(member)
                group.remove(member.member_id)
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("Group %s could not complete rebalance because no members rejoined", group.group_id)
            group.rebalance_timer = self.scheduler.call_later(
                group.rebalance_timeout_ms(), lambda: self._on_rebalance_timeout(group))
            return
        group.init_next_generation(self.now_ms())
        if group.is_(S.EMPTY):
            log.info("Group %s with generation %d is now empty (%s-%d)", group.group_id, group.generation_id,
                     OFFSETS_TOPIC, self.manager.partition_for(group.group_id))
            self._spawn(self._store_empty_group(group))
            return
        log.info("Stabilized group %s generation %d (%s-%d) with %d members", group.group_id, group.generation_id,
                 OFFSETS_TOPIC, self.manager.partition_for(group.group_id), group.size)
        # Members that do not follow up with SyncGroup within the rebalance timeout are removed.
        group.pending_sync_members = set(group.members)
        generation = group.generation_id
        group.rebalance_timer = self.scheduler.call_later(
            group.rebalance_timeout_ms(), lambda: self._on_sync_timeout(group, generation))
        for member in list(group.members.values()):
            group.invoke_join_callback(member, join_result(group, member,
                                                           with_members=group.is_leader(member.member_id)))
            self.heartbeats.schedule(group, member, member.session_timeout_ms)
            member.is_new = False

    async def _store_empty_group(self, group: GroupMetadata) -> None:
        error = await self.manager.store_group(group, {})
        if error != E.none:
            log.warning("Failed to write the empty metadata of group %s: %s", group.group_id, error.name)

    def _on_sync_timeout(self, group: GroupMetadata, generation: int) -> None:
        group.rebalance_timer = None
        if group.generation_id != generation or group.state not in (S.COMPLETING_REBALANCE, S.STABLE) \
                or not group.pending_sync_members:
            return
        missing = sorted(group.pending_sync_members)
        log.info("Group %s removed members who haven't sent their sync requests: %s", group.group_id, missing)
        for member_id in missing:
            member = group.remove(member_id)
            if member is not None:
                self.heartbeats.cancel(member)
                group.invoke_sync_callback(member, SyncResult(E.unknown_member_id))
        self.maybe_prepare_rebalance(group, "members did not send SyncGroup in time")

    def remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        """``member_id`` sent its SyncGroup; the sync timer stops once all have."""
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members and group.state in (S.COMPLETING_REBALANCE, S.STABLE):
            cancel_group_timer(group)

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        """Clear every assignment and answer waiting SyncGroups with ``error``."""
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        """Answer every waiting SyncGroup with its member's assignment (or ``error``)."""
        ok = error == E.none
        for member in group.members.values():
            if member.is_awaiting_sync:
                group.invoke_sync_callback(member, SyncResult(
                    error, member.assignment, group.protocol_type if ok else None,
                    group.protocol_name if ok else None))
                # A session that ran out while the member waited for its assignment starts over.
                self.heartbeats.schedule(group, member, member.session_timeout_ms)
