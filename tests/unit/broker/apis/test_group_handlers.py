"""Consumer group handlers on a FakeBroker whose group coordinator writes a real
``__consumer_offsets`` log: FindCoordinator, a member's life (join, sync, heartbeat, leave),
administration, committed offsets, and the error paths (not the coordinator, unknown group or
partition, invalid key type, authorization)."""

from __future__ import annotations

import asyncio
import datetime

from fake_broker import BROKER_ID, FakeBroker, WithBroker
from kio.schema.delete_groups.v1 import request as dg_req
from kio.schema.delete_groups.v1 import response as dg_resp
from kio.schema.describe_groups.v3 import request as desc_req
from kio.schema.describe_groups.v3 import response as desc_resp
from kio.schema.find_coordinator.v3 import request as fc3_req
from kio.schema.find_coordinator.v3 import response as fc3_resp
from kio.schema.find_coordinator.v4 import request as fc4_req
from kio.schema.find_coordinator.v4 import response as fc4_resp
from kio.schema.heartbeat.v3 import request as hb_req
from kio.schema.heartbeat.v3 import response as hb_resp
from kio.schema.join_group.v5 import request as join_req
from kio.schema.join_group.v5 import response as join_resp
from kio.schema.leave_group.v3 import request as leave_req
from kio.schema.leave_group.v3 import response as leave_resp
from kio.schema.list_groups.v3 import request as list_req
from kio.schema.list_groups.v3 import response as list_resp
from kio.schema.offset_commit.v8 import request as oc_req
from kio.schema.offset_commit.v8 import response as oc_resp
from kio.schema.offset_delete.v0 import request as od_req
from kio.schema.offset_delete.v0 import response as od_resp
from kio.schema.offset_fetch.v7 import request as of_req
from kio.schema.offset_fetch.v7 import response as of_resp
from kio.schema.offset_fetch.v8 import request as of8_req
from kio.schema.offset_fetch.v8 import response as of8_resp
from kio.schema.sync_group.v3 import request as sync_req
from kio.schema.sync_group.v3 import response as sync_resp
from kio.static.primitive import i8, i32, i64

from odradek.broker.group.offsets_topic import OFFSETS_TOPIC
from odradek.broker.transaction.state_topic import TRANSACTION_STATE_TOPIC
from odradek.protocol.errors import ErrorCode as E
from odradek.security.acls import KafkaPrincipal, Operation, ResourceType

ALICE = KafkaPrincipal("User", "alice")
SECONDS_10 = datetime.timedelta(seconds=10)


async def coordinator_ready(b: FakeBroker) -> None:
    """This broker leads ``__consumer_offsets`` and has loaded it."""
    await b.lead(OFFSETS_TOPIC, [0])
    await asyncio.gather(*b.group_coordinator.manager.loading.values())


async def join(b: FakeBroker, group: str, member_id: str = "", **options: object) -> join_resp.JoinGroupResponse:
    return await b.call(join_req.JoinGroupRequest(
        group_id=group, session_timeout=SECONDS_10, rebalance_timeout=SECONDS_10, member_id=member_id,
        protocol_type="consumer", protocols=(join_req.JoinGroupRequestProtocol(name="range", metadata=b"m"),)),
        join_resp.JoinGroupResponse, **options)  # type: ignore[arg-type]


async def describe(b: FakeBroker, *groups: str, **options: object) -> list[tuple[str, E, str, int]]:
    response = await b.call(desc_req.DescribeGroupsRequest(groups=groups, include_authorized_operations=False),
                            desc_resp.DescribeGroupsResponse, **options)  # type: ignore[arg-type]
    return [(g.group_id, g.error_code, g.group_state, len(g.members)) for g in response.groups]


def test_find_coordinator_creates_the_internal_topic_then_names_its_leader(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        first = await b.call(fc3_req.FindCoordinatorRequest(key="g", key_type=i8(0)), fc3_resp.FindCoordinatorResponse)
        assert first.error_code == E.coordinator_not_available
        assert OFFSETS_TOPIC in b.zk.topics  # created on first use
        found = await b.call(fc4_req.FindCoordinatorRequest(key_type=i8(0), coordinator_keys=("g", "h")),
                             fc4_resp.FindCoordinatorResponse)
        assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in found.coordinators] == [
            ("g", E.none, BROKER_ID, "h0", 9090), ("h", E.none, BROKER_ID, "h0", 9090)]
        txn = await b.call(fc4_req.FindCoordinatorRequest(key_type=i8(1), coordinator_keys=("tx", "")),
                           fc4_resp.FindCoordinatorResponse)
        assert [c.error_code for c in txn.coordinators] == [E.coordinator_not_available, E.invalid_request]
        assert TRANSACTION_STATE_TOPIC in b.zk.topics
        unknown = await b.call(fc3_req.FindCoordinatorRequest(key="g", key_type=i8(5)),
                               fc3_resp.FindCoordinatorResponse)
        assert (unknown.error_code, unknown.error_message) == (E.invalid_request, "Unknown coordinator key type 5")

    with_broker(body)


