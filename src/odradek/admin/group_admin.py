"""The group calls of Kafka's AdminClient, over odradek's connections: what
``odradek consumer-groups`` (kafka-consumer-groups.sh) needs of the cluster.

A group's requests go to its coordinator (FindCoordinator, retried while the coordinator is
loading or unknown, as Kafka's AdminClient retries), ListGroups to every broker, ListOffsets to
each partition's leader; one connection per broker, opened on first use.  Offsets are committed
as an admin does (generation -1, no member id), which the coordinator accepts only while the
group has no members.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from odradek.admin.client import CONNECT_TIMEOUT_S, AdminClientError, AdminConnection
from odradek.net.client import BrokerConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.consumer_protocol import consumer_assignment_partitions
from odradek.protocol.errors import ErrorCode, KafkaError, for_code
from odradek.protocol.messages import build

__all__ = ["GroupAdminConnection", "GroupDescription", "MemberDescription", "TopicPartition"]

TopicPartition = tuple[str, int]
EARLIEST: Final = -2
LATEST: Final = -1
_COORDINATOR_RETRIES: Final = 50
_RETRY_BACKOFF_S: Final = 0.1
_RETRIABLE: Final = frozenset({ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
                               ErrorCode.not_coordinator})
_GROUP_APIS: Final = {
    ApiKey.FIND_COORDINATOR: (3, "FindCoordinator"), ApiKey.LIST_GROUPS: (4, "ListGroups"),
    ApiKey.DESCRIBE_GROUPS: (5, "DescribeGroups"), ApiKey.OFFSET_FETCH: (7, "OffsetFetch"),
    ApiKey.LIST_OFFSETS: (7, "ListOffsets"), ApiKey.OFFSET_COMMIT: (8, "OffsetCommit"),
    ApiKey.DELETE_GROUPS: (2, "DeleteGroups"), ApiKey.OFFSET_DELETE: (0, "OffsetDelete"),
}


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A DescribeGroups answer as Kafka's ConsumerGroupDescription has it."""

    group_id: str
    state: str
    protocol_type: str
    assignment_strategy: str
    members: tuple[MemberDescription, ...]
    coordinator: tuple[int, str, int]  # node id, host, port


def _raise_for(code: int, what: str, message: str | None = None) -> None:
    if code != ErrorCode.none:
        error = ErrorCode(code)
        raise for_code(error)(message or f"{what}: {error.name.upper()}")


