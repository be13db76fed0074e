"""Group membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup (Kafka's GroupCoordinator
doJoinGroup, doSyncGroup, heartbeat and leaveGroup).

Members join, which starts a rebalance (its timing is :mod:`rebalance`'s).  The leader's
SyncGroup carries the assignment, which is persisted to ``__consumer_offsets`` before it is
handed to every member.  Members heartbeat within their session timeout (see
:mod:`heartbeats`) or are removed, which starts a rebalance.

Everything runs on the broker's event loop: waiting requests are plain callbacks on the
members (see :mod:`group`), timers come from a :class:`Scheduler`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

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
from odradek.broker.group.rebalance import Rebalancer, cancel_group_timer, join_result
from odradek.broker.group.scheduler import Scheduler
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

__all__ = ["UNKNOWN_MEMBER_ID", "GroupMembership", "JoinRequest"]

S = GroupState
E = ErrorCode
UNKNOWN_MEMBER_ID = ""
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool = True  # JoinGroup v4+
    supports_skip_assignment: bool = False  # JoinGroup v9+
    reason: str | None = None


def _chain(first: Callable[[R], None] | None, then: Callable[[R], None]) -> Callable[[R], None]:
    """A member that sends JoinGroup (or SyncGroup) again while one is pending gets both
    answered, so no request is left waiting forever (responses go out in request order on
    a connection)."""
    if first is None:
        return then

    def both(result: R) -> None:
        first(result)
        then(result)
    return both


def _member_error(group: GroupMetadata, generation_id: int, member_id: str,
                  group_instance_id: str | None) -> ErrorCode | None:
    """Why a SyncGroup or Heartbeat from this member of this generation is refused, if it is:
    the checks (in Kafka's order) both start with."""
    if group.is_(S.DEAD):
        return E.coordinator_not_available
    if group.is_static_member_fenced(group_instance_id, member_id):
        return E.fenced_instance_id
    if not group.has(member_id):
        return E.unknown_member_id
    if generation_id != group.generation_id:
        return E.illegal_generation
    return None


class GroupMembership:
    def __init__(self, config: GroupConfig, manager: GroupMetadataManager, scheduler: Scheduler,
                 now_ms: Callable[[], int]) -> None:
        self.config = config
        self.manager = manager
        self.scheduler = scheduler
        self.now_ms = now_ms
        self._background: set[asyncio.Task[None]] = set()
        self.heartbeats = HeartbeatExpiration(scheduler, self._on_member_failed, self._on_pending_member_removed)
        self.rebalancer = Rebalancer(config, manager, scheduler, now_ms, self.heartbeats, self._spawn)

    def shutdown(self) -> None:
        for task in list(self._background):
            task.cancel()

    # ------------------------------------------------------------------ loading and unloading

    def on_group_loaded(self, group: GroupMetadata) -> None:
        for member in group.members.values():
            self.heartbeats.schedule(group, member, member.session_timeout_ms)

    def on_group_unloaded(self, group: GroupMetadata) -> None:
        group.transition_to(S.DEAD, self.now_ms())
        cancel_group_timer(group)
        for member_id in group.pending_members:
            self.heartbeats.cancel_pending_member(group.group_id, member_id)
        for member in group.members.values():
            self.heartbeats.cancel(member)
            group.invoke_join_callback(member, JoinResult(E.not_coordinator, member.member_id))
            group.invoke_sync_callback(member, SyncResult(E.not_coordinator))

    @staticmethod
    def validate_current_member(group: GroupMetadata, member_id: str, group_instance_id: str | None
                                ) -> ErrorCode | None:
        """The member exists and, for a static member, its instance id maps to it."""
        if group_instance_id is not None:
            current = group.static_member_id(group_instance_id)
            if current != member_id:
                return E.fenced_instance_id if current is not None else E.unknown_member_id
            return None
        if not group.has(member_id):
            return E.unknown_member_id
        return None

    # ------------------------------------------------------------------ JoinGroup

    async def join_group(self, request: JoinRequest) -> JoinResult:
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()

        def respond(result: JoinResult) -> None:
            if not future.done():
                future.set_result(result)

        self.handle_join_group(request, respond)
        return await future

    def handle_join_group(self, req: JoinRequest, respond: Callable[[JoinResult], None]) -> None:
        error = self.manager.validate_group_status(req.group_id)
        if error is not None:
            respond(JoinResult(error, req.member_id))
            return
        if not self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms:
            respond(JoinResult(E.invalid_session_timeout, req.member_id))
            return
        unknown = req.member_id == UNKNOWN_MEMBER_ID
        group = self.manager.get_group(req.group_id)
        if group is None:
            if not unknown:
                respond(JoinResult(E.unknown_member_id, req.member_id))
                return
            group = self.manager.add_group(GroupMetadata(req.group_id, current_state_timestamp=self.now_ms()))
        if not self._accept_joining_member(group, req.member_id):
            member = group.members.get(req.member_id)
            if member is not None:
                self._remove_member_and_update_group(group, member, "the group is at its maximum size")
            else:
                group.remove(req.member_id)
            respond(JoinResult(E.group_max_size_reached, req.member_id))
        elif unknown:
            self._do_new_member_join(group, req, respond)
        else:
            self._do_current_member_join(group, req, respond)
        if group.is_(S.PREPARING_REBALANCE):
            self.rebalancer.try_complete_join(group)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        max_size = self.config.max_size
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.is_(S.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.is_awaiting_join) or group.num_members_awaiting_join < max_size
        return group.has(member_id) or group.size < max_size

    def _do_new_member_join(self, group: GroupMetadata, req: JoinRequest, respond: Callable[[JoinResult], None]
                            ) -> None:
        if group.is_(S.DEAD):
            respond(JoinResult(E.coordinator_not_available, req.member_id))
            return
        if not group.supports_protocols(req.protocol_type, (name for name, _ in req.protocols)):
            respond(JoinResult(E.inconsistent_group_protocol, req.member_id))
            return
        new_member_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old_member_id = group.static_member_id(req.group_instance_id)
            if old_member_id is not None:
                log.info("Static member with group.instance.id %s joins group %s in state %s; replacing member "
                         "%s with %s", req.group_instance_id, group.group_id, group.state, old_member_id,
                         new_member_id)
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, req, respond)
            else:
                self._add_member_and_rebalance(group, req, new_member_id, respond)
        elif req.require_known_member_id:
            # KIP-394: the member must come back with the id it is given, so a JoinGroup whose
            # response was lost leaves no member behind.
            group.add_pending_member(new_member_id)
            self.heartbeats.schedule_pending_member(group, new_member_id, req.session_timeout_ms)
            respond(JoinResult(E.member_id_required, new_member_id))
        else:
            self._add_member_and_rebalance(group, req, new_member_id, respond)

    def _do_current_member_join(self, group: GroupMetadata, req: JoinRequest,
                                respond: Callable[[JoinResult], None]) -> None:
        member_id = req.member_id
        if group.is_(S.DEAD):
            respond(JoinResult(E.coordinator_not_available, member_id))
            return
        if not group.supports_protocols(req.protocol_type, (name for name, _ in req.protocols)):
            respond(JoinResult(E.inconsistent_group_protocol, member_id))
            return
        if group.is_pending_member(member_id):
            self._add_member_and_rebalance(group, req, member_id, respond)
            return
        error = self.validate_current_member(group, member_id, req.group_instance_id)
        if error is not None:
            respond(JoinResult(error, member_id))
            return
        member = group.get(member_id)
        if group.is_(S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, req, respond, "member joining during a rebalance")
        elif group.is_(S.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # The JoinGroup response was probably lost: answer it again.
                respond(join_result(group, member, with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, req, respond, "member metadata changed")
        elif group.is_(S.STABLE):
            if group.is_leader(member_id):
                # A leader rejoins to rebalance on changes the member metadata does not show
                # (the subscribed topics' partitions, for consumers).
                self._update_member_and_rebalance(group, member, req, respond, "leader rejoining")
            elif not member.matches(req.protocols):
                self._update_member_and_rebalance(group, member, req, respond, "member metadata changed")
            else:
                respond(join_result(group, member, with_members=False))
        else:
            respond(JoinResult(E.unknown_member_id, member_id))

    def _add_member_and_rebalance(self, group: GroupMetadata, req: JoinRequest, member_id: str,
                                  respond: Callable[[JoinResult], None]) -> None:
        member = MemberMetadata(member_id, req.group_instance_id, req.client_id, req.client_host,
                                req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type, req.protocols,
                                is_new=True)
        if group.is_(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True  # extends the initial rebalance delay
        self.heartbeats.cancel_pending_member(group.group_id, member_id)
        group.add(member, respond)
        # A new member cannot heartbeat until it has joined; its JoinGroup is abandoned after
        # the new-member timeout (its sender may be long gone).
        self.heartbeats.schedule(group, member, self.config.new_member_join_timeout_ms)
        self.rebalancer.maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata, req: JoinRequest,
                                     respond: Callable[[JoinResult], None], reason: str) -> None:
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms,
                            _chain(member.awaiting_join, respond))
        self.rebalancer.maybe_prepare_rebalance(group, f"{reason} ({member.member_id})")

    def _update_static_member_and_rebalance(self, group: GroupMetadata, old_member_id: str, new_member_id: str,
                                            req: JoinRequest, respond: Callable[[JoinResult], None]) -> None:
        assert req.group_instance_id is not None
        current_leader = group.leader_id
        member = group.replace_static_member(req.group_instance_id, old_member_id, new_member_id)
        self.heartbeats.schedule(group, member, member.session_timeout_ms)
        old_protocols = member.protocols
        old_timeouts = (member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, respond)
        if group.is_(S.STABLE):
            if group.select_protocol() == group.protocol_name:
                # Nothing the assignment depends on changed: keep the generation, persist the
                # new member id, and let the member fetch its assignment with SyncGroup.
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                self._spawn(self._store_replaced_static_member(
                    group, member, old_member_id, current_leader, old_protocols, old_timeouts, assignment,
                    req.supports_skip_assignment))
            else:
                self.rebalancer.maybe_prepare_rebalance(group, f"static member {new_member_id} changed the group's protocol")
        elif group.is_(S.COMPLETING_REBALANCE):
            # The leader may be assigning to the old member id: start over.
            self.rebalancer.prepare_rebalance(group, f"static member {new_member_id} rejoined during the sync phase")

    async def _store_replaced_static_member(
            self, group: GroupMetadata, member: MemberMetadata, old_member_id: str, current_leader: str | None,
            old_protocols: tuple[tuple[str, bytes], ...], old_timeouts: tuple[int, int],
            assignment: Mapping[str, bytes], supports_skip: bool) -> None:
        error = await self.manager.store_group(group, assignment)
        callback = member.awaiting_join
        if callback is None or group.is_(S.DEAD):
            return  # answered meanwhile: a rebalance completed, or the group was unloaded
        if error != E.none:
            log.warning("Failed to persist the new member id %s of static member %s in group %s: %s; reverting",
                        member.member_id, member.group_instance_id, group.group_id, error.name)
            assert member.group_instance_id is not None
            group.update_member(member, old_protocols, old_timeouts[0], old_timeouts[1], None)
            group.replace_static_member(member.group_instance_id, member.member_id, old_member_id)
            self.heartbeats.schedule(group, member, member.session_timeout_ms)
            callback(JoinResult(error, UNKNOWN_MEMBER_ID, group.generation_id, group.protocol_type,
                                group.protocol_name, current_leader or ""))
        elif supports_skip:
            # JoinGroup v9: a static leader is told it leads but need not assign.
            is_leader = group.is_leader(member.member_id)
            group.invoke_join_callback(member, join_result(group, member, with_members=is_leader,
                                                                 skip_assignment=is_leader))
        else:
            # Older clients: report the old leader id, so a returning leader does not compute
            # an assignment that a stable group would not distribute.
            group.invoke_join_callback(member, join_result(group, member, with_members=False,
                                                                 leader_id=current_leader or ""))

    # ------------------------------------------------------------------ SyncGroup

    async def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: Mapping[str, bytes]) -> SyncResult:
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()

        def respond(result: SyncResult) -> None:
            if not future.done():
                future.set_result(result)

        self.handle_sync_group(group_id, generation_id, member_id, group_instance_id, protocol_type,
                               protocol_name, assignments, respond)
        return await future

    def handle_sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                          protocol_type: str | None, protocol_name: str | None, assignments: Mapping[str, bytes],
                          respond: Callable[[SyncResult], None]) -> None:
        error = self.manager.validate_group_status(group_id)
        group = self.manager.get_group(group_id) if error is None else None
        if error is None and group is None:
            error = E.unknown_member_id
        if error is None and group is not None:
            error = self._sync_error(group, generation_id, member_id, group_instance_id, protocol_type, protocol_name)
        if error is not None or group is None:
            respond(SyncResult(error or E.unknown_server_error))
            return
        member = group.get(member_id)
        if group.is_(S.COMPLETING_REBALANCE):
            member.awaiting_sync = _chain(member.awaiting_sync, respond)
            self.rebalancer.remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info("Assignment received from leader %s for group %s for generation %d. The group has %d "
                         "members, %d of which are static.", member_id, group.group_id, group.generation_id,
                         group.size, len(group.static_members))
                missing = [m for m in group.members if m not in assignments]
                if missing:
                    log.warning("The leader of group %s gave no assignment to %s", group.group_id, missing)
                assignment = {m: assignments.get(m, b"") for m in group.members}
                self._spawn(self._store_assignment(group, group.generation_id, assignment))
        else:  # Stable: the assignment is known
            self.rebalancer.remove_pending_sync_member(group, member_id)
            respond(SyncResult(E.none, member.assignment, group.protocol_type, group.protocol_name))
            self.heartbeats.schedule(group, member, member.session_timeout_ms)

    def _sync_error(self, group: GroupMetadata, generation_id: int, member_id: str, group_instance_id: str | None,
                    protocol_type: str | None, protocol_name: str | None) -> ErrorCode | None:
        error = _member_error(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return error
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return E.inconsistent_group_protocol
        if group.is_(S.EMPTY):
            return E.unknown_member_id
        if group.is_(S.PREPARING_REBALANCE):
            return E.rebalance_in_progress
        return None

    async def _store_assignment(self, group: GroupMetadata, generation: int, assignment: dict[str, bytes]) -> None:
        error = await self.manager.store_group(group, assignment)
        # A member may have joined (or the group been unloaded) meanwhile: only the same
        # generation, still waiting for its assignment, takes this one.
        if not group.is_(S.COMPLETING_REBALANCE) or group.generation_id != generation:
            return
        if error != E.none:
            self.rebalancer.reset_and_propagate_assignment_error(group, error)
            self.rebalancer.maybe_prepare_rebalance(group, f"error {error.name} storing the group assignment")
            return
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self.rebalancer.propagate_assignment(group, E.none)
        group.transition_to(S.STABLE, self.now_ms())

    # ------------------------------------------------------------------ Heartbeat and LeaveGroup

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
                  ) -> ErrorCode:
        error = self.manager.validate_group_status(group_id)
        if error is not None:
            return error
        group = self.manager.get_group(group_id)
        if group is None:
            return E.unknown_member_id
        error = _member_error(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return error
        if group.is_(S.EMPTY):
            return E.unknown_member_id
        member = group.get(member_id)
        self.heartbeats.schedule(group, member, member.session_timeout_ms)
        return E.rebalance_in_progress if group.is_(S.PREPARING_REBALANCE) else E.none

    def leave_group(self, group_id: str, leaving: Iterable[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(member id, group instance id) pairs leave; returns the group-level error and one
        error per member."""
        leaving = list(leaving)
        error = self.manager.validate_group_status(group_id)
        if error is not None:
            return error, []
        group = self.manager.get_group(group_id)
        if group is None:
            return E.none, [E.unknown_member_id] * len(leaving)
        if group.is_(S.DEAD):
            return E.coordinator_not_available, []
        errors = []
        for member_id, instance_id in leaving:
            if member_id == UNKNOWN_MEMBER_ID:
                # Removing a static member by its instance id (an administrator's request).
                current = group.static_member_id(instance_id)
                if current is None:
                    errors.append(E.unknown_member_id)
                    continue
                self._remove_member_and_update_group(group, group.get(current), "static member removed")
            elif group.is_pending_member(member_id):
                self.heartbeats.cancel_pending_member(group.group_id, member_id)
                group.remove(member_id)
                self.rebalancer.try_complete_join(group)
            else:
                member_error = self.validate_current_member(group, member_id, instance_id)
                if member_error is not None:
                    errors.append(member_error)
                    continue
                log.info("Member %s has left group %s", member_id, group_id)
                self._remove_member_and_update_group(group, group.get(member_id), f"member {member_id} left")
            errors.append(E.none)
        return E.none, errors

    def _on_member_failed(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._remove_member_and_update_group(group, member, f"member {member.member_id} failed (session expired)")

    def _on_pending_member_removed(self, group: GroupMetadata) -> None:
        self.rebalancer.try_complete_join(group)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        # A JoinGroup or SyncGroup still waiting is told the member is gone (it will rejoin
        # from scratch if it is still alive).
        group.invoke_join_callback(member, JoinResult(E.unknown_member_id, UNKNOWN_MEMBER_ID))
        group.invoke_sync_callback(member, SyncResult(E.unknown_member_id))
        self.heartbeats.cancel(member)
        group.remove(member.member_id)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self.rebalancer.maybe_prepare_rebalance(group, reason)
        elif group.is_(S.PREPARING_REBALANCE):
            self.rebalancer.try_complete_join(group)

    def _spawn(self, coro: object) -> None:
        task = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._background.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("Group coordinator task failed", exc_info=task.exception())
