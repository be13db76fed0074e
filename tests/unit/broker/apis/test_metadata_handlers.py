"""Metadata and DescribeCluster handlers on a FakeBroker: what the metadata cache shows, auto
topic creation, unknown and invalid names, and Kafka's Describe/Create rules."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from fake_broker import BROKER_ID, OTHER_BROKER, FakeBroker, WithBroker
from kio.schema.describe_cluster.v0 import request as dc_req
from kio.schema.describe_cluster.v0 import response as dc_resp
from kio.schema.describe_cluster.v1 import request as dc1_req
from kio.schema.describe_cluster.v1 import response as dc1_resp
from kio.schema.metadata.v11 import request as md11_req
from kio.schema.metadata.v11 import response as md11_resp
from kio.schema.metadata.v12 import request as md_req
from kio.schema.metadata.v12 import response as md_resp
from kio.static.primitive import i8

from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.errors import InvalidReplicationFactorError
from odradek.security.acls import KafkaPrincipal, Operation, ResourceType

ALICE = KafkaPrincipal("User", "alice")


def metadata(topics: Sequence[str] | None, auto_create: bool = True) -> md_req.MetadataRequest:
    return md_req.MetadataRequest(
        topics=None if topics is None else tuple(md_req.MetadataRequestTopic(topic_id=None, name=t) for t in topics),
        allow_auto_topic_creation=auto_create, include_topic_authorized_operations=False)


async def topic_errors(b: FakeBroker, request: md_req.MetadataRequest, **options: object) -> dict[str, E]:
    response = await b.call(request, md_resp.MetadataResponse, **options)  # type: ignore[arg-type]
    return {t.name: t.error_code for t in response.topics}


def test_metadata_shows_the_brokers_on_the_listener_and_each_partitions_leadership(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0, 1], leader_epoch=4)
        await b.lead("followed", [0], leader=OTHER_BROKER)  # its leader is not alive
        response = await b.call(metadata(None), md_resp.MetadataResponse)
        assert (response.cluster_id, response.controller_id) == ("fake-cluster", BROKER_ID)
        assert [(n.node_id, n.host, n.port) for n in response.brokers] == [(BROKER_ID, "h0", 9090)]
        assert {t.name: [(p.partition_index, p.error_code, p.leader_id, p.leader_epoch, tuple(p.isr_nodes))
                         for p in t.partitions] for t in response.topics} == {
            "t": [(0, E.none, BROKER_ID, 4, (BROKER_ID,)), (1, E.none, BROKER_ID, 4, (BROKER_ID,))],
            "followed": [(0, E.leader_not_available, -1, 0, (OTHER_BROKER,))]}
        cluster = await b.call(dc_req.DescribeClusterRequest(include_cluster_authorized_operations=False),
                               dc_resp.DescribeClusterResponse)
        assert (cluster.cluster_id, cluster.controller_id, [n.broker_id for n in cluster.brokers]) == \
            ("fake-cluster", BROKER_ID, [BROKER_ID])

    with_broker(body)


def test_unknown_and_invalid_names_without_auto_creation(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        assert await topic_errors(b, metadata(["t", "missing", "bad name!"])) == {
            "t": E.none, "missing": E.unknown_topic_or_partition, "bad name!": E.invalid_topic_exception}
        assert b.zk.topics == {"t"}

    with_broker(body)


def test_auto_creation_answers_leader_not_available_then_shows_the_topic(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        assert await topic_errors(b, metadata(["fresh"], auto_create=False)) == {"fresh": E.unknown_topic_or_partition}
        assert await topic_errors(b, metadata(["fresh"])) == {"fresh": E.leader_not_available}
        response = await b.call(metadata(["fresh"]), md_resp.MetadataResponse)
        (topic,) = response.topics
        assert (topic.error_code, [p.leader_id for p in topic.partitions]) == (E.none, [BROKER_ID, BROKER_ID])
        b.topic_admin.fail_with = InvalidReplicationFactorError("Replication factor: 3 larger than available brokers: 1.")
        assert await topic_errors(b, metadata(["other"])) == {"other": E.invalid_replication_factor}

    with_broker(body, props={"auto.create.topics.enable": "true", "num.partitions": "2"})


def test_metadata_shows_only_what_the_principal_may_describe(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        await b.lead("secret", [0])
        b.enable_authorizer()
        b.allow(ALICE, Operation.DESCRIBE, ResourceType.TOPIC, "t")
        b.allow(ALICE, Operation.DESCRIBE, ResourceType.TOPIC, "fresh")
        assert await topic_errors(b, metadata(None), principal=ALICE) == {"t": E.none}
        # Named topics without Describe are refused whether they exist or not.
        assert await topic_errors(b, metadata(["t", "secret", "missing"]), principal=ALICE) == {
            "t": E.none, "secret": E.topic_authorization_failed, "missing": E.topic_authorization_failed}
        # Auto-creation needs Create on the cluster or on the topic.
        assert await topic_errors(b, metadata(["fresh"]), principal=ALICE) == {"fresh": E.topic_authorization_failed}
        b.allow(ALICE, Operation.CREATE, ResourceType.CLUSTER)
        assert await topic_errors(b, metadata(["fresh"]), principal=ALICE) == {"fresh": E.leader_not_available}
        assert "fresh" in b.zk.topics

    with_broker(body, props={"auto.create.topics.enable": "true"})


# ----------------------------------------------------------------------------- what the oracle found


def test_an_unknown_internal_topic_is_still_internal(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        response = await b.call(metadata(["__consumer_offsets"], auto_create=False), md_resp.MetadataResponse)
        assert [(t.error_code, t.is_internal) for t in response.topics] == [(E.unknown_topic_or_partition, True)]

    with_broker(body)


def test_topics_named_by_id_replace_topics_named_by_name(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        await b.lead("u", [0])
        unknown = uuid.UUID(int=0xABC)
        request = md_req.MetadataRequest(topics=(
            md_req.MetadataRequestTopic(topic_id=b.metadata_cache.topic_id("t"), name=None),
            md_req.MetadataRequestTopic(topic_id=unknown, name=None),
            md_req.MetadataRequestTopic(topic_id=None, name="u")),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        response = await b.call(request, md_resp.MetadataResponse)
        assert [(t.name, t.topic_id, t.error_code) for t in response.topics] == [
            (None, unknown, E.unknown_topic_id), ("t", b.metadata_cache.topic_id("t"), E.none)]

    with_broker(body)


ALL_TOPIC_OPERATIONS = 0b1101_1111_1000  # read, write, create, delete, alter, describe, (alter) describe configs


def test_authorized_operations_are_given_when_asked_for(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        asked = md_req.MetadataRequest(topics=(md_req.MetadataRequestTopic(topic_id=None, name="t"),),
                                       allow_auto_topic_creation=False, include_topic_authorized_operations=True)
        response = await b.call(asked, md_resp.MetadataResponse)
        assert [t.topic_authorized_operations for t in response.topics] == [ALL_TOPIC_OPERATIONS]
        response = await b.call(metadata(["t"]), md_resp.MetadataResponse)
        assert [t.topic_authorized_operations for t in response.topics] == [-2147483648]
        b.enable_authorizer()
        b.allow(ALICE, Operation.DESCRIBE, ResourceType.TOPIC, "t")
        b.allow(ALICE, Operation.READ, ResourceType.TOPIC, "t")
        response = await b.call(asked, md_resp.MetadataResponse, principal=ALICE)  # type: ignore[arg-type]
        assert [t.topic_authorized_operations for t in response.topics] == [(1 << 3) | (1 << 8)]

    with_broker(body)


def test_describe_cluster_for_controller_endpoints_is_a_mismatched_endpoint_type(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        answer = await b.call(dc1_req.DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                             endpoint_type=i8(2)), dc1_resp.DescribeClusterResponse)
        assert (answer.error_code, answer.endpoint_type, answer.cluster_id, answer.brokers) == (
            E.mismatched_endpoint_type, 1, "", ())

    with_broker(body)


def test_topic_ids_before_v12_fail_the_whole_request(with_broker: WithBroker) -> None:
    """KafkaApis refuses topic ids (or a topic without a name) in Metadata v10-11 with
    INVALID_REQUEST for every topic of the request, no brokers and no controller."""
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        topic_id = b.metadata_cache.topic_id("t")
        request = md11_req.MetadataRequest(topics=(md11_req.MetadataRequestTopic(topic_id=topic_id, name=None),
                                                   md11_req.MetadataRequestTopic(topic_id=None, name="t")),
                                           allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        response = await b.call(request, md11_resp.MetadataResponse)
        assert (response.brokers, response.controller_id) == ((), -1)
        assert [(t.name, t.topic_id, t.error_code) for t in response.topics] == [
            ("", topic_id, E.invalid_request), ("t", None, E.invalid_request)]

    with_broker(body)
