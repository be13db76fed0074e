"""Consumer group APIs: FindCoordinator (key 10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16), DeleteGroups (42).

The logic is the group coordinator's (:mod:`odradek.broker.group`); these handlers only
translate between the wire versions and it.

Authorization (KafkaApis, Kafka 2.8): FindCoordinator needs Describe on the group (or on the
transactional id), membership (Join, Sync, Heartbeat, Leave) Read on the group, DescribeGroups
Describe and DeleteGroups Delete on each group; ListGroups lists every group with Describe on the
cluster and otherwise only the groups the principal may Describe.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from odradek.broker.apis.authorization import (
    OMITTED_OPERATIONS,
    authorized,
    authorized_names,
    authorized_operations,
    cluster_authorized,
)
from odradek.broker.apis.internal_topics import CoordinatorAnswer, InternalTopic, find_coordinator
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.broker.apis.transactions import find_transaction_coordinator
from odradek.broker.group.coordinator import JoinRequest
from odradek.broker.group.group import JoinResult, SyncResult
from odradek.broker.group.offsets_topic import OFFSETS_TOPIC
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import Operation, ResourceType

if TYPE_CHECKING:
    from odradek.broker.context import AuthorizingContext, FindCoordinatorContext, GroupsContext
    from odradek.net.server import Request, Response

_GROUP_KEY = 0
_TRANSACTION_KEY = 1
_REFUSED = ErrorCode.group_authorization_failed


def group_allowed(broker: AuthorizingContext, request: Request, operation: Operation, group_id: str) -> bool:
    """Whether the principal may perform ``operation`` on the group (true without an authorizer)."""
    return authorized(broker, request, operation, ResourceType.GROUP, group_id)


def ms(value: datetime.timedelta) -> int:
    """A kio duration field in milliseconds."""
    return value // datetime.timedelta(milliseconds=1)


def client_host(request: Request) -> str:
    """The peer's address the way Kafka reports it (``/127.0.0.1``)."""
    host = request.connection.peer.rsplit(":", 1)[0]
    return "/" + host


# ----------------------------------------------------------------------------- FindCoordinator


@api(ApiKey.FIND_COORDINATOR, "FindCoordinator", 0, 4)
async def handle_find_coordinator(broker: FindCoordinatorContext, request: Request) -> Response:
    body = decode_body(request)
    version = request.api_version
    key_type = getattr(body, "key_type", _GROUP_KEY)
    keys = list(body.coordinator_keys) if version >= 4 else [body.key]
    answers = [await _find_coordinator(broker, request, key_type, key) for key in keys]
    m = response_module(ApiKey.FIND_COORDINATOR, version)
    if version >= 4:
        return respond(request, build(m.FindCoordinatorResponse, throttle_time=0, coordinators=tuple(
            build(m.Coordinator, key=key, node_id=node, host=host, port=port, error_code=error, error_message=message)
            for key, (error, message, node, host, port) in zip(keys, answers, strict=True))))
    error, message, node, host, port = answers[0]
    return respond(request, build(m.FindCoordinatorResponse, throttle_time=0, error_code=error,
                                  error_message=message, node_id=node, host=host, port=port))


async def _find_coordinator(broker: FindCoordinatorContext, request: Request, key_type: int, key: str
                            ) -> CoordinatorAnswer:
    if key_type == _TRANSACTION_KEY:
        return await find_transaction_coordinator(broker, request, key)
    if key_type != _GROUP_KEY:
        return ErrorCode.invalid_request, f"Unknown coordinator key type {key_type}", -1, "", -1
    if not group_allowed(broker, request, Operation.DESCRIBE, key):
        return _REFUSED, "Group authorization failed.", -1, "", -1
    coordinator = broker.group_coordinator
    config = coordinator.config
    topic = InternalTopic(OFFSETS_TOPIC, config.offsets_topic_num_partitions, config.offsets_topic_replication_factor,
                          config.offsets_topic_configs(), "offsets topic", "offsets.topic.replication.factor")
    return await find_coordinator(broker, request, topic, coordinator.partition_for(key), coordinator)


