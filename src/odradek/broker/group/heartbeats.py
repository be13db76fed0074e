"""Member liveness: session timeouts of members and of pending members (Kafka's
GroupCoordinator heartbeat expiration, its ``DelayedHeartbeat`` and
``addPendingMemberExpiration``).

Every heartbeat, JoinGroup or SyncGroup step pushes a member's expiration out by its
session timeout; a member whose timer fires is reported failed.  A pending member (KIP-394:
given a member id, not yet back with it) that does not rejoin within its session timeout is
dropped.  What follows from either is the membership's business, passed in as callbacks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from odradek.broker.group.group import GroupMetadata, GroupState, MemberMetadata
from odradek.broker.group.scheduler import Scheduler, TimerHandle

log = logging.getLogger(__name__)

__all__ = ["HeartbeatExpiration"]


class HeartbeatExpiration:
    def __init__(self, scheduler: Scheduler, on_member_failed: Callable[[GroupMetadata, MemberMetadata], None],
                 on_pending_member_removed: Callable[[GroupMetadata], None]) -> None:
        self.scheduler = scheduler
        self._on_member_failed = on_member_failed
        self._on_pending_member_removed = on_pending_member_removed
        self._pending_member_timers: dict[tuple[str, str], TimerHandle] = {}

    def schedule(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int) -> None:
        """Kafka's completeAndScheduleNextHeartbeatExpiration: ``member`` is alive now and
        fails unless heard from again within ``timeout_ms``."""
        self.cancel(member)
        member.heartbeat_timer = self.scheduler.call_later(timeout_ms, lambda: self._expired(group, member))

    @staticmethod
    def cancel(member: MemberMetadata) -> None:
        """Stop watching ``member`` (it left or was removed)."""
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None

    def _expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.is_(GroupState.DEAD) or group.members.get(member.member_id) is not member:
            return
        if member.keeps_alive_without_heartbeat():
            return  # rescheduled when its rebalance step completes
        log.info("Member %s in group %s has failed, removing it from the group", member.member_id, group.group_id)
        self._on_member_failed(group, member)

    def schedule_pending_member(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        """Drop pending ``member_id`` unless it joins within ``timeout_ms``."""
        key = (group.group_id, member_id)
        self.cancel_pending_member(*key)
        self._pending_member_timers[key] = self.scheduler.call_later(
            timeout_ms, lambda: self._pending_member_expired(group, member_id))

    def cancel_pending_member(self, group_id: str, member_id: str) -> None:
        """The pending member joined, left or its group went away."""
        handle = self._pending_member_timers.pop((group_id, member_id), None)
        if handle is not None:
            handle.cancel()

    def _pending_member_expired(self, group: GroupMetadata, member_id: str) -> None:
        self._pending_member_timers.pop((group.group_id, member_id), None)
        if group.is_(GroupState.DEAD) or not group.is_pending_member(member_id):
            return
        log.info("Pending member %s in group %s has been removed after session timeout expiration",
                 member_id, group.group_id)
        group.remove(member_id)
        self._on_pending_member_removed(group)