class GroupAdminConnection(AdminConnection):
    """An AdminConnection that also reaches any broker (coordinators, leaders)."""

    max_versions = {**AdminConnection.max_versions, **{k: v for k, (v, _) in _GROUP_APIS.items()}}
    api_names = {**AdminConnection.api_names, **{k: n for k, (_, n) in _GROUP_APIS.items()}}

    def __init__(self, bootstrap: str, **kwargs: Any) -> None:
        super().__init__(bootstrap, **kwargs)
        self._brokers: dict[int, BrokerConnection] = {}
        self._addresses: dict[int, tuple[str, int]] = {}

    async def __aexit__(self, *exc: object) -> None:
        for conn in self._brokers.values():
            await conn.close()
        await super().__aexit__(*exc)

    async def broker_request(self, node_id: int, api_key: int, build_body: Any) -> Any:
        """``build_body(module, version)`` sent to broker ``node_id``."""
        conn = self._brokers.get(node_id)
        if conn is None or not conn.connected:
            if node_id not in self._addresses:
                self._addresses = {b: (host, port) for b, (host, port, _) in (await self.metadata([])).brokers.items()}
            if node_id not in self._addresses:
                raise AdminClientError(f"broker {node_id} is not in the cluster's metadata")
            host, port = self._addresses[node_id]
            conn = BrokerConnection(host, port, "odradek-consumer-groups", security=self.security)
            await conn.connect(timeout_s=CONNECT_TIMEOUT_S)
            self._brokers[node_id] = conn
        return await self.send_on(conn, api_key, build_body)

    async def coordinator(self, group_id: str) -> tuple[int, str, int]:
        """(node id, host, port) of the group's coordinator."""
        for _ in range(_COORDINATOR_RETRIES):
            response = await self.request(ApiKey.FIND_COORDINATOR, lambda m, v: build(
                m.FindCoordinatorRequest, key=group_id, key_type=0))
            if response.error_code not in _RETRIABLE:
                _raise_for(response.error_code, f"finding the coordinator of group {group_id}",
                           getattr(response, "error_message", None))
                self._addresses[response.node_id] = (response.host, response.port)
                return response.node_id, response.host, response.port
            await asyncio.sleep(_RETRY_BACKOFF_S)
        raise AdminClientError(f"the coordinator of group {group_id} is not available")

    async def _group_request(self, group_id: str, api_key: int, build_body: Any, error_of: Any) -> Any:
        """A request to the group's coordinator, again (after finding it anew) while it answers
        that it is loading or not the coordinator."""
        for _ in range(_COORDINATOR_RETRIES):
            node_id, _, _ = await self.coordinator(group_id)
            response = await self.broker_request(node_id, api_key, build_body)
            if error_of(response) not in _RETRIABLE:
                return response
            await asyncio.sleep(_RETRY_BACKOFF_S)
        raise AdminClientError(f"the coordinator of group {group_id} is not available")

    async def list_groups(self, states: Iterable[str] = ()) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group on every broker, broker by broker."""
        wanted = tuple(states)
        groups = []
        for node_id in sorted((await self.metadata([])).brokers):
            response = await self.broker_request(node_id, ApiKey.LIST_GROUPS, lambda m, v: build(
                m.ListGroupsRequest, states_filter=wanted))
            _raise_for(response.error_code, f"listing the groups of broker {node_id}")
            groups += [(g.group_id, g.protocol_type, getattr(g, "group_state", "")) for g in response.groups]
        return groups

    async def describe_group(self, group_id: str) -> GroupDescription:
        response = await self._group_request(
            group_id, ApiKey.DESCRIBE_GROUPS,
            lambda m, v: build(m.DescribeGroupsRequest, groups=(group_id,), include_authorized_operations=False),
            lambda r: r.groups[0].error_code)
        coordinator = await self.coordinator(group_id)
        (group,) = response.groups
        _raise_for(group.error_code, f"describing group {group_id}")
        members = tuple(MemberDescription(m.member_id, m.client_id, m.client_host,
                                          tuple(_partitions(m.member_assignment, group.protocol_type)))
                        for m in group.members)
        return GroupDescription(group_id, group.group_state, group.protocol_type, group.protocol_data, members,
                                coordinator)

    async def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """Every committed offset of the group (OffsetFetch of all topics)."""
        response = await self._group_request(
            group_id, ApiKey.OFFSET_FETCH,
            lambda m, v: build(m.OffsetFetchRequest, group_id=group_id, topics=None, require_stable=False),
            lambda r: getattr(r, "error_code", ErrorCode.none))
        _raise_for(getattr(response, "error_code", ErrorCode.none), f"fetching the offsets of group {group_id}")
        offsets = {}
        for topic in response.topics:
            for p in topic.partitions:
                _raise_for(p.error_code, f"fetching the offset of {topic.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    offsets[(topic.name, p.partition_index)] = p.committed_offset
        return offsets

    async def partitions(self, topics: Sequence[str]) -> dict[str, list[int]] | KafkaError:
        """Each topic's partitions, or the error of the first topic that has none."""
        view = await self.metadata(list(topics))
        found = {}
        for topic in view.topics:
            if topic.error_code != ErrorCode.none:
                error = ErrorCode(topic.error_code)
                return for_code(error)(error.name)
            found[topic.name] = sorted(p.partition_index for p in topic.partitions)
        return found

    async def list_offsets(self, partitions: Iterable[TopicPartition], timestamp: int
                           ) -> dict[TopicPartition, int | ErrorCode]:
        """The offset for ``timestamp`` (EARLIEST, LATEST or milliseconds) of each partition,
        asked of its leader; -1 where no record is that late; the error where there is one."""
        wanted = list(dict.fromkeys(partitions))
        view = await self.metadata(sorted({t for t, _ in wanted}))
        leaders = {(t.name, p.partition_index): p.leader_id for t in view.topics if t.error_code == ErrorCode.none
                   for p in t.partitions}
        found: dict[TopicPartition, int | ErrorCode] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in wanted:
            leader = leaders.get(tp, -1)
            if leader < 0:
                found[tp] = ErrorCode.unknown_topic_or_partition if tp not in leaders else ErrorCode.leader_not_available
            else:
                by_leader.setdefault(leader, []).append(tp)
        for leader, tps in by_leader.items():
            def body(m: types.ModuleType, version: int, tps: list[TopicPartition] = tps) -> Any:
                by_topic: dict[str, list[int]] = {}
                for t, p in tps:
                    by_topic.setdefault(t, []).append(p)
                return build(m.ListOffsetsRequest, replica_id=-1, isolation_level=0, topics=tuple(
                    build(m.ListOffsetsTopic, name=t, partitions=tuple(
                        build(m.ListOffsetsPartition, partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
                        for p in ps)) for t, ps in by_topic.items()))

            response = await self.broker_request(leader, ApiKey.LIST_OFFSETS, body)
            for topic in response.topics:
                for p in topic.partitions:
                    tp = (topic.name, p.partition_index)
                    found[tp] = ErrorCode(p.error_code) if p.error_code != ErrorCode.none else p.offset
        return found

    async def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit as an admin (Kafka's alterConsumerGroupOffsets): each partition's error."""
        def body(m: types.ModuleType, version: int) -> Any:
            by_topic: dict[str, list[tuple[int, int]]] = {}
            for (t, p), offset in offsets.items():
                by_topic.setdefault(t, []).append((p, offset))
            return build(m.OffsetCommitRequest, group_id=group_id, generation_id=-1, generation_id_or_member_epoch=-1,
                         member_id="", group_instance_id=None, retention_time_ms=-1, topics=tuple(
                             build(m.OffsetCommitRequestTopic, name=t, partitions=tuple(
                                 build(m.OffsetCommitRequestPartition, partition_index=p, committed_offset=o,
                                       committed_leader_epoch=-1, commit_timestamp=-1, committed_metadata="")
                                 for p, o in ps)) for t, ps in by_topic.items()))

        response = await self._group_request(group_id, ApiKey.OFFSET_COMMIT, body, lambda r: next(
            (p.error_code for t in r.topics for p in t.partitions if p.error_code in _RETRIABLE), ErrorCode.none))
        return {(t.name, p.partition_index): ErrorCode(p.error_code) for t in response.topics for p in t.partitions}

    async def delete_group(self, group_id: str) -> ErrorCode:
        response = await self._group_request(
            group_id, ApiKey.DELETE_GROUPS, lambda m, v: build(m.DeleteGroupsRequest, groups_names=(group_id,)),
            lambda r: r.results[0].error_code)
        return ErrorCode(response.results[0].error_code)

    async def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]
                             ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete (KIP-496): the group's error, and each partition's."""
        def body(m: types.ModuleType, version: int) -> Any:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            return build(m.OffsetDeleteRequest, group_id=group_id, topics=tuple(
                build(m.OffsetDeleteRequestTopic, name=t, partitions=tuple(
                    build(m.OffsetDeleteRequestPartition, partition_index=p) for p in ps))
                for t, ps in by_topic.items()))

        response = await self._group_request(group_id, ApiKey.OFFSET_DELETE, body, lambda r: r.error_code)
        return ErrorCode(response.error_code), {(t.name, p.partition_index): ErrorCode(p.error_code)
                                                for t in response.topics for p in t.partitions}


def _partitions(assignment: bytes, protocol_type: str) -> list[TopicPartition]:
    if protocol_type not in ("consumer", ""):
        return []
    try:
        return consumer_assignment_partitions(assignment)
    except ValueError:
        return []
