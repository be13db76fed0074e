"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments on a FakeBroker whose
controller answers at once: what reaches the controller, the answers (an elected leader only
once this broker's metadata shows it), and the refusals (not the controller, no Alter or
Describe on the cluster, an unknown election type)."""

from __future__ import annotations

import datetime
from typing import Any

from fake_broker import BROKER_ID, FakeBroker, WithBroker
from kio.schema.alter_partition_reassignments.v0 import request as alter_v0_req
from kio.schema.alter_partition_reassignments.v0 import response as alter_v0_resp
from kio.schema.alter_partition_reassignments.v1 import request as alter_req
from kio.schema.alter_partition_reassignments.v1 import response as alter_resp
from kio.schema.elect_leaders.v0 import request as elect_v0_req
from kio.schema.elect_leaders.v0 import response as elect_v0_resp
from kio.schema.elect_leaders.v2 import request as elect_req
from kio.schema.elect_leaders.v2 import response as elect_resp
from kio.schema.list_partition_reassignments.v0 import request as list_req
from kio.schema.list_partition_reassignments.v0 import response as list_resp
from kio.static.primitive import i8, i32, i32Timedelta

from odradek.common import TopicPartition
from odradek.controller.context import ReplicaAssignment
from odradek.controller.events import (
    ApiPartitionReassignment,
    ControllerEvent,
    ElectionTrigger,
    ListPartitionReassignments,
    ReplicaLeaderElection,
)
from odradek.controller.leader_selectors import ElectionType
from odradek.protocol.errors import ApiError
from odradek.protocol.errors import ErrorCode as E
from odradek.security.acls import KafkaPrincipal, Operation, ResourceType

ADMIN = KafkaPrincipal("User", "admin")
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def elect(partitions: dict[str, list[int]] | None, election_type: int = 0, timeout_ms: int = 5000
          ) -> elect_req.ElectLeadersRequest:
    return elect_req.ElectLeadersRequest(
        election_type=i8(election_type), timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms)),
        topic_partitions=None if partitions is None else tuple(
            elect_req.TopicPartitions(topic=t, partitions=tuple(i32(p) for p in ps)) for t, ps in partitions.items()))


async def elected(b: FakeBroker, request: Any, principal: KafkaPrincipal = ADMIN
                  ) -> tuple[E, dict[TopicPartition, tuple[E, str | None]]]:
    response_type = elect_resp.ElectLeadersResponse if isinstance(request, elect_req.ElectLeadersRequest) \
        else elect_v0_resp.ElectLeadersResponse
    response = await b.call(request, response_type, principal=principal)
    return getattr(response, "error_code", E.none), {
        TopicPartition(r.topic, p.partition_id): (p.error_code, p.error_message)
        for r in response.replica_election_results for p in r.partition_result}


def answering(b: FakeBroker, answer: Any) -> list[ControllerEvent]:
    b.controller.answer = answer
    return b.controller.events


def test_elected_leaders_are_answered_once_this_broker_knows_them(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0, 1])
        events = answering(b, lambda e: (E.none, {T0: BROKER_ID, T1: ApiError(E.election_not_needed)}))
        assert await elected(b, elect({"t": [0, 1]})) == (E.none, {T0: (E.none, None),
                                                                   T1: (E.election_not_needed, None)})
        event, = events
        assert isinstance(event, ReplicaLeaderElection)
        assert (event.partitions, event.election, event.trigger) == (
            frozenset({T0, T1}), ElectionType.PREFERRED, ElectionTrigger.ADMIN_CLIENT)
    with_broker(body)


def test_all_partitions_leave_out_those_that_needed_no_election(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0, 1])
        await b.lead("u", [0])
        failure = ApiError(E.eligible_leaders_not_available, "Failed to elect leader for partition t-1")
        events = answering(b, lambda e: (E.none, {tp: failure if tp == T1 else ApiError(E.election_not_needed)
                                                  for tp in e.partitions}))
        assert await elected(b, elect(None, election_type=1)) == (E.none, {T1: (failure.error, failure.message)})
        assert events[0].partitions == {T0, T1, TopicPartition("u", 0)}
        assert events[0].election is ElectionType.UNCLEAN
    with_broker(body)


def test_a_leader_this_broker_never_learns_of_times_out(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        answering(b, lambda e: (E.none, {T0: 7}))  # a leader the metadata never shows
        assert await elected(b, elect({"t": [0]}, timeout_ms=50)) == (E.none, {T0: (E.request_timed_out, None)})
    with_broker(body)


def test_version_0_elects_preferred_leaders(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        events = answering(b, lambda e: (E.none, {T0: BROKER_ID}))
        request = elect_v0_req.ElectLeadersRequest(topic_partitions=(
            elect_v0_req.TopicPartitions(topic="t", partitions=(i32(0),)),))
        assert await elected(b, request) == (E.none, {T0: (E.none, None)})
        assert events[0].election is ElectionType.PREFERRED
    with_broker(body)


def test_elections_refused(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        # Not the active controller: every partition hears so.
        answering(b, lambda e: (E.not_controller, {}))
        assert await elected(b, elect({"t": [0, 1]})) == (E.none, {T0: (E.not_controller, None),
                                                                   T1: (E.not_controller, None)})
        top, results = await elected(b, elect({"t": [0]}, election_type=2))
        assert (top, results[T0][0]) == (E.invalid_request, E.invalid_request)
        # An authorizer, and no Alter on the cluster: nothing reaches the controller.
        events = answering(b, lambda e: (E.none, {}))
        sent = len(events)
        b.enable_authorizer()
        assert await elected(b, elect({"t": [0]})) == (E.cluster_authorization_failed,
                                                       {T0: (E.cluster_authorization_failed, None)})
        assert await elected(b, elect(None)) == (E.cluster_authorization_failed, {})
        assert len(events) == sent
        b.allow(ADMIN, Operation.ALTER, ResourceType.CLUSTER)
        assert await elected(b, elect({"t": [0]})) == (E.none, {})
        assert len(events) == sent + 1
    with_broker(body)


# ----------------------------------------------------------------------------- reassignments


def alter(targets: dict[TopicPartition, list[int] | None], allow_rf_change: bool = True
          ) -> alter_req.AlterPartitionReassignmentsRequest:
    by_topic: dict[str, list[alter_req.ReassignablePartition]] = {}
    for tp, replicas in targets.items():
        by_topic.setdefault(tp.topic, []).append(alter_req.ReassignablePartition(
            partition_index=i32(tp.partition), replicas=None if replicas is None else tuple(i32(r) for r in replicas)))
    return alter_req.AlterPartitionReassignmentsRequest(
        allow_replication_factor_change=allow_rf_change,
        topics=tuple(alter_req.ReassignableTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()))


async def altered(b: FakeBroker, request: Any, principal: KafkaPrincipal = ADMIN
                  ) -> tuple[tuple[E, str | None], dict[TopicPartition, tuple[E, str | None]]]:
    response_type = alter_resp.AlterPartitionReassignmentsResponse \
        if isinstance(request, alter_req.AlterPartitionReassignmentsRequest) \
        else alter_v0_resp.AlterPartitionReassignmentsResponse
    response = await b.call(request, response_type, principal=principal)
    return (response.error_code, response.error_message), {
        TopicPartition(t.name, p.partition_index): (p.error_code, p.error_message)
        for t in response.responses for p in t.partitions}


def test_reassignments_and_cancellations_reach_the_controller(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        refused = ApiError(E.invalid_replica_assignment, "Empty replica list specified in partition reassignment.")
        events = answering(b, lambda e: (E.none, {T0: ApiError(E.none), T1: refused}))
        assert await altered(b, alter({T0: [1, 2], T1: None}, allow_rf_change=False)) == (
            (E.none, None), {T0: (E.none, None), T1: (refused.error, refused.message)})
        event, = events
        assert isinstance(event, ApiPartitionReassignment)
        assert event.reassignments == {T0: (1, 2), T1: None}
        assert event.allow_replication_factor_change is False
        v0 = alter_v0_req.AlterPartitionReassignmentsRequest(topics=(alter_v0_req.ReassignableTopic(
            name="t", partitions=(alter_v0_req.ReassignablePartition(partition_index=i32(0), replicas=None),)),))
        await altered(b, v0)
        assert events[1].allow_replication_factor_change is True
    with_broker(body)


def test_reassignments_refused(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        answering(b, lambda e: (E.not_controller, {}))
        assert await altered(b, alter({T0: [1]})) == ((E.not_controller, None), {})
        events = answering(b, lambda e: (E.none, {}))
        sent = len(events)
        b.enable_authorizer()
        denied = (E.cluster_authorization_failed, "Cluster authorization failed.")
        assert await altered(b, alter({T0: [1], T1: None})) == (denied, {T0: denied, T1: denied})
        assert len(events) == sent
    with_broker(body)


async def listed(b: FakeBroker, partitions: dict[str, list[int]] | None, principal: KafkaPrincipal = ADMIN
                 ) -> tuple[E, dict[TopicPartition, tuple[list[int], list[int], list[int]]]]:
    request = list_req.ListPartitionReassignmentsRequest(topics=None if partitions is None else tuple(
        list_req.ListPartitionReassignmentsTopics(name=t, partition_indexes=tuple(i32(p) for p in ps))
        for t, ps in partitions.items()))
    response = await b.call(request, list_resp.ListPartitionReassignmentsResponse, principal=principal)
    return response.error_code, {
        TopicPartition(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas),
                                                    list(p.removing_replicas))
        for t in response.topics for p in t.partitions}


def test_ongoing_reassignments_are_listed(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        events = answering(b, lambda e: (E.none, {T0: ReplicaAssignment((1, 2, 0), (2,), (0,))}))
        assert await listed(b, None) == (E.none, {T0: ([1, 2, 0], [2], [0])})
        await listed(b, {"t": [0, 1]})
        assert [e.partitions for e in events if isinstance(e, ListPartitionReassignments)] == [None, {T0, T1}]
        answering(b, lambda e: (E.not_controller, {}))
        assert await listed(b, None) == (E.not_controller, {})
        b.enable_authorizer()
        assert await listed(b, None) == (E.cluster_authorization_failed, {})
        b.allow(ADMIN, Operation.DESCRIBE, ResourceType.CLUSTER)
        assert await listed(b, None) == (E.not_controller, {})
    with_broker(body)