def test_a_member_joins_syncs_heartbeats_and_leaves(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await coordinator_ready(b)
        first = await join(b, "g")
        assert first.error_code == E.member_id_required and first.member_id
        joined = await join(b, "g", first.member_id)
        assert (joined.error_code, joined.generation_id, joined.leader) == (E.none, 1, first.member_id)
        assert [(m.member_id, m.metadata) for m in joined.members] == [(first.member_id, b"m")]
        synced = await b.call(sync_req.SyncGroupRequest(
            group_id="g", generation_id=i32(1), member_id=first.member_id,
            assignments=(sync_req.SyncGroupRequestAssignment(member_id=first.member_id, assignment=b"all"),)),
            sync_resp.SyncGroupResponse)
        assert (synced.error_code, synced.assignment) == (E.none, b"all")
        beat = await b.call(hb_req.HeartbeatRequest(group_id="g", generation_id=i32(1), member_id=first.member_id),
                            hb_resp.HeartbeatResponse)
        assert beat.error_code == E.none
        assert await describe(b, "g") == [("g", E.none, "Stable", 1)]
        listed = await b.call(list_req.ListGroupsRequest(), list_resp.ListGroupsResponse)
        assert [(g.group_id, g.protocol_type) for g in listed.groups] == [("g", "consumer")]
        left = await b.call(leave_req.LeaveGroupRequest(
            group_id="g", members=(leave_req.MemberIdentity(member_id=first.member_id),)), leave_resp.LeaveGroupResponse)
        assert (left.error_code, [m.error_code for m in left.members]) == (E.none, [E.none])
        assert await describe(b, "g") == [("g", E.none, "Empty", 0)]
        deleted = await b.call(dg_req.DeleteGroupsRequest(groups_names=("g", "never")), dg_resp.DeleteGroupsResponse)
        assert [(r.group_id, r.error_code) for r in deleted.results] == [("g", E.none), ("never", E.group_id_not_found)]

    with_broker(body)


def test_offsets_are_committed_to_the_offsets_topic_and_fetched_back(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await coordinator_ready(b)
        await b.lead("t", [0])
        committed = await b.call(oc_req.OffsetCommitRequest(group_id="g", member_id="", topics=(
            oc_req.OffsetCommitRequestTopic(name="t", partitions=(
                oc_req.OffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(42),
                                                    committed_metadata="m"),
                oc_req.OffsetCommitRequestPartition(partition_index=i32(9), committed_offset=i64(1),
                                                    committed_metadata=""))),)), oc_resp.OffsetCommitResponse)
        assert [(p.partition_index, p.error_code) for t in committed.topics for p in t.partitions] == [
            (0, E.none), (9, E.unknown_topic_or_partition)]
        assert b.replica_manager.partitions[(OFFSETS_TOPIC, 0)].log_end_offset == 1  # type: ignore[index]
        fetched = await b.call(of_req.OffsetFetchRequest(group_id="g", topics=(
            of_req.OffsetFetchRequestTopic(name="t", partition_indexes=(i32(0),)),)), of_resp.OffsetFetchResponse)
        assert [(p.committed_offset, p.metadata, p.error_code) for t in fetched.topics for p in t.partitions] == [
            (42, "m", E.none)]

    with_broker(body)


def test_groups_of_partitions_led_elsewhere_are_not_coordinated_here(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        assert (await join(b, "g")).error_code == E.not_coordinator
        assert await describe(b, "g") == [("g", E.not_coordinator, "", 0)]
        # OffsetFetch v8: a group that fails has no topics, as Kafka answers (the oracle's find).
        fetched = await b.call(of8_req.OffsetFetchRequest(groups=(of8_req.OffsetFetchRequestGroup(
            group_id="g", topics=(of8_req.OffsetFetchRequestTopics(name="t", partition_indexes=(i32(0),)),)),)),
            of8_resp.OffsetFetchResponse)
        assert [(g.group_id, g.error_code, g.topics) for g in fetched.groups] == [("g", E.not_coordinator, ())]

    with_broker(body)


def test_group_apis_need_their_acls(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await coordinator_ready(b)
        assert (await join(b, "theirs")).error_code == E.member_id_required  # the group exists
        b.enable_authorizer()
        b.allow(ALICE, Operation.READ, ResourceType.GROUP, "mine")
        b.allow(ALICE, Operation.DESCRIBE, ResourceType.GROUP, "mine")
        assert (await join(b, "theirs", principal=ALICE)).error_code == E.group_authorization_failed
        assert (await join(b, "mine", principal=ALICE)).error_code == E.member_id_required
        refused = await b.call(fc3_req.FindCoordinatorRequest(key="theirs", key_type=i8(0)),
                               fc3_resp.FindCoordinatorResponse, principal=ALICE)
        assert refused.error_code == E.group_authorization_failed
        assert await describe(b, "mine", "theirs", principal=ALICE) == [
            ("mine", E.none, "Empty", 0), ("theirs", E.group_authorization_failed, "", 0)]
        listed = await b.call(list_req.ListGroupsRequest(), list_resp.ListGroupsResponse, principal=ALICE)
        assert [g.group_id for g in listed.groups] == ["mine"]  # without Describe on the cluster
        b.allow(ALICE, Operation.DESCRIBE, ResourceType.CLUSTER)
        listed = await b.call(list_req.ListGroupsRequest(), list_resp.ListGroupsResponse, principal=ALICE)
        assert sorted(g.group_id for g in listed.groups) == ["mine", "theirs"]
        deleted = await b.call(dg_req.DeleteGroupsRequest(groups_names=("mine",)), dg_resp.DeleteGroupsResponse,
                               principal=ALICE)
        assert [r.error_code for r in deleted.results] == [E.group_authorization_failed]
        beat = await b.call(hb_req.HeartbeatRequest(group_id="theirs", generation_id=i32(1), member_id="x"),
                            hb_resp.HeartbeatResponse, principal=ALICE)
        assert beat.error_code == E.group_authorization_failed

    with_broker(body)


async def offset_delete(b: FakeBroker, group: str, *partitions: tuple[str, int], **options: object
                        ) -> tuple[E, list[tuple[str, int, E]]]:
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    response = await b.call(od_req.OffsetDeleteRequest(group_id=group, topics=tuple(
        od_req.OffsetDeleteRequestTopic(name=t, partitions=tuple(
            od_req.OffsetDeleteRequestPartition(partition_index=i32(p)) for p in ps)) for t, ps in by_topic.items())),
        od_resp.OffsetDeleteResponse, **options)  # type: ignore[arg-type]
    return response.error_code, [(t.name, p.partition_index, p.error_code) for t in response.topics
                                 for p in t.partitions]


async def commit(b: FakeBroker, group: str, topic: str, offset: int) -> None:
    committed = await b.call(oc_req.OffsetCommitRequest(group_id=group, member_id="", topics=(
        oc_req.OffsetCommitRequestTopic(name=topic, partitions=(
            oc_req.OffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(offset),
                                                committed_metadata=""),)),)), oc_resp.OffsetCommitResponse)
    assert [p.error_code for t in committed.topics for p in t.partitions] == [E.none]


def test_offset_delete_errors(with_broker: WithBroker) -> None:
    """OffsetDelete (KIP-496): NOT_COORDINATOR before the group's partition is led here,
    GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION per partition, Delete on the group and Read on
    each topic with an authorizer on, and the offsets gone after a success."""
    async def body(b: FakeBroker) -> None:
        assert await offset_delete(b, "g", ("t", 0)) == (E.not_coordinator, [])
        await coordinator_ready(b)
        await b.lead("t", [0])
        await b.lead("u", [0])
        assert await offset_delete(b, "nobody", ("t", 0)) == (E.group_id_not_found, [])
        await commit(b, "g", "t", 5)
        await commit(b, "g", "u", 6)
        assert await offset_delete(b, "g", ("t", 0), ("t", 3), ("nope", 0)) == (
            E.none, [("t", 0, E.none), ("t", 3, E.unknown_topic_or_partition),
                     ("nope", 0, E.unknown_topic_or_partition)])
        b.enable_authorizer()
        assert await offset_delete(b, "g", ("u", 0), principal=ALICE) == (E.group_authorization_failed, [])
        b.allow(ALICE, Operation.DELETE, ResourceType.GROUP, "g")
        assert await offset_delete(b, "g", ("u", 0), principal=ALICE) == (
            E.none, [("u", 0, E.topic_authorization_failed)])
        b.allow(ALICE, Operation.READ, ResourceType.TOPIC, "u")
        assert await offset_delete(b, "g", ("u", 0), principal=ALICE) == (E.none, [("u", 0, E.none)])
        fetched = await b.call(of_req.OffsetFetchRequest(group_id="g", topics=None), of_resp.OffsetFetchResponse)
        assert [t.name for t in fetched.topics] == []

    with_broker(body)
