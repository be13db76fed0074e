"""CreateTopics, DeleteTopics and CreatePartitions handlers on a FakeBroker: the answers once the
metadata cache shows the outcome, validation, timeouts, Kafka's authorization rules."""

from __future__ import annotations

import datetime
import uuid

from fake_broker import BROKER_ID, FakeBroker, WithBroker
from kio.schema.create_partitions.v3 import request as cp_req
from kio.schema.create_partitions.v3 import response as cp_resp
from kio.schema.create_topics.v7 import request as ct_req
from kio.schema.create_topics.v7 import response as ct_resp
from kio.schema.delete_topics.v1 import request as dt1_req
from kio.schema.delete_topics.v1 import response as dt1_resp
from kio.schema.delete_topics.v6 import request as dt_req
from kio.schema.delete_topics.v6 import response as dt_resp
from kio.static.primitive import i16, i32

from odradek.protocol.errors import ErrorCode as E
from odradek.security.acls import KafkaPrincipal, Operation, ResourceType

ALICE = KafkaPrincipal("User", "alice")


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def creatable(name: str, partitions: int = 1, *, configs: dict[str, str | None] | None = None,
              assignments: dict[int, tuple[int, ...]] | None = None) -> ct_req.CreatableTopic:
    return ct_req.CreatableTopic(
        name=name, num_partitions=i32(partitions), replication_factor=i16(1 if partitions != -1 else -1),
        assignments=tuple(ct_req.CreatableReplicaAssignment(partition_index=i32(p), broker_ids=tuple(map(i32, r)))
                          for p, r in (assignments or {}).items()),
        configs=tuple(ct_req.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()))


async def create(b: FakeBroker, *topics: ct_req.CreatableTopic, timeout_ms: int = 5000, validate_only: bool = False,
                 **options: object) -> dict[str, ct_resp.CreatableTopicResult]:
    response = await b.call(ct_req.CreateTopicsRequest(topics=topics, timeout=ms(timeout_ms), validate_only=validate_only),
                            ct_resp.CreateTopicsResponse, **options)  # type: ignore[arg-type]
    return {t.name: t for t in response.topics}


async def delete(b: FakeBroker, *topics: tuple[str | None, uuid.UUID], **options: object
                 ) -> list[tuple[str | None, E, str | None]]:
    response = await b.call(dt_req.DeleteTopicsRequest(
        topics=tuple(dt_req.DeleteTopicState(name=n, topic_id=i) for n, i in topics), timeout=ms(5000)),
        dt_resp.DeleteTopicsResponse, **options)  # type: ignore[arg-type]
    return [(r.name, r.error_code, r.error_message) for r in response.responses]


async def add_partitions(b: FakeBroker, *topics: cp_req.CreatePartitionsTopic, **options: object
                         ) -> dict[str, tuple[E, str | None]]:
    response = await b.call(cp_req.CreatePartitionsRequest(topics=topics, timeout=ms(5000), validate_only=False),
                            cp_resp.CreatePartitionsResponse, **options)  # type: ignore[arg-type]
    return {r.name: (r.error_code, r.error_message) for r in response.results}


ZERO = uuid.UUID(int=0)


# ----------------------------------------------------------------------------- CreateTopics


