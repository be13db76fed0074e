"""Metadata and DescribeCluster handlers on a FakeBroker: what the metadata cache shows, auto
topic creation, unknown and invalid names, and Kafka's Describe/Create rules."""

from __future__ import annotations

from collections.abc import Sequence

from fake_broker import BROKER_ID, OTHER_BROKER, FakeBroker, WithBroker
from kio.schema.describe_cluster.v0 import request as dc_req
from kio.schema.describe_cluster.v0 import response as dc_resp
from kio.schema.metadata.v12 import request as md_req
from kio.schema.metadata.v12 import response as md_resp

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