# ----------------------------------------------------------------------------- membership


@api(ApiKey.JOIN_GROUP, "JoinGroup", 0, 9)
async def handle_join_group(broker: GroupsContext, request: Request) -> Response:
    body = decode_body(request)
    version = request.api_version
    session_timeout = ms(body.session_timeout)
    if not group_allowed(broker, request, Operation.READ, body.group_id):
        result = JoinResult(_REFUSED, "")
    else:
        result = await _join(broker, request, body, session_timeout)
    m = response_module(ApiKey.JOIN_GROUP, version)
    members = tuple(build(m.JoinGroupResponseMember, member_id=member_id, group_instance_id=instance_id,
                          metadata=metadata) for member_id, instance_id, metadata in result.members)
    return respond(request, build(
        m.JoinGroupResponse, throttle_time=0, error_code=result.error, generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name if version >= 7 else (result.protocol_name or ""),
        leader=result.leader_id, skip_assignment=result.skip_assignment, member_id=result.member_id,
        members=members))


async def _join(broker: GroupsContext, request: Request, body: object, session_timeout: int) -> JoinResult:
    version = request.api_version
    return await broker.group_coordinator.join_group(JoinRequest(
        group_id=body.group_id, member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        client_id=request.header.client_id or "", client_host=client_host(request),
        session_timeout_ms=session_timeout,
        # v0 had one timeout for both
        rebalance_timeout_ms=session_timeout if version == 0 else ms(body.rebalance_timeout),
        protocol_type=body.protocol_type, protocols=tuple((p.name, p.metadata) for p in body.protocols),
        require_known_member_id=version >= 4, supports_skip_assignment=version >= 9,
        reason=getattr(body, "reason", None)))


@api(ApiKey.SYNC_GROUP, "SyncGroup", 0, 5)
async def handle_sync_group(broker: GroupsContext, request: Request) -> Response:
    body = decode_body(request)
    if not group_allowed(broker, request, Operation.READ, body.group_id):
        result = SyncResult(_REFUSED)
    else:
        result = await broker.group_coordinator.sync_group(
            body.group_id, body.generation_id, body.member_id, getattr(body, "group_instance_id", None),
            getattr(body, "protocol_type", None), getattr(body, "protocol_name", None),
            {a.member_id: a.assignment for a in body.assignments})
    m = response_module(ApiKey.SYNC_GROUP, request.api_version)
    return respond(request, build(m.SyncGroupResponse, throttle_time=0, error_code=result.error,
                                  protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                                  assignment=result.assignment))


@api(ApiKey.HEARTBEAT, "Heartbeat", 0, 4)
def handle_heartbeat(broker: GroupsContext, request: Request) -> Response:
    body = decode_body(request)
    if not group_allowed(broker, request, Operation.READ, body.group_id):
        error = _REFUSED
    else:
        error = broker.group_coordinator.heartbeat(body.group_id, body.member_id,
                                                   getattr(body, "group_instance_id", None), body.generation_id)
    m = response_module(ApiKey.HEARTBEAT, request.api_version)
    return respond(request, build(m.HeartbeatResponse, throttle_time=0, error_code=error))


@api(ApiKey.LEAVE_GROUP, "LeaveGroup", 0, 5)
def handle_leave_group(broker: GroupsContext, request: Request) -> Response:
    body = decode_body(request)
    version = request.api_version
    if version < 3:
        leaving: list[tuple[str, str | None]] = [(body.member_id, None)]
    else:
        leaving = [(member.member_id, member.group_instance_id) for member in body.members]
    m = response_module(ApiKey.LEAVE_GROUP, version)
    if not group_allowed(broker, request, Operation.READ, body.group_id):
        fields = {"members": ()} if version >= 3 else {}
        return respond(request, build(m.LeaveGroupResponse, throttle_time=0, error_code=_REFUSED, **fields))
    error, member_errors = broker.group_coordinator.leave_group(body.group_id, leaving)
    if version < 3:
        # One member: its error is the response's.
        if error == ErrorCode.none and member_errors:
            error = member_errors[0]
        return respond(request, build(m.LeaveGroupResponse, throttle_time=0, error_code=error))
    members = tuple(build(m.MemberResponse, member_id=member_id, group_instance_id=instance_id, error_code=e)
                    for (member_id, instance_id), e in zip(leaving, member_errors, strict=False))
    return respond(request, build(m.LeaveGroupResponse, throttle_time=0, error_code=error, members=members))