def test_create_topics_answers_once_the_partitions_have_leaders(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        checked = (await create(b, creatable("dry", 2), validate_only=True))["dry"]
        assert (checked.error_code, checked.num_partitions, checked.topic_id) == (E.none, 2, None)  # the zero id
        assert "dry" not in b.zk.topics
        result = (await create(b, creatable("t", 3, configs={"retention.ms": "1000"})))["t"]
        assert (result.error_code, result.num_partitions, result.replication_factor) == (E.none, 3, 1)
        assert result.topic_id == b.metadata_cache.topic_id("t") != ZERO
        assert {c.name: c.value for c in result.configs}["retention.ms"] == "1000"
        assert {p: m.leader for p, m in b.metadata_cache.partitions_of("t").items()} == {0: BROKER_ID, 1: BROKER_ID,
                                                                                          2: BROKER_ID}

    with_broker(body)


def test_create_topics_refuses_invalid_requests_topic_by_topic(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("exists", [0])
        got = await create(b, creatable("twice"), creatable("twice"), creatable("both", 1, assignments={0: (0,)}),
                           creatable("nulls", configs={"retention.ms": None}), creatable("exists"), creatable("ok"))
        assert {name: r.error_code for name, r in got.items()} == {
            "twice": E.invalid_request, "both": E.invalid_request, "nulls": E.invalid_request,
            "exists": E.topic_already_exists, "ok": E.none}
        assert got["twice"].error_message == "Found multiple entries for this topic."
        # Kafka answers each entry of a topic named twice (the differential oracle's find).
        response = await b.call(ct_req.CreateTopicsRequest(topics=(creatable("dup"), creatable("dup")),
                                                           timeout=ms(5000), validate_only=False),
                                ct_resp.CreateTopicsResponse)
        assert [(t.name, t.error_code) for t in response.topics] == [("dup", E.invalid_request)] * 2
        b.topic_admin.fail_with = RuntimeError("ZooKeeper exploded")
        failed = (await create(b, creatable("boom")))["boom"]
        assert (failed.error_code, failed.error_message) == (E.unknown_server_error, "RuntimeError: ZooKeeper exploded")

    with_broker(body)


def test_create_topics_times_out_when_no_leader_comes(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        b.topic_admin.online = False
        result = (await create(b, creatable("stuck", 2), timeout_ms=50))["stuck"]
        assert (result.error_code, result.num_partitions) == (E.request_timed_out, 2)
        assert "stuck" in b.zk.topics  # created all the same

    with_broker(body)


def test_create_topics_needs_create_and_reports_configs_only_with_describe_configs(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        b.enable_authorizer()
        b.allow(ALICE, Operation.CREATE, ResourceType.TOPIC, "mine")
        got = await create(b, creatable("mine"), creatable("theirs"), principal=ALICE)
        assert (got["mine"].error_code, got["mine"].topic_config_error_code) == (E.none, E.topic_authorization_failed)
        # Without DescribeConfigs nothing of the topic is told, created or not (as Kafka: the oracle's find).
        assert (got["mine"].num_partitions, got["mine"].replication_factor, got["mine"].topic_id) == (-1, -1, None)
        assert (got["theirs"].error_code, got["theirs"].topic_config_error_code) == (
            E.topic_authorization_failed, E.topic_authorization_failed)
        assert b.zk.topics == {"mine"}
        b.allow(ALICE, Operation.CREATE, ResourceType.CLUSTER)
        b.allow(ALICE, Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, "theirs")
        got = await create(b, creatable("theirs"), principal=ALICE)
        assert got["theirs"].error_code == E.none and got["theirs"].configs

    with_broker(body)


# ----------------------------------------------------------------------------- DeleteTopics


def test_delete_topics_by_name_or_id_answers_once_they_are_gone(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("a", [0])
        await b.lead("b", [0, 1])
        b_id = b.metadata_cache.topic_id("b")
        assert await delete(b, ("a", ZERO), (None, b_id), (None, uuid.uuid4()), ("a", b_id)) == [
            ("a", E.none, None), ("b", E.none, None), (None, E.unknown_topic_id, "Unknown topic id."),
            ("a", E.invalid_request, "You may not specify both topic name and topic id.")]
        assert b.metadata_cache.topics() == []
        assert await delete(b, ("a", ZERO)) == [("a", E.unknown_topic_or_partition, "Topic 'a' does not exist.")]
        # Each result carries the request's topic id (zero when named by name), as Kafka echoes it.
        await b.lead("c", [0])
        response = await b.call(dt_req.DeleteTopicsRequest(topics=(dt_req.DeleteTopicState(name="c", topic_id=ZERO),),
                                                           timeout=ms(5000)), dt_resp.DeleteTopicsResponse)
        assert [(r.name, r.topic_id) for r in response.responses] == [("c", None)]  # kio's zero id

    with_broker(body)


def test_delete_topics_refused_when_deletion_is_disabled(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("a", [0])
        assert [e for _, e, _ in await delete(b, ("a", ZERO))] == [E.topic_deletion_disabled]
        old = await b.call(dt1_req.DeleteTopicsRequest(topic_names=("a",), timeout=ms(5000)),
                           dt1_resp.DeleteTopicsResponse)
        assert [r.error_code for r in old.responses] == [E.invalid_request]  # before TOPIC_DELETION_DISABLED
        assert b.metadata_cache.topics() == ["a"]

    with_broker(body, props={"delete.topic.enable": "false"})


def test_delete_topics_needs_delete_and_hides_names_without_describe(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("a", [0])
        a_id = b.metadata_cache.topic_id("a")
        b.enable_authorizer()
        refused = [(n, e) for n, e, _ in await delete(b, ("a", ZERO), (None, a_id), principal=ALICE)]
        assert refused == [("a", E.topic_authorization_failed), (None, E.topic_authorization_failed)]
        b.allow(ALICE, Operation.DELETE, ResourceType.TOPIC, "a")
        assert [(n, e) for n, e, _ in await delete(b, ("a", ZERO), principal=ALICE)] == [("a", E.none)]

    with_broker(body)


# ----------------------------------------------------------------------------- CreatePartitions


def test_create_partitions_numbers_explicit_assignments_after_the_existing_partitions(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        await b.lead("u", [0, 1])
        got = await add_partitions(
            b, cp_req.CreatePartitionsTopic(name="t", count=i32(3), assignments=None),
            cp_req.CreatePartitionsTopic(name="u", count=i32(4), assignments=(
                cp_req.CreatePartitionsAssignment(broker_ids=(i32(0),)),
                cp_req.CreatePartitionsAssignment(broker_ids=(i32(0),)))))
        assert got == {"t": (E.none, None), "u": (E.none, None)}
        assert b.topic_admin.added == [("t", 3, None), ("u", 4, {2: [0], 3: [0]})]
        assert sorted(b.metadata_cache.partitions_of("t")) == [0, 1, 2]

    with_broker(body)


def test_create_partitions_errors(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        await b.lead("secret", [0])
        b.enable_authorizer()
        b.allow(ALICE, Operation.ALTER, ResourceType.TOPIC, "t")
        b.allow(ALICE, Operation.ALTER, ResourceType.TOPIC, "nope")
        b.allow(ALICE, Operation.ALTER, ResourceType.TOPIC, "twice")
        got = await add_partitions(b, cp_req.CreatePartitionsTopic(name="nope", count=i32(2), assignments=None),
                                   cp_req.CreatePartitionsTopic(name="twice", count=i32(2), assignments=None),
                                   cp_req.CreatePartitionsTopic(name="twice", count=i32(3), assignments=None),
                                   cp_req.CreatePartitionsTopic(name="secret", count=i32(2), assignments=None),
                                   principal=ALICE)
        assert got == {"nope": (E.unknown_topic_or_partition, "The topic 'nope' does not exist."),
                       "twice": (E.invalid_request, "Duplicate topic in request."),
                       "secret": (E.topic_authorization_failed, "The topic authorization is failed.")}
        assert b.topic_admin.added == []

    with_broker(body)


def test_only_the_active_controller_creates_deletes_or_grows_topics(with_broker: WithBroker) -> None:
    """As Kafka's KafkaApis in ZooKeeper mode (the differential oracle's find): any other broker
    answers NOT_CONTROLLER for each topic and writes nothing."""
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        b.controller.is_active = False
        created = await create(b, creatable("new"), creatable("new"))
        assert [(name, r.error_code) for name, r in created.items()] == [("new", E.not_controller)]
        assert await delete(b, ("t", ZERO)) == [("t", E.not_controller, None)]
        grown = await add_partitions(b, cp_req.CreatePartitionsTopic(name="t", count=i32(3), assignments=None))
        assert {name: error for name, (error, _) in grown.items()} == {"t": E.not_controller}
        assert b.zk.topics == {"t"} and len(b.metadata_cache.partitions_of("t")) == 1

    with_broker(body)
