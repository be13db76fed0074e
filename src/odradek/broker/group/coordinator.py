"""GroupCoordinator: consumer groups for the ``__consumer_offsets`` partitions this broker
leads (Kafka's classic, ZooKeeper-era group coordinator).

This module wires the coordinator to the broker (leadership hooks, offset expiry) and
holds the offset and administration operations: commits are validated against the member
and generation (generation -1 without a member id is a standalone consumer, allowed while
the group has no members), appended with acks=-1 and answered once replicated; fetches
answer from memory.  Transactional commits (TxnOffsetCommit) stay pending per producer
until :meth:`GroupCoordinator.complete_txn` (the transaction's marker).  Membership
(JoinGroup, SyncGroup, Heartbeat and LeaveGroup) is :mod:`membership`'s, with rebalance
timing in :mod:`rebalance` and session expiry in :mod:`heartbeats`; loading and
persistence are the :class:`GroupMetadataManager`'s.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from odradek import tasks
from odradek.broker.group.group import (
    GroupMetadata,
    GroupState,
    JoinResult,
    OffsetAndMetadata,
    SyncResult,
)
from odradek.broker.group.group_config import GroupConfig
from odradek.broker.group.group_metadata_manager import GroupMetadataManager
from odradek.broker.group.membership import UNKNOWN_MEMBER_ID, GroupMembership, JoinRequest
from odradek.broker.group.offsets_topic import OFFSETS_TOPIC
from odradek.broker.group.scheduler import Scheduler
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.partition import Partition
    from odradek.common import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["GroupCoordinator", "GroupSummary", "JoinRequest", "MemberSummary", "PartitionOffset"]

S = GroupState
E = ErrorCode


@dataclass(frozen=True, slots=True)
class PartitionOffset:
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...] = ()


DEAD_GROUP = GroupSummary(str(S.DEAD), "", "")
NO_GROUP = GroupSummary("", "", "")


class GroupCoordinator:
    def __init__(self, config: GroupConfig, manager: GroupMetadataManager, scheduler: Scheduler,
                 now_ms: Callable[[], int] | None = None) -> None:
        self.config = config
        self.manager = manager
        self.now_ms = now_ms or manager.now_ms
        self.membership = GroupMembership(config, manager, scheduler, self.now_ms)
        self._expiry_task: asyncio.Task[None] | None = None
        # FindCoordinator's creation of __consumer_offsets, while one is under way.
        self.topic_creation: asyncio.Future[object] | None = None

    async def startup(self, zk: Any) -> None:
        """Use the partition count of an existing ``__consumer_offsets`` (as Kafka does: the
        config only sizes a topic yet to be created), and start expiring old offsets."""
        try:
            got = await zk.get_topic_assignment(OFFSETS_TOPIC)
        except Exception as e:  # ZooKeeper trouble: the config's count, as for a new topic
            log.warning("Could not read the partition count of %s: %s", OFFSETS_TOPIC, e)
            got = None
        if got is not None and got[0].partitions:
            self.manager.num_partitions = len(got[0].partitions)
        self._expiry_task = tasks.start(self._expiry_loop(), "offsets-expiry")

    async def shutdown(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        self.manager.shutdown(self.membership.on_group_unloaded)
        self.membership.shutdown()

    async def _expiry_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.offsets_retention_check_interval_ms / 1000)
            try:
                self.cleanup_expired_offsets()
            except Exception:
                log.exception("Offset expiration failed")

    # ------------------------------------------------------------------ leadership of __consumer_offsets

    def became_leader(self, partitions: list[Partition]) -> None:
        """ReplicaManager hook: load the groups of the offsets partitions now led here."""
        for p in partitions:
            if p.topic == OFFSETS_TOPIC:
                self.on_election(p.partition)

    def became_follower(self, partitions: list[Partition]) -> None:
        """ReplicaManager hook: unload the groups of the offsets partitions now followed."""
        for p in partitions:
            if p.topic == OFFSETS_TOPIC:
                self.on_resignation(p.partition)

    def replicas_stopped(self, stopped: list[tuple[Partition | None, TopicPartition, bool]]) -> None:
        """ReplicaManager hook: unload the groups of stopped offsets partitions."""
        for _, tp, _ in stopped:
            if tp.topic == OFFSETS_TOPIC:
                self.on_resignation(tp.partition)

    def partition_for(self, group_id: str) -> int:
        return self.manager.partition_for(group_id)

    def on_election(self, partition: int) -> None:
        self.manager.schedule_load(partition, self.membership.on_group_loaded)

    def on_resignation(self, partition: int) -> None:
        self.manager.unload(partition, self.membership.on_group_unloaded)

    # ------------------------------------------------------------------ membership (see membership.py)

    async def join_group(self, request: JoinRequest) -> JoinResult:
        return await self.membership.join_group(request)

    async def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: Mapping[str, bytes]) -> SyncResult:
        return await self.membership.sync_group(group_id, generation_id, member_id, group_instance_id,
                                                protocol_type, protocol_name, assignments)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
                  ) -> ErrorCode:
        return self.membership.heartbeat(group_id, member_id, group_instance_id, generation_id)

    def leave_group(self, group_id: str, leaving: Iterable[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        return self.membership.leave_group(group_id, leaving)

    # ------------------------------------------------------------------ offsets

    async def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                             offsets: Mapping[TopicPartition, OffsetAndMetadata]
                             ) -> dict[TopicPartition, ErrorCode]:
        error = self.manager.validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                return dict.fromkeys(offsets, E.illegal_generation)
            # Not using group management: the group exists only to hold offsets.
            group = self.manager.add_group(GroupMetadata(group_id, current_state_timestamp=self.now_ms()))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        if group.is_(S.COMPLETING_REBALANCE):
            # The member has its new generation but not yet its assignment.
            return dict.fromkeys(offsets, E.rebalance_in_progress)
        if group.state in (S.STABLE, S.PREPARING_REBALANCE):
            member = group.get(member_id)
            self.membership.heartbeats.schedule(group, member, member.session_timeout_ms)  # a commit shows liveness
        return await self.manager.store_offsets(group, offsets)

    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                                 group_instance_id: str | None, generation_id: int,
                                 offsets: Mapping[TopicPartition, OffsetAndMetadata]
                                 ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit (Kafka's handleTxnCommitOffsets): a group not known is created
        Empty; a member id, group instance id or generation the request gives (KIP-447, v3)
        must match the group's.  The offsets stay pending until the transaction completes."""
        error = self.manager.validate_group_status(group_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.manager.get_group(group_id)
        if group is None:
            group = self.manager.add_group(GroupMetadata(group_id, current_state_timestamp=self.now_ms()))
        if group.is_(S.DEAD):
            error = E.coordinator_not_available
        elif group_instance_id is not None and group_instance_id in group.static_members \
                and group.static_members[group_instance_id] != member_id:
            error = E.fenced_instance_id
        elif member_id != UNKNOWN_MEMBER_ID and not group.has(member_id):
            error = E.unknown_member_id
        elif generation_id >= 0 and generation_id != group.generation_id:
            error = E.illegal_generation
        if error is not None:
            return dict.fromkeys(offsets, error)
        return await self.manager.store_offsets(group, offsets, producer_id, producer_epoch)

    def complete_txn(self, producer_id: int, offsets_partitions: Iterable[int], commit: bool) -> None:
        """The transaction's marker is in these ``__consumer_offsets`` partitions (called by
        WriteTxnMarkers once the marker's append succeeded): commit makes the producer's
        pending offsets visible, abort drops them."""
        self.manager.complete_txn(producer_id, offsets_partitions, commit)

    def _validate_offset_commit(self, group: GroupMetadata, generation_id: int, member_id: str,
                                group_instance_id: str | None) -> ErrorCode | None:
        if group.is_(S.DEAD):
            return E.coordinator_not_available
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = self.membership.validate_current_member(group, member_id, group_instance_id)
            if error is not None:
                return error
            return E.illegal_generation if generation_id != group.generation_id else None
        if not group.is_(S.EMPTY):
            return E.unknown_member_id  # only members commit to a group with members
        return None

    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None, require_stable: bool
                      ) -> tuple[ErrorCode, dict[TopicPartition, PartitionOffset]]:
        """The group's committed offsets (all of them when ``partitions`` is None); a
        partition without a commit gets offset -1."""
        error = self.manager.validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_(S.DEAD):
            return E.none, {tp: PartitionOffset() for tp in partitions or ()}
        wanted = list(group.offsets) if partitions is None else list(partitions)
        result = {}
        for tp in wanted:
            if require_stable and group.has_pending_offset_commits_for(tp):
                result[tp] = PartitionOffset(error=E.unstable_offset_commit)
                continue
            om = group.offsets.get(tp)
            result[tp] = PartitionOffset() if om is None else PartitionOffset(om.offset, om.leader_epoch, om.metadata)
        return E.none, result

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]
                       ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: offsets of topics the group does not consume go; a group still
        consuming a topic keeps its offsets (GROUP_SUBSCRIBED_TO_TOPIC)."""
        partitions = list(partitions)
        error = self.manager.validate_group_status(group_id)
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_(S.DEAD):
            return E.group_id_not_found, {}
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_(S.EMPTY):
            eligible = partitions
        elif group.protocol_type == "consumer":
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
            errors = {tp: E.group_subscribed_to_topic for tp in partitions if tp not in eligible}
        else:
            return E.non_empty_group, {}
        if eligible:
            wanted = set(eligible)
            self.manager.cleanup_group_metadata([group], lambda g: g.remove_offsets(wanted))
            errors.update(dict.fromkeys(eligible, E.none))
        return E.none, errors

    # ------------------------------------------------------------------ ListGroups, DescribeGroups, DeleteGroups

    def list_groups(self, states: Iterable[str] = ()) -> tuple[ErrorCode, list[tuple[str, str, str]]]:
        """(group id, protocol type, state) of every group here, optionally only in ``states``."""
        wanted = {s.lower() for s in states}
        error = E.coordinator_load_in_progress if self.manager.is_loading() else E.none
        groups = [(g.group_id, g.protocol_type or "", str(g.state)) for g in self.manager.current_groups()
                  if not wanted or str(g.state).lower() in wanted]
        return error, groups

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        error = self.manager.validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, NO_GROUP
        group = self.manager.get_group(group_id)
        if group is None:
            return E.none, DEAD_GROUP
        if group.is_(S.STABLE) and group.protocol_name is not None:
            protocol = group.protocol_name
            members = tuple(MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                          m.metadata(protocol), m.assignment) for m in group.members.values())
        else:
            protocol = ""
            members = tuple(MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                            for m in group.members.values())
        return E.none, GroupSummary(str(group.state), group.protocol_type or "", protocol, members)

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """Only empty groups can be deleted; their offsets go with them."""
        errors: dict[str, ErrorCode] = {}
        eligible = []
        for group_id in dict.fromkeys(group_ids):
            error = self.manager.validate_group_status(group_id, allow_empty_id=True)
            group = self.manager.get_group(group_id) if error is None else None
            if error is not None:
                errors[group_id] = error
            elif group is None or group.is_(S.DEAD):
                errors[group_id] = E.group_id_not_found
            elif group.is_(S.EMPTY):
                group.transition_to(S.DEAD, self.now_ms())
                eligible.append(group)
                errors[group_id] = E.none
            else:
                errors[group_id] = E.non_empty_group
        if eligible:
            self.manager.cleanup_group_metadata(eligible, lambda g: g.remove_all_offsets())
            log.info("Deleted groups %s", sorted(g.group_id for g in eligible))
        return errors

    def cleanup_expired_offsets(self) -> int:
        now = self.now_ms()
        retention = self.config.offsets_retention_ms
        removed = self.manager.cleanup_group_metadata(
            self.manager.current_groups(), lambda g: g.remove_offsets(g.expired_offsets(now, retention)))
        if removed:
            log.info("Removed %d expired offsets", removed)
        return removed