# ----------------------------------------------------------------------------- administration


@api(ApiKey.LIST_GROUPS, "ListGroups", 0, 5)
def handle_list_groups(broker: GroupsContext, request: Request) -> Response:
    body = decode_body(request)
    types = {t.lower() for t in getattr(body, "types_filter", ())}
    error, groups = broker.group_coordinator.list_groups(getattr(body, "states_filter", ()))
    if types and "classic" not in types:
        groups = []  # every group here speaks the classic protocol
    if broker.authorizer is not None and not cluster_authorized(broker, request, Operation.DESCRIBE):
        may_describe = authorized_names(broker, request, Operation.DESCRIBE, ResourceType.GROUP,
                                        (group_id for group_id, _, _ in groups))
        groups = [g for g in groups if g[0] in may_describe]
    m = response_module(ApiKey.LIST_GROUPS, request.api_version)
    return respond(request, build(m.ListGroupsResponse, throttle_time=0, error_code=error, groups=tuple(
        build(m.ListedGroup, group_id=group_id, protocol_type=protocol_type, group_state=state, group_type="classic")
        for group_id, protocol_type, state in groups)))


@api(ApiKey.DESCRIBE_GROUPS, "DescribeGroups", 0, 5)
def handle_describe_groups(broker: GroupsContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.DESCRIBE_GROUPS, request.api_version)
    include_operations = getattr(body, "include_authorized_operations", False)
    described = []
    for group_id in body.groups:
        if not group_allowed(broker, request, Operation.DESCRIBE, group_id):
            described.append(build(m.DescribedGroup, error_code=_REFUSED, group_id=group_id, group_state="",
                                   protocol_type="", protocol_data="", members=(),
                                   authorized_operations=OMITTED_OPERATIONS))
            continue
        operations = authorized_operations(broker, request, ResourceType.GROUP, group_id) if include_operations else OMITTED_OPERATIONS
        error, summary = broker.group_coordinator.describe_group(group_id)
        members = tuple(build(
            m.DescribedGroupMember, member_id=s.member_id, group_instance_id=s.group_instance_id,
            client_id=s.client_id, client_host=s.client_host, member_metadata=s.metadata,
            member_assignment=s.assignment) for s in summary.members)
        described.append(build(
            m.DescribedGroup, error_code=error, group_id=group_id, group_state=summary.state,
            protocol_type=summary.protocol_type, protocol_data=summary.protocol, members=members,
            authorized_operations=operations))
    return respond(request, build(m.DescribeGroupsResponse, throttle_time=0, groups=tuple(described)))


@api(ApiKey.DELETE_GROUPS, "DeleteGroups", 0, 2)
def handle_delete_groups(broker: GroupsContext, request: Request) -> Response:
    body = decode_body(request)
    may_delete = authorized_names(broker, request, Operation.DELETE, ResourceType.GROUP, body.groups_names)
    errors = broker.group_coordinator.delete_groups([g for g in body.groups_names if g in may_delete])
    errors.update({g: _REFUSED for g in body.groups_names if g not in may_delete})
    m = response_module(ApiKey.DELETE_GROUPS, request.api_version)
    return respond(request, build(m.DeleteGroupsResponse, throttle_time=0, results=tuple(
        build(m.DeletableGroupResult, group_id=group_id, error_code=errors[group_id])
        for group_id in dict.fromkeys(body.groups_names))))

